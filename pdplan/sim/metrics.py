"""Simulation results: per-request latencies, per-pool utilisation, summary statistics.

Conventions:

* ``ttft_s`` = first token − arrival (TTFT convention A or B, see :mod:`pdplan.sim.spec`);
  ``tpot_s`` = (finish − first token)/(output_tokens − 1), the mean time per output token after the
  first (NaN for one-token outputs); ``e2e_s`` = finish − arrival. With an overlap scheduler every token reaches the
  client the first token's lag after the iteration that sampled it (:mod:`pdplan.sim.overlap_lag`): ``first_token_s``,
  ``finish_s``, TTFT and E2E carry it, TPOT and the throughput window are the engine's own.
* Warm-up: the first ``warmup_count = floor(warmup_fraction · N)`` requests (by request id, i.e.
  arrival/issue order) are simulated but excluded from every statistic.
* Measurement window ``[w0, w1]``: w0 = arrival of the first counted request, w1 = arrival of the last
  request (falls back to the last finish when that is not later than w0). Pool utilisation (busy
  fraction per instance), mean active sequences (time average per instance) and throughput
  (completions and output tokens finishing inside the window, per second) are measured over it, so
  the start-up transient and the final drain are left out.
* ``mean_batch_size``: mean over iterations in the window that advanced decodes (decode pools,
  colocated) of the sequences in the iteration; for a prefill pool, requests per prefill batch.
* SLO attainment: fraction of counted requests with ``ttft ≤ ttft_slo`` and ``tpot ≤ tpot_slo``
  (one-token outputs meet the TPOT SLO vacuously).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from pdplan.errors import SpecError
from pdplan.sim.batch import Segments, Timeline
from pdplan.sim.spec import Requests
from pdplan.types import FloatArray
from pdplan.types import Int64Array as IntArray

Metric = Literal["ttft", "tpot", "e2e"]


@dataclass(frozen=True, slots=True)
class Summary:
    """Mean and percentiles of one latency metric over counted requests (NaNs ignored)."""

    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    count: int


@dataclass(frozen=True, slots=True)
class PoolStats:
    """Busy fraction and batching of one pool over the measurement window."""

    name: str
    instances: int
    utilisation: float
    mean_batch_size: float
    mean_active: float


@dataclass(frozen=True, slots=True)
class SimResult:
    """Per-request arrays [N] (absolute times and latencies, seconds) plus pool statistics."""

    input_tokens: IntArray
    output_tokens: IntArray
    arrival_s: FloatArray
    decode_admit_s: FloatArray
    first_token_s: FloatArray
    prefill_done_s: FloatArray
    """End of each request's prefill (NaN where the deployment does not record it: colocated instances)."""
    finish_s: FloatArray
    ttft_s: FloatArray
    tpot_s: FloatArray
    e2e_s: FloatArray
    warmup_count: int
    window_s: tuple[float, float]
    throughput_rps: float
    output_tokens_per_s: float
    pools: tuple[PoolStats, ...]

    @property
    def counted(self) -> NDArray[np.bool_]:
        """Boolean mask [N] of the requests that enter statistics (after warm-up)."""
        mask = np.ones(self.arrival_s.size, dtype=bool)
        mask[: self.warmup_count] = False
        return mask

    def values(self, metric: Metric) -> FloatArray:
        """Counted values of ``metric`` (``"ttft"``, ``"tpot"`` or ``"e2e"``), NaNs included."""
        arrays = {"ttft": self.ttft_s, "tpot": self.tpot_s, "e2e": self.e2e_s}
        if metric not in arrays:
            raise SpecError(f"metric must be one of ttft, tpot, e2e, got {metric!r}")
        return arrays[metric][self.warmup_count :]

    def summary(self, metric: Metric) -> Summary:
        """Mean, P50, P90, P99 (linear interpolation) of the counted, non-NaN values."""
        v = self.values(metric)
        v = v[~np.isnan(v)]
        if v.size == 0:
            nan = math.nan
            return Summary(nan, nan, nan, nan, 0)
        p50, p90, p99 = np.percentile(v, [50.0, 90.0, 99.0])
        return Summary(float(v.mean()), float(p50), float(p90), float(p99), int(v.size))

    def attainment(self, ttft_slo_s: float, tpot_slo_s: float = math.inf) -> float:
        """Fraction of counted requests meeting both SLOs (NaN TPOT counts as met)."""
        ttft = self.values("ttft")
        tpot = self.values("tpot")
        ok = (ttft <= ttft_slo_s) & (np.isnan(tpot) | (tpot <= tpot_slo_s))
        return float(np.mean(ok))

    def pool(self, name: str) -> PoolStats:
        """The statistics of pool ``name`` (``"prefill"``, ``"decode"`` or ``"colocated"``)."""
        for p in self.pools:
            if p.name == name:
                return p
        raise KeyError(name)


def warmup_count(n: int, warmup_fraction: float) -> int:
    """Requests dropped from statistics: floor(fraction · n); fraction must lie in [0, 1)."""
    if not 0.0 <= warmup_fraction < 1.0:
        raise SpecError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
    return math.floor(warmup_fraction * n)


def _window(arrival: FloatArray, finish: FloatArray, warm: int) -> tuple[float, float]:
    w0, w1 = float(arrival[warm]), float(arrival[-1])
    if w1 <= w0:
        w1 = float(np.nanmax(finish))
    return w0, w1


def pool_stats(name: str, instances: int, seg: Segments, window: tuple[float, float]) -> PoolStats:
    """Clip every busy record to the window; steps inside are pro-rated by overlap."""
    start, end, batch, steps = seg.arrays()
    w0, w1 = window
    span = w1 - w0
    if span <= 0 or start.size == 0:
        return PoolStats(name, instances, 0.0 if span > 0 else math.nan, math.nan, math.nan)
    overlap = np.clip(end, w0, w1) - np.clip(start, w0, w1)
    length = end - start
    frac = np.divide(overlap, length, out=np.zeros_like(overlap), where=length > 0)
    steps_in = steps * frac
    total_steps = float(steps_in.sum())
    mean_batch = float((batch * steps_in).sum() / total_steps) if total_steps > 0 else math.nan
    return PoolStats(
        name=name,
        instances=instances,
        utilisation=float(overlap.sum()) / (instances * span),
        mean_batch_size=mean_batch,
        mean_active=float((batch * overlap).sum()) / (instances * span),
    )


def build_result(
    req: Requests,
    tl: Timeline,
    pools: list[tuple[str, int, Segments]],
    warmup_fraction: float,
) -> SimResult:
    """Assemble a :class:`SimResult` from the recorded timeline and busy segments."""
    warm = warmup_count(req.count, warmup_fraction)
    arrival = np.asarray(tl.arrival, dtype=np.float64)
    sampled = np.asarray(tl.first_token, dtype=np.float64)
    done = np.asarray(tl.finish, dtype=np.float64)
    lag = np.asarray(tl.first_lag, dtype=np.float64)  # the overlap scheduler's: every token that late (overlap_lag)
    first, finish = sampled + lag, done + lag
    out = req.output_tokens
    after_first = np.where(out > 1, out - 1, 0).astype(np.float64)
    tpot = np.divide(done - sampled, after_first, out=np.full_like(first, np.nan), where=after_first > 0)
    window = _window(arrival, done, warm)
    w0, w1 = window
    inside = (done > w0) & (done <= w1)
    span = w1 - w0
    return SimResult(
        input_tokens=req.input_tokens,
        output_tokens=out,
        arrival_s=arrival,
        decode_admit_s=np.asarray(tl.admit, dtype=np.float64),
        first_token_s=first,
        prefill_done_s=np.asarray(tl.prefill_done, dtype=np.float64),
        finish_s=finish,
        ttft_s=first - arrival,
        tpot_s=tpot,
        e2e_s=finish - arrival,
        warmup_count=warm,
        window_s=window,
        throughput_rps=float(inside.sum()) / span if span > 0 else math.nan,
        output_tokens_per_s=float(out[inside].sum()) / span if span > 0 else math.nan,
        pools=tuple(pool_stats(name, n, seg, window) for name, n, seg in pools),
    )
