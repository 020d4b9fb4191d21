"""An instance type's roofline prices kept by value for one process: its prefill passes and its decode step fit
(:mod:`pdplan.serving.roles`), which a search asks for again on every deployment that binds the same instance type.

**Why.** :func:`pdplan.serving.resolve.bind` makes a new :class:`~pdplan.serving.role_hardware.RoleHardware` for
every deployment it binds (its kernel table, precision and perf data are new objects, equal by value), so the same
instance type was priced afresh by the screen's tables, by each exactly evaluated plan that uses it, by a concave
decode law's second line (its bound builds the model again), and by the colocated baseline's exact plan. Counted on
the default ``optimize`` (issue #27, docs/accuracy.md §7.21): 47 roofline passes for 17 distinct inputs;
``examples/deepseek-v3-wide-ep.yaml``: 82 for 39.

**Keys.** The hardware by value (dataclass equality over every field: the model, GPU, kernel table, parallelism,
precision, engine and perf data), looked up under a summary of its parallelism and names, and the other arguments by
their exact doubles with their shapes and dtypes (:func:`pdplan.queueing.exact_memo.exact_key`). A result is the
object the first call built, with every array it holds made read-only (a caller that tried to change one fails
loudly), so a later caller reads exactly what a fresh computation gives: the functions kept are pure. Nothing is
looked up by an object's identity. At most :data:`ENTRIES` results per memo, the oldest dropped first;
:func:`pdplan.queueing.exact_memo.clear_all` empties it (a search timed from scratch). The colocated chunk prices
(:func:`~pdplan.serving.roles.chunk_price`) are not kept: measured, keeping them cost more instructions than they
saved on the default and mixed-fleet, whose colocated instance types are priced once each (docs/accuracy.md §7.21).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import numpy as np

from pdplan.queueing.exact_memo import exact_key, forgets
from pdplan.serving.role_hardware import RoleHardware

R = TypeVar("R")

ENTRIES = 64
"""Results held per memo: a search's instance types times the passes each is priced at (the default: 17 distinct
prefill passes and decode fits; the largest bundled example, mixed-fleet, 61)."""


def arguments_key(*values: object) -> bytes:
    """``values`` by their exact doubles, each array-like with its shape and dtype (a scalar and a one-element array
    broadcast differently)."""
    parts: list[object] = []
    for value in values:
        if value is None or isinstance(value, str | bool):
            parts.append(str(value))
        else:
            array = np.asarray(value)
            parts += [array.dtype.str, tuple(array.shape), array]
    return exact_key(*parts)


def _summary(hw: RoleHardware) -> Hashable:
    """A hashable digest of ``hw`` that equal instance types share (the lookup; equality decides)."""
    return (hw.model.name, hw.gpu.name, hw.tp, hw.pp, hw.dp, hw.ep, hw.expert_gather, hw.moe_kernel, hw.kv_block_tokens)


def _freeze(value: object, depth: int) -> None:
    """Every numpy array ``value`` is or holds (dataclass fields, tuples), ``depth`` levels deep, made read-only."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif depth > 0 and isinstance(value, tuple):
        for item in value:
            _freeze(item, depth - 1)
    elif depth > 0 and hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            _freeze(getattr(value, name), depth - 1)


class HardwareMemo(Generic[R]):
    """Results of one pure function of an instance type and further arguments (module docstring)."""

    def __init__(self, entries: int = ENTRIES) -> None:
        self.entries = entries
        self.held: OrderedDict[tuple[Hashable, bytes], list[tuple[RoleHardware, R]]] = OrderedDict()
        forgets(self.clear)

    def get(self, hw: RoleHardware, key: bytes, compute: Callable[[], R]) -> R:
        """The result for ``hw`` and the arguments ``key`` (:func:`arguments_key`), computed by ``compute`` the
        first time."""
        slot = (_summary(hw), key)
        for held, value in self.held.get(slot, ()):
            if held == hw:
                return value
        value = compute()
        _freeze(value, depth=4)
        self.held.setdefault(slot, []).append((hw, value))
        while len(self.held) > self.entries:
            self.held.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every result."""
        self.held.clear()
