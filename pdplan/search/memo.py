"""What successive searches of one process share: the parts of an ``optimize`` that do not depend on the target rate,
the objective or the dollar budget, memoised by value for the next search of the same scenario (docs/sweep.md §5).

A sweep runs one search per point, and its grid varies the target rate (or GPU budget) innermost: the four forecasts
of ``examples/sweeps/fleet.yaml`` are four searches of one scenario. Everything before the ranking is the same for
them — the resolved scenario, the per-role tables, the screened goodput of every candidate, the colocated baseline's
per-instance goodput, and each exactly evaluated deployment's goodput — and is computed once. Only the ranking, the
kept rows, each exact plan's operating point and the report are computed per search.

**Keys.** A context is keyed by the scenario's full JSON (frozen pydantic: every field, the SLO and the ``search:``
block included), the state of every file the scenario names by path (a trace: its resolved path, modification time
and size, as :func:`pdplan.io.workloads.load_trace` caches it, so an edited trace is read again), the catalogue by
value (its name → file maps, kernel tables and prices: the catalogue's own loads are cached by file path for the
process, :mod:`pdplan.io.catalog`) and the working folder (relative file names in the scenario); each memoised part
adds what its inputs add to those (the GPU budget, which bounds the instance types searched, the headroom and
redundancy, a deployment). A different value of any of them is another entry; nothing is looked up by an object's
identity. The memoised values are the objects the first search built, and their arrays are made read-only, so a later
search reads exactly what a fresh computation would give (the functions are deterministic), and one that tried to
change them would fail loudly.

**Bounds.** At most :data:`CONTEXTS` scenarios are held, least recently used dropped first; a screen is held only
when it has at most :data:`TILE_CANDIDATES` candidates (a large search's screen stays chunked and bounded, issue
#26). The map serves one search at a time (a sweep's workers are processes); it is not guarded for threads.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from pdplan.io.catalog import Catalog
from pdplan.search.screen import Candidates
from pdplan.serving import ResolvedScenario
from pdplan.specs.scenario import Scenario

CONTEXTS = 4
"""Scenarios whose shared parts are held at once (a sweep's points of one scenario run one after another)."""
TILE_CANDIDATES = 2**16
"""The most screened candidates held per context (the default family's screen has 8,192)."""
RECENT_ENTRIES = 256
"""The most entries of one context's :class:`Recent` map (the exact goodputs: a few per search)."""

T = TypeVar("T")


@dataclass
class Context:
    """One scenario's shared parts: its resolved scenario and each memoised part by its own key."""

    res: ResolvedScenario[Any]
    parts: dict[Hashable, Any] = field(default_factory=dict)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The part under ``key``, computed by ``compute`` the first time (its arrays then made read-only)."""
        if key not in self.parts:
            self.parts[key] = _frozen(compute())
        return self.parts[key]  # type: ignore[no-any-return]

    def tiles(self, key: Hashable, count: int, screen: Callable[[], Iterator[Candidates]]) -> Iterator[Candidates]:
        """The screen's tiles under ``key``: held when the space has at most :data:`TILE_CANDIDATES` candidates,
        else screened afresh in bounded chunks (the generator itself)."""
        if count > TILE_CANDIDATES:
            return screen()
        return iter(self.get(key, lambda: tuple(screen())))


class Recent(OrderedDict[Hashable, Any]):
    """A map holding its :data:`RECENT_ENTRIES` latest entries (the oldest dropped first)."""

    def __setitem__(self, key: Hashable, value: Any) -> None:
        super().__setitem__(key, value)
        while len(self) > RECENT_ENTRIES:
            self.popitem(last=False)


_CONTEXTS: OrderedDict[tuple[Hashable, ...], Context] = OrderedDict()


def context(scenario: Scenario, catalog: Catalog, resolve: Callable[[], ResolvedScenario[Any]]) -> Context:
    """The shared parts of ``scenario`` on ``catalog`` (module docstring, **Keys**), ``resolve`` giving its resolved
    scenario the first time."""
    key = (scenario.model_dump_json(), files_key(scenario), catalog_key(catalog), os.getcwd())
    found = _CONTEXTS.get(key)
    if found is None:
        found = Context(resolve())
        _CONTEXTS[key] = found
        while len(_CONTEXTS) > CONTEXTS:
            _CONTEXTS.popitem(last=False)
    else:
        _CONTEXTS.move_to_end(key)
    return found


def files_key(scenario: Scenario) -> tuple[tuple[str, int, int], ...]:
    """(resolved path, modification time in ns, size) of each existing file the scenario holds as a path field."""
    out = []
    for path in _paths(scenario.model_dump()):
        if path.is_file():
            stat = path.stat()
            out.append((str(path.resolve()), stat.st_mtime_ns, stat.st_size))
    return tuple(out)


def _paths(value: object) -> Iterator[Path]:
    if isinstance(value, Path):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _paths(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _paths(item)


def catalog_key(catalog: Catalog) -> tuple[Hashable, ...]:
    """The catalogue by value: each kind's name → file map, the user kernel tables and the price overrides."""
    files = tuple(sorted((kind, tuple(sorted(names.items()))) for kind, names in catalog.files.items()))
    return files, catalog.kernel_table_files, catalog.prices


def clear() -> None:
    """Forget every context (tests; a process that edits catalogue files between searches)."""
    _CONTEXTS.clear()


def _frozen(value: T) -> T:
    """``value`` with every numpy array it holds (in tuples, lists, dicts and dataclasses, one level of each deep)
    made read-only."""
    for array in _arrays(value, depth=3):
        array.flags.writeable = False
    return value


def _arrays(value: object, depth: int) -> Iterable[np.ndarray]:
    if isinstance(value, np.ndarray):
        yield value
    elif depth <= 0:
        return
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _arrays(item, depth - 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _arrays(item, depth - 1)
    elif hasattr(value, "__dataclass_fields__"):
        for f in fields(value):  # type: ignore[arg-type]
            yield from _arrays(getattr(value, f.name), depth - 1)
