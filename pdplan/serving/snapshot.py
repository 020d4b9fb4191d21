"""Distributions of one deployment at a batch of arrival rates, aligned to the workload cells.

A :class:`Snapshot` is what both deployment models (disaggregated, colocated) hand to the SLO and
goodput code: per rate ``[R]``, a TTFT mixture over prompt bins, a TPOT gamma mixture over the
flattened (input, output) cells ``[C]``, and pool utilisations. Attainment is
``A = Σ_c p_c P(TTFT ≤ a | c) P(TPOT ≤ b | c)`` (docs/queueing.md §5.2): TTFT and TPOT are produced on
different instances in a disaggregated deployment and are taken conditionally independent given
the request's cell; for the colocated baseline the product is an approximation (same instance).
Percentiles come from mixture cdfs by brentq (:func:`pdplan.queueing.mixture_quantile`).

TPOT convention (the simulator's, :mod:`pdplan.sim.metrics`): TPOT is the mean interval between
output tokens after the first, so it is *undefined* for a one-token output. Cells flagged in
``tpot_defined`` (False: one output token) are left out of the TPOT mean and percentiles (the
mixture is renormalised over the defined cells) and meet any TPOT threshold in the attainment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from pdplan.queueing import GammaMixture, joint_attainment
from pdplan.types import FloatArray, Utilisation


class TtftLike(Protocol):
    """TTFT mixture over ``L`` prompt bins (TtftMixture or queueing.ShiftedMixture)."""

    @property
    def mean_s(self) -> FloatArray: ...
    def cdf_per_bin(self, a_s: float) -> FloatArray: ...
    def quantile(self, q: float) -> FloatArray: ...


@dataclass(frozen=True, slots=True)
class Latency:
    """Mean and percentiles of one latency (seconds)."""

    mean: float
    p50: float
    p90: float
    p99: float

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass(frozen=True, slots=True)
class LatencySummary(Latency):
    """:class:`Latency` plus its value at the SLO's percentile (seconds)."""

    at_percentile: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    """TTFT/TPOT distributions at rates ``[R]``; ``ttft_bin[c]`` maps a cell to its TTFT bin."""

    rates: FloatArray
    prob: FloatArray
    decode_steps: FloatArray
    ttft: TtftLike
    ttft_bin: npt.NDArray[np.intp]
    tpot: GammaMixture
    utilisation: Utilisation
    tpot_defined: npt.NDArray[np.bool_] | None = None
    """``[C]``: False where the output is one token (TPOT undefined); None = all defined."""

    @property
    def tpot_reported(self) -> GammaMixture:
        """The TPOT mixture over cells with a defined TPOT (weights renormalised)."""
        if self.tpot_defined is None or bool(self.tpot_defined.all()):
            return self.tpot
        w = np.where(self.tpot_defined, self.tpot.prob, 0.0)
        return replace(self.tpot, prob=w / w.sum())

    def ttft_ok(self, slo_s: float) -> FloatArray:
        """``P(TTFT ≤ slo | cell)``, shape ``[R, C]``."""
        return np.asarray(self.ttft.cdf_per_bin(slo_s)[:, self.ttft_bin], dtype=np.float64)

    def tpot_ok(self, slo_s: float) -> FloatArray:
        """``P(TPOT ≤ slo | cell)``, shape ``[R, C]`` (1 where TPOT is undefined)."""
        ok = np.clip(self.tpot.cdf_per_bin(slo_s), 0.0, 1.0)
        if self.tpot_defined is not None:
            ok = np.where(self.tpot_defined[None, :], ok, 1.0)
        return np.asarray(ok, dtype=np.float64)

    def attainment(self, ttft_s: float, tpot_s: float) -> FloatArray:
        """Fraction of requests meeting both thresholds, per rate."""
        ok_t = np.clip(self.ttft_ok(ttft_s), 0.0, 1.0)
        return joint_attainment(ok_t, self.tpot_ok(tpot_s), self.prob)

    def reported_tpot_attainment(self, tpot_s: float) -> FloatArray:
        """``P(TPOT ≤ slo)`` over the requests whose TPOT is defined (the law the TPOT percentiles read)."""
        return self._reported_tpot_share(self.tpot_ok(tpot_s))

    def _reported_tpot_share(self, ok_tpot: FloatArray) -> FloatArray:
        """Per-cell TPOT successes ``[R, C]`` weighted over the cells whose TPOT is defined."""
        if self.tpot_defined is None:
            return np.asarray(ok_tpot @ self.prob, dtype=np.float64)
        w = np.where(self.tpot_defined, self.prob, 0.0)
        return np.asarray(ok_tpot @ (w / w.sum()), dtype=np.float64)

    def slo_margin(self, ttft_s: float, tpot_s: float, percentile: float, attainment: float) -> FloatArray:
        """How far each rate is inside the SLO (≥ 0: met), per rate: the least of the joint attainment's margin
        ``A − α*`` and, for the percentile thresholds "P-th percentile TTFT ≤ ttft_s" and "… TPOT ≤ tpot_s",
        ``F(threshold) − p``. With p ≤ α* the percentile terms are implied by the joint one (a request meeting both
        meets each), so the default P90 / 90 % SLO reads the attainment alone; P99 at 90 % attainment also needs
        99 % of requests within each threshold."""
        p = percentile / 100.0
        ok_ttft, ok_tpot = self.ttft_ok(ttft_s), self.tpot_ok(tpot_s)  # each cdf once, for all three terms
        joint = joint_attainment(np.clip(ok_ttft, 0.0, 1.0), ok_tpot, self.prob) - attainment
        ttft = np.asarray(ok_ttft @ self.prob, dtype=np.float64) - p
        tpot = self._reported_tpot_share(ok_tpot) - p
        return np.asarray(np.minimum(joint, np.minimum(ttft, tpot)), dtype=np.float64)

    def ttft_attainment(self, ttft_s: float) -> FloatArray:
        return np.asarray(self.ttft_ok(ttft_s) @ self.prob, dtype=np.float64)

    def tpot_attainment(self, tpot_s: float) -> FloatArray:
        return np.asarray(self.tpot_ok(tpot_s) @ self.prob, dtype=np.float64)

    def mean_response_s(self) -> FloatArray:
        """E[end-to-end latency] = E[TTFT] + Σ_c p_c n_c E[TPOT | c] per rate."""
        steps = self.decode_steps if self.tpot_defined is None else np.where(self.tpot_defined, self.decode_steps, 0.0)
        return np.asarray(self.ttft.mean_s + self.tpot.bin_mean_s @ (self.prob * steps), dtype=np.float64)

    def ttft_summary(self, percentile: float) -> list[LatencySummary]:
        return _summaries(self.ttft.mean_s, self.ttft.quantile, percentile)

    def tpot_summary(self, percentile: float) -> list[LatencySummary]:
        tpot = self.tpot_reported
        return _summaries(tpot.mean_s, tpot.quantile, percentile)

    def ttft_at_percentile_s(self, percentile: float) -> FloatArray:
        """The TTFT at the SLO's percentile per rate: :meth:`ttft_summary`'s ``at_percentile`` alone (one quantile
        solve per rate instead of the summary's three or four)."""
        return np.asarray(self.ttft.quantile(percentile / 100.0), dtype=np.float64)

    def tpot_at_percentile_s(self, percentile: float) -> FloatArray:
        """The TPOT at the SLO's percentile per rate: :meth:`tpot_summary`'s ``at_percentile`` alone."""
        return np.asarray(self.tpot_reported.quantile(percentile / 100.0), dtype=np.float64)


def _summaries(mean: FloatArray, quantile: object, percentile: float) -> list[LatencySummary]:
    assert callable(quantile)
    levels = {0.5: None, 0.9: None, 0.99: None, percentile / 100.0: None}
    found = {q: quantile(q) for q in levels}  # the SLO percentile is often one of the three
    q50, q90, q99, qp = found[0.5], found[0.9], found[0.99], found[percentile / 100.0]
    return [
        LatencySummary(float(mean[r]), float(q50[r]), float(q90[r]), float(q99[r]), float(qp[r]))
        for r in range(mean.size)
    ]
