"""The appends' load on a decode instance of D > 1 attention-DP ranks, the ranks' parts run in parallel (PPD;
docs/prefix_cache.md §11, *Appends on different ranks share a step*; :mod:`pdplan.serving.ppd`, *Attention data
parallelism*).

An append's work splits into its rank's own part u (the rank's dense layers, all-to-all share and causal attention:
``R(B̄ + c) − R(B̄) + A(…)``, :func:`pdplan.serving.append_price.rank_parts_s`) and the experts' part x (``X(D·B̄ + c) −
X(D·B̄)``, :func:`pdplan.serving.append_price.append_expert_s`). The ranks synchronise at every MoE layer, so a step
carrying
appends on several ranks lasts the plain step plus the *slowest* rank's own parts plus the experts over every
rank's tokens:

    A = max_r L_r + Σ_i x_i,    L_r = Σ_{i on rank r} u_i

(the simulator's :mod:`pdplan.sim.append_ranks`, priced there apart on its own tables). The sum ``Σ_i w_i`` that
``ρ_a = λ_a·E[w]`` holds is its upper bound, exact on one rank.

**Balls in bins, Poissonized.** A step carries the K appends that arrived during the step before, K ~ Poisson(μ), μ
= λ_a·S (S the step before's length), each on its session's rank, uniform over the D ranks (sessions hashed to
ranks; the simulator's ``session mod D``). By the splitting property of the Poisson law (a Poisson(μ) number of
balls thrown uniformly into D bins leaves D independent Poisson(μ/D) counts: Kingman, *Poisson Processes*, 1993,
§1.3 colouring theorem; the Poissonization of the maximum load, Gonnet, "Expected length of the longest probe
sequence in hash code searching", J. ACM 28(2), 1981, and Raab & Steger, "Balls into bins: a simple and tight
analysis", RANDOM 1998) each rank's load L_r is an independent compound Poisson sum of Poisson(μ/D) own parts, each
drawn from the placed appends' law, and

    E[max_r L_r | μ] = ∫_0^∞ (1 − F_L(a)^D) da,

F_L the compound Poisson cdf (:func:`max_rank_work_s`: on a lattice whose step divides the largest own part, so a
point law is exact; its atoms split linearly between two cells otherwise). With point parts u it is u·E[max of D
Poisson(μ/D)] = u·Σ_{n ≥ 0} (1 − F_{Poisson(μ/D)}(n)^D); for a fixed K it is u times the multinomial expected
maximum (two appends on D ranks: 1 + 1/D, three on two ranks: 9/4), which the Poisson mixture over K gives back
(``tests/unit/test_ppd_ranks.py``).

**The step before** (:meth:`RankWork.share`). S is the two-point law of
:class:`~pdplan.serving.ppd_boundary.StepBoundary`: a plain step ``τ_p = τ'·(1 − ρ_a)`` with probability ``1 − q``
and a mixed one ``τ_p + ρ_a·τ'/q`` with probability ``q = 1 − e^{−λ_a·τ'}`` (mean τ'). E[max] is concave in μ, so
the spread of S puts fewer appends' own parts in the max than S at its mean would (a long mixed step lets several
appends into the next: the agent example's simulator has 9.4 % of its mixed steps carry two or more, Poisson(λ_a·τ')
7 %). The appends' share of the instance's time is then

    ρ_a = ((1 − q)·E[max | λ_a·τ_p] + q·E[max | λ_a·τ_m]) / τ' + λ_a·E[x],

a fixed point in ρ_a at a given τ' (:meth:`RankWork.load`, from the sum's), and τ' = τ_p/(1 − ρ_a) is the decode
fixed point on the step stretched by it: :func:`settle` iterates the two from the sum's ρ_a (an upper bound, exact
as μ → 0 or on one rank) until ρ_a moves by less than :data:`RHO_TOLERANCE` of itself. *Approximations*: the rank's
own parts of two appends on one rank add (``R`` linear above its ridge, as the sum took them), the experts' parts
add (X linear above the ridge), steps independent (the mixed step at its mean, not its slices), an append's work
whole in one step (a chunked append's later chunks too).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from pdplan.serving.ppd_boundary import LAW_CELLS, AppendWork, _poisson_top
from pdplan.types import FloatArray

T = TypeVar("T")

RHO_TOLERANCE = 1e-4
""":func:`settle` stops where ρ_a moves by less than this share of itself."""
SETTLE_STEPS = 12
"""At most this many decode fixed points in :func:`settle` (the map's slope is small: two to four suffice)."""


def max_rank_work_s(mean_count: float, ranks: int, own: AppendWork) -> float:
    """E[max_r L_r]: the slowest of ``ranks`` ranks' own work in a step carrying Poisson(``mean_count``) appends
    spread uniformly over them, each one's own part drawn from ``own`` (module docstring)."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    top_s = float(np.max(own.values_s))
    if mean_count <= 0.0 or top_s <= 0.0:
        return 0.0
    per_rank = mean_count / ranks
    top = _poisson_top(per_rank)
    per = max((LAW_CELLS - 1) // top, 1)
    h = top_s / per  # the largest part on a cell: a point law exact
    cells = per * top + 1
    size = 2 * cells
    spectrum = np.exp(per_rank * (own.spectrum(h, size) - 1.0))
    pmf = np.maximum(np.fft.irfft(spectrum, size)[:cells], 0.0)  # the FFT's rounding below 0 dropped
    cdf = np.minimum(np.cumsum(pmf), 1.0)
    return h * float(np.sum(1.0 - cdf**ranks))


@dataclass(frozen=True, slots=True)
class RankWork:
    """The placed appends' work on D ranks: each append's own part's law and the experts' mean part."""

    ranks: int
    own: AppendWork
    """u: an append's rank's own part (its work less its experts'), over the placed appends."""
    expert_s: float
    """E[x]: an append's experts' part."""

    @classmethod
    def of(cls, ranks: int, work_s: FloatArray, expert_s: FloatArray, weight: FloatArray) -> RankWork | None:
        """From the placed appends' work ``w`` and experts' part ``x`` (same shape) and their weights; None where
        nothing is placed or one rank (the sum is exact)."""
        w = np.asarray(weight, dtype=np.float64).ravel()
        keep = w > 0
        if ranks <= 1 or not np.any(keep):
            return None
        work, expert = np.ravel(work_s)[keep], np.ravel(expert_s)[keep]
        own = np.maximum(work - expert, 0.0)
        mean_x = float(w[keep] @ np.minimum(expert, work)) / float(w[keep].sum())
        return cls(int(ranks), AppendWork(np.asarray(own, dtype=np.float64), w[keep]), mean_x)

    def load(self, rate_per_s: float, tau_s: float) -> float:
        """ρ_a(τ'): the share of the instance's time its appends take at λ_a = ``rate_per_s`` and mean step τ'
        (module docstring, The step before): the fixed point of :meth:`share` in ρ_a, from the sum's."""
        if rate_per_s <= 0.0:
            return 0.0
        rho = rate_per_s * (self.own.mean_s + self.expert_s)  # the sum's: an upper bound
        if not math.isfinite(tau_s) or tau_s <= 0.0:
            return rho  # no step to share
        for _ in range(SETTLE_STEPS):
            new = self.share(rate_per_s, tau_s, rho)
            if abs(new - rho) <= RHO_TOLERANCE * rho:
                return new
            rho = new
        raise ArithmeticError(f"the appends' share on {self.ranks} ranks did not settle: {rho} at τ' = {tau_s} s")

    def share(self, rate_per_s: float, tau_s: float, rho: float) -> float:
        """``E[A]/τ'`` with the step before the plain step ``τ_p = τ'·(1 − ρ)`` with probability ``1 − q`` and the
        mixed step ``τ_p + ρ·τ'/q`` with probability ``q = 1 − e^{−λ_a·τ'}`` (the two-point law of
        :class:`~pdplan.serving.ppd_boundary.StepBoundary`, mean τ'): the appends a step carries are Poisson over the
        step before's length (module docstring, The step before)."""
        q = -math.expm1(-rate_per_s * tau_s)
        plain = tau_s * (1.0 - min(rho, 1.0))
        mixed = plain + rho * tau_s / q
        slowest = (1.0 - q) * max_rank_work_s(rate_per_s * plain, self.ranks, self.own)
        slowest += q * max_rank_work_s(rate_per_s * mixed, self.ranks, self.own)
        return slowest / tau_s + rate_per_s * self.expert_s  # the experts' parts add: λ_a·E[x] per unit time


def settle(rho_s: float, at: Callable[[float], T], tau_of: Callable[[T], float],
           load: Callable[[float], float]) -> tuple[float, T]:  # fmt: skip
    """``(ρ_a, at(ρ_a))`` with ``ρ_a = load(τ')`` and τ' = ``tau_of(at(ρ_a))``: the decode fixed point on the step
    stretched by ρ_a and the appends' share at its mean step, from ``rho_s`` (the sum's, an upper bound; module
    docstring). Stops after :data:`SETTLE_STEPS` fixed points at the latest."""
    rho, point = rho_s, at(rho_s)
    for _ in range(SETTLE_STEPS):
        new = load(tau_of(point))
        if abs(new - rho) <= RHO_TOLERANCE * max(rho, 1e-300):
            break
        rho, point = new, at(new)
    return rho, point
