"""The engine's per-request time on TTFT (API server, per-layer dispatch, tokenisation): a delay outside the queues.

It is host work done beside the GPU (:meth:`pdplan.specs.engine.Overheads.request_overhead_s`), so it shifts every
request's TTFT without loading the prefill queue. One delay per deployment, at the workload's mean prompt length
(tokenisation is ~2 ms per 1K tokens, so the spread over prompt bins is a few ms at most).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.snapshot import Snapshot, TtftLike
from pdplan.types import FloatArray


@dataclass(frozen=True, slots=True)
class DelayedTtft:
    """``TTFT + delay_s`` for a TTFT mixture (same bins)."""

    inner: TtftLike
    delay_s: float

    @property
    def mean_s(self) -> FloatArray:
        return np.asarray(self.inner.mean_s + self.delay_s, dtype=np.float64)

    def cdf_per_bin(self, a_s: float) -> FloatArray:
        return self.inner.cdf_per_bin(a_s - self.delay_s)

    def quantile(self, q: float) -> FloatArray:
        return np.asarray(self.inner.quantile(q) + self.delay_s, dtype=np.float64)


def request_delay_s(hw: RoleHardware | None, mean_input_tokens: float) -> float:
    """The engine's per-request TTFT overhead for the instance that takes the request (0 without an engine)."""
    if hw is None or hw.engine is None:
        return 0.0
    return hw.engine.overheads.request_overhead_s(hw.model.num_layers, mean_input_tokens)


def with_request_delay(snap: Snapshot, delay_s: float) -> Snapshot:
    """``snap`` with every TTFT ``delay_s`` later."""
    if delay_s <= 0.0:
        return snap
    return dataclasses.replace(snap, ttft=DelayedTtft(snap.ttft, delay_s))
