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

import functools
from collections.abc import Callable
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


RECORDED = (0.5, 0.9, 0.99)
"""The quantiles a :class:`Latency` records: P50, P90, P99."""


class Latency:
    """Mean and percentiles of one latency (seconds). Each percentile is either given or solved from the latency's
    law on its first read and kept (:meth:`solved`): a plan records P50, P90 and P99, but a table shows one of them,
    and each is a root search over a mixture cdf (issue #27). A read value is the same double an eager solve gives
    (the same function of the same law at the same quantile); once all three are read the law is let go. Not changed
    once built; equality, hashing, ``repr`` and pickling read every percentile (a pickled latency carries numbers, not
    its law)."""

    __slots__ = ("_found", "_mean", "_solve")

    def __init__(self, mean: float, p50: float, p90: float, p99: float) -> None:
        self._mean = mean
        self._found: dict[float, float] = {0.5: p50, 0.9: p90, 0.99: p99}
        self._solve: Callable[[float], float] | None = None

    @classmethod
    def solved(cls, mean: float, solve: Callable[[float], float], found: dict[float, float] | None = None) -> Latency:
        """A latency of mean ``mean`` whose quantile q is ``solve(q)``, solved when first read; ``found``: quantiles
        already solved (kept, and shared with the caller: what either solves later, both read)."""
        out = cls.__new__(cls)
        out._init_solved(mean, solve, {} if found is None else found)
        return out

    def _init_solved(self, mean: float, solve: Callable[[float], float], found: dict[float, float]) -> None:
        self._mean, self._found, self._solve = mean, found, solve

    @property
    def mean(self) -> float:
        return self._mean

    @property
    def p50(self) -> float:
        return self.quantile(0.5)

    @property
    def p90(self) -> float:
        return self.quantile(0.9)

    @property
    def p99(self) -> float:
        return self.quantile(0.99)

    def quantile(self, q: float) -> float:
        """The latency's q-quantile (seconds): recorded, or solved now from its law (ValueError: neither)."""
        found = self._found.get(q)
        if found is not None:
            return found
        if self._solve is None:
            raise ValueError(f"quantile {q:g} is not recorded (latency of mean {self.mean:g} s), its law not held")
        found = self._found[q] = self._solve(q)
        if all(r in self._found for r in RECORDED):
            self._solve = None  # every recorded percentile read: the law's arrays need not stay alive
        return found

    def plain(self) -> Latency:
        """This latency as a plain :class:`Latency`, sharing what is solved and its law."""
        if self._solve is None:
            return Latency(self.mean, self.p50, self.p90, self.p99)
        return Latency.solved(self.mean, self._solve, self._found)

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}

    def _values(self) -> tuple[float, ...]:
        return (self.mean, self.p50, self.p90, self.p99)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Latency)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        names = ("mean", "p50", "p90", "p99", "at_percentile")
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in zip(names, self._values(), strict=False))})"

    def __reduce__(self) -> tuple[type[Latency], tuple[float, ...]]:
        return type(self), self._values()


class LatencySummary(Latency):
    """:class:`Latency` plus its value at the SLO's percentile (seconds), solved at once."""

    __slots__ = ("at_percentile",)

    def __init__(self, mean: float, p50: float, p90: float, p99: float, at_percentile: float) -> None:
        super().__init__(mean, p50, p90, p99)
        self.at_percentile = at_percentile

    @classmethod
    def solved_at(cls, mean: float, solve: Callable[[float], float], percentile: float) -> LatencySummary:
        """The summary of mean ``mean`` and quantiles ``solve(q)``, its value at ``percentile`` solved now (the rest
        on first read, :meth:`Latency.solved`)."""
        out = cls.__new__(cls)
        out._init_solved(mean, solve, {})
        out.at_percentile = out.quantile(percentile / 100.0)
        return out

    def _values(self) -> tuple[float, ...]:
        return (*super()._values(), self.at_percentile)


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


def _summaries(mean: FloatArray, quantile: Callable[[float], FloatArray], percentile: float) -> list[LatencySummary]:
    """One summary per rate, each quantile solved once for the batch of rates when a rate's summary first reads it
    (the SLO's percentile at once)."""
    batch = _BatchQuantiles(quantile)
    return [
        LatencySummary.solved_at(float(mean[r]), functools.partial(batch.at_row, r), percentile)
        for r in range(mean.size)
    ]


class _BatchQuantiles:
    """A batch's quantile function ``q -> [R]``, each q solved once for every rate."""

    __slots__ = ("_found", "_quantile")

    def __init__(self, quantile: Callable[[float], FloatArray]) -> None:
        self._quantile = quantile
        self._found: dict[float, FloatArray] = {}

    def at_row(self, r: int, q: float) -> float:
        if q not in self._found:
            self._found[q] = self._quantile(q)
        return float(self._found[q][r])
