"""Goodput searches a prefix cache's fixed point can skip: a colocated probe whose hit rates changed nothing.

:func:`pdplan.serving.build.goodput_model` starts its self-consistent rate with one goodput search
(:mod:`pdplan.serving.cache_root`), and the screen searches two models per cache setting. Where an LRU's hit rate
collapses to exactly 0 above some rate (the cache holds no history long enough for the user to come back), every
model built above it is the same colocated model: the same classes (all misses), the same cells and prices, and so
the same snapshots. examples/chat-ppd.yaml's colocated pick probed 9.36, 9.08 and 9.02 req/s there when each probe
was a goodput search (until the root, docs/accuracy.md §7.16), each finding the same 7.6937292541612665 req/s.

Two models of one bound deployment (one resolved scenario: a search's) are taken as the same when their
**fingerprint** is: a digest of the exact bytes of every field of the :class:`~pdplan.serving.colocated.ColocatedModel`
but ``res`` and ``plain``. ``res`` is the deployment bound to that scenario at a cache rate
(:func:`pdplan.serving.build.with_cache_rate`), the deployment part of the key; ``plain``, the same deployment's
model without the cache, is priced from it alone (the first probe's, reused, or the screen's own) and read by no
snapshot. The cache rate is what the fingerprint leaves out: the build reads it
(:func:`pdplan.serving.colocated_cache.cached_cells`: the classes), a snapshot does not, and the classes' own
``rate_rps`` enters only a read path's stability limit (:func:`pdplan.serving.limits.cache_read_limit`: a tier's
path utilisation over the rate), so it is kept in the fingerprint wherever a tier's read path carries any load. A
field of a type the digest does not know (not an array, number, string, tuple, dict or dataclass of those) gives no
fingerprint: the search runs. A search keeps one :class:`SameHits` (:attr:`pdplan.serving.build.PpdProbes.same`),
which the screen's two builds per cache setting (:func:`pdplan.search.cache_options.screened_goodput`) fill in too.

A goodput search of the same model from a start in the same grid interval (:func:`pdplan.serving.goodput.
start_interval`) evaluates the same rates in the same batches and returns the same goodput: the first search's
answer is the answer, bit for bit (tests/unit/test_same_hits.py; ``pdplan optimize -f json`` of every example
with a prefix cache unchanged, 2026-12-07). An xPyD model is not fingerprinted: its build reads the cache rate
beyond the classes (the decode fixed point, :func:`pdplan.serving.disaggregated.build_disaggregated`; PPD's
placement, :mod:`pdplan.serving.ppd_model`), and its goodput search may start from a link-bound estimate of its own
(:func:`pdplan.serving.goodput.find_goodput`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.goodput import Goodput, ServingModel, find_goodput, start_interval
from pdplan.serving.limits import Limit
from pdplan.serving.resolve import ResolvedScenario
from pdplan.specs.scenario import SloSpec

if TYPE_CHECKING:
    from pdplan.serving.prefix_cache import CacheClasses

SHARED_FIELDS = ("res", "plain")
"""The fields every probe of one fixed point shares but for the cache rate (module docstring)."""


def fingerprint(model: object) -> bytes | None:
    """The digest of what a colocated model with a prefix cache evaluates (module docstring); None for any other
    model, or where a field's type is not one the digest knows."""
    if not isinstance(model, ColocatedModel) or model.cache is None:
        return None
    from pdplan.serving.prefix_cache import CacheClasses  # lazy: a model with a cache (start-up, issue #27)

    h = hashlib.blake2b(digest_size=16)
    for f in dataclasses.fields(model):
        if f.name in SHARED_FIELDS or not f.compare:  # compare=False: a memo of the model's own answers, not input
            continue
        value = getattr(model, f.name)
        if isinstance(value, CacheClasses):
            value = _less_rate(value)
        h.update(f.name.encode())
        if not _feed(h, value):
            return None
    return h.digest()


def _less_rate(classes: CacheClasses) -> CacheClasses:
    """``classes`` with ``rate_rps`` set to 0 where no tier's read path carries load (the rate is then read by
    nothing a goodput search evaluates: module docstring); unchanged otherwise."""
    if any(u != 0.0 for tier in classes.tiers for u in tier.path_utilisation.values()):
        return classes
    return dataclasses.replace(classes, rate_rps=0.0)


def _feed(h: Any, value: object) -> bool:
    """Add ``value``'s exact content to ``h``, tagged by its type (arrays by dtype, shape and bytes); False for a type
    it does not know."""
    if value is None or isinstance(value, bool | int | float | str | np.generic):
        h.update(f"{type(value).__name__}:{value!r};".encode())
        return True
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        h.update(f"array:{data.dtype.str}:{data.shape};".encode())
        h.update(data.tobytes())
        return True
    if isinstance(value, tuple | list):
        h.update(f"{type(value).__name__}:{len(value)};".encode())
        return all(_feed(h, v) for v in value)
    if isinstance(value, dict):
        h.update(f"dict:{len(value)};".encode())
        return all(_feed(h, k) and _feed(h, v) for k, v in sorted(value.items(), key=lambda kv: repr(kv[0])))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(f"{type(value).__qualname__}{{".encode())
        return all(_feed(h, getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


@dataclass
class SameHits:
    """The goodput searches of the colocated models of one resolved scenario (one fixed point's probes, or a whole
    search's: the screen's two builds per cache setting, :func:`pdplan.search.cache_options.screened_goodput`, and
    the exact plans' probes), by bound deployment (less the cache rate), SLO, fingerprint and start interval: a
    probe that builds a model already searched from the same interval reads that search's goodput (module
    docstring). The deployment fixes what ``res`` holds but the cache rate, given the one resolved scenario."""

    limits: dict[tuple[object, ...], Limit] = field(default_factory=dict)
    """Each fingerprinted model's stability limit (what fixes its grid), by deployment, SLO and fingerprint."""
    found: dict[tuple[object, ...], Goodput] = field(default_factory=dict)

    def goodput(self, res: ResolvedScenario[Any], model: ServingModel, slo: SloSpec, near_rps: float | None) -> Goodput:
        """:func:`find_goodput` of ``model`` (built on ``res``) from ``near_rps``, or the same model's from the same
        interval."""
        printed = fingerprint(model)
        if printed is None:
            return find_goodput(model, slo, near_rps)
        key = (res.hardware.deployment, slo.model_dump_json(), printed)
        limit = self.limits.get(key)
        if limit is not None and (*key, start_interval(limit, near_rps)) in self.found:
            return self.found[(*key, start_interval(limit, near_rps))]
        good = find_goodput(model, slo, near_rps)
        self.limits[key] = good.limit
        self.found[(*key, start_interval(good.limit, near_rps))] = good
        return good
