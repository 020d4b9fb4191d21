"""The wait of a Turn 2+ append for the decode step in flight (PPD, docs/prefix_cache.md §11).

A turn placed on decode (:mod:`pdplan.serving.ppd`) arrives at the decode instance that decoded its session's
previous turn, a think time G after that turn's last token, and that last token came out at a step boundary of this
same instance. The engine admits work only at step boundaries, so the append first waits R for the step in flight,
then rides in the next step. The generic boundary of :func:`pdplan.serving.ttft.first_token_s`, ``busy·τ̄/2``, takes
the arrival at a random time of a step of mean length: it is not the wait of an arrival tied to a boundary (zero
think time: R is a whole step, not half of one), nor of one in a mix of short and long steps.

**Steps.** A step is plain, ``τ_p``, or carries appends, ``τ_m``. From the placement's decode (:mod:`pdplan.serving.
ppd`): the mean step is ``τ' = τ_p/(1 − ρ_a)``; appends arrive as a Poisson stream of rate λ_a, so a share
``q = 1 − e^{−λ_a τ'}`` of the steps carries at least one; the appends' time per step, ``ρ_a·τ'`` on average, falls
in those steps only, so ``τ_m = τ_p + ρ_a·τ'/q``. Steps are taken independent, of this two-point law (the batch's own
fluctuations are left out).

**The wait.** S1, the step that starts at the previous turn's last boundary, is a step drawn by count: ``P(S1 = τ_m)
= q``. If G < S1 the turn arrives during it: ``R = S1 − G``. Otherwise it arrives during a later step, taken to be at
a random time of the stationary step sequence (renewal theory's length-biased residual, exact as G ≫ τ'): the step in
flight carries appends with probability ``π_m = q·τ_m/τ'`` (their share of the time) and R is uniform over it,
``F_eq(a) = (1 − π_m)·min(a/τ_p, 1) + π_m·min(a/τ_m, 1)``. With P(busy) the probability that the instance has a step
in flight at all (:func:`pdplan.serving.ttft.first_token_s`'s ``1 − e^{−N}``; an idle instance admits at once):

    F_R(a) = 1 − busy + busy · Σ_{s ∈ {τ_p, τ_m}} P(S1 = s) · [F_G(s) − F_G(s − a) + (1 − F_G(s)) · F_eq(a)]

with F_G the think-time law's cdf (:class:`pdplan.cache.lru_closed_form.ThinkTime`; F_G(t) = 0 for t ≤ 0). Exact at
G = 0 (R = S1) and as G → ∞ (R the equilibrium residual, mean ``E[S²]/(2E[S])``); an approximation for think times
of one to a few steps, where the arrival lands in the second or third step after the boundary, not at a random time
of the sequence. The engine's host time (API server, tokeniser) is added to TTFT apart, as for every row, and does
not delay the arrival here (the simulator's convention too).

**Arrivals over the link** (:meth:`StepBoundary.arrival_law`). A request whose KV came over the P→D link (Turn 1,
and a Turn 2+ whose history its decode instance no longer holds) arrives at a random time of the step sequence: it
waits R' (0 on an idle instance, else the equilibrium residual ``F_eq``), and its first step is a step drawn by count
(the model's ``τ'`` on average, ``τ_p`` or ``τ_m``). The model's convention-A boundary ``(1 + busy/2)·τ'`` is the
mean of neither when the steps differ (the residual of a mix of short and long steps is length-biased) and has no
spread; a PPD model gives these rows the law of ``D = R' + (S1 − τ_p)`` as part of their wait and takes
``busy·τ'/2 + (τ' − τ_p)`` out of their offset (:mod:`pdplan.serving.ppd_pool`), so that the two add to
``R' + S1``. Plain disaggregation keeps the model's boundary: its steps carry no appends.

**The appends that share the append's step** (:meth:`StepBoundary.carried`; issue #24). The engine admits at a step
boundary every append that arrived during the step in flight, and the step that carries them lasts the plain step
plus all their work (the simulator's mixed step, :mod:`pdplan.sim.decode_append`: ``decode_step_s(B) + Σ chunk_s``;
every append in it emits token 1 at its end when the token budget holds them all). So an append's first step is not
the mean step τ' but ``τ_p + w + O``, O the work of the *other* appends that arrived during the same step in flight.
The other sessions' appends are a Poisson stream of rate λ_a independent of the tagged one (Poisson arrivals see the
stream's own law, PASTA), so given a step in flight of length s their count is Poisson(λ_a·s) and O a compound
Poisson sum, each term an append's work taken at its mean w̄ (``append_work_s``: the placed appends' E[w]; agent
sessions' w spreads ±8 %). R and the count are independent given s, and s is the step in flight's length in the law
above (τ_p or τ_m; the think-tied first step S1 included), so

    F_{R+O}(a) = 1 − busy + Σ_{σ ∈ {p, m}} Σ_k e^{−λ_a s_σ} (λ_a s_σ)^k / k! · F_R(a − k·w̄, σ)

with ``F_R(a, σ) = busy·[P(S1 = s_σ)·(F_G(s_σ) − F_G(s_σ − a)) + C·π_σ·min(a/s_σ, 1)]``, C = Σ_s P(S1 = s)·(1 −
F_G(s)) the share arriving after S1, π_p = 1 − π_m (an idle instance admits at once, with no others: O = 0). Its
mean, ``λ_a·w̄·E[s_in flight]`` with the in-flight step length-biased, exceeds the ``ρ_a·τ' = λ_a·w̄·E[s]`` that the
mean step τ' holds: a decode row's offset prices its first step at τ_p and its wait takes this law instead
(:mod:`pdplan.serving.ppd_model`). The count's spread is what moves the percentile: with λ_a·τ_m ≈ 0.4 a fifth of
the agent example's appends share their step with another one (~70 ms more), which the mean (~9 ms) does not show.
Left out: an append whose tokens overflow the step's budget behind the others (a later step), the others' spread of
w, and the count's dependence on the step sequence before (steps independent, as above).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdplan.cache.lru_closed_form import ThinkTime
from pdplan.types import FloatArray

LAW_POINTS = 513
"""Points of the law's own grid over [0, τ_m] (the mean is its trapezoid, R ≤ τ_m; a lattice reads it by
interpolation)."""


COUNT_TAIL = 1e-6
"""The Poisson tail left out of :meth:`StepBoundary.carried`'s count of other appends."""


@dataclass(frozen=True, slots=True)
class StepBoundary:
    """The step-in-flight wait R of a Turn 2+ on decode (module docstring)."""

    plain_s: float
    """τ_p: a step without appends."""
    mixed_s: float
    """τ_m: a step carrying appends (their mean time in it included)."""
    mixed_share: float
    """q: the share of steps that carry appends."""
    busy: float
    """P(a step is in flight)."""
    think: ThinkTime
    append_rate_per_s: float = 0.0
    """λ_a: appends placed on one decode instance per second."""
    append_work_s: float = 0.0
    """w̄: an append's mean work in its step (:meth:`carried`)."""

    @classmethod
    def of(cls, tau_s: float, rho_append: float, append_rate_per_s: float, busy: float,
           think: ThinkTime, append_work_s: float = 0.0) -> StepBoundary:  # fmt: skip
        """From the placement's decode: the mean step τ' with appends, their load ρ_a and rate λ_a per instance
        (and an append's mean work w̄, for :meth:`carried`)."""
        rho = min(max(rho_append, 0.0), 1.0)
        lam = max(append_rate_per_s, 0.0)
        q = float(-math.expm1(-lam * tau_s)) if math.isfinite(tau_s) else 1.0
        plain = tau_s * (1.0 - rho)
        mixed = plain + rho * tau_s / q if q > 0 else plain
        return cls(plain, mixed, q, min(max(busy, 0.0), 1.0), think, lam, max(append_work_s, 0.0))

    @property
    def finite(self) -> bool:
        return math.isfinite(self.plain_s) and math.isfinite(self.mixed_s)

    def cdf(self, a_s: FloatArray) -> FloatArray:
        """``F_R(a)`` (module docstring); 0 everywhere when the steps are unbounded (past the decode's stable
        range)."""
        a = np.maximum(np.asarray(a_s, dtype=np.float64), 0.0)
        if not self.finite:
            return np.zeros(a.shape)
        cdf_g = np.vectorize(self.think.cdf, otypes=[np.float64])
        eq = self._residual(a)
        busy = np.zeros(a.shape)
        for s, p in ((self.plain_s, 1.0 - self.mixed_share), (self.mixed_s, self.mixed_share)):
            if p <= 0:
                continue
            before = self.think.cdf(s)
            busy += p * (before - cdf_g(s - a) + (1.0 - before) * eq)
        return np.asarray(np.clip(1.0 - self.busy + self.busy * busy, 0.0, 1.0), dtype=np.float64)

    def carried(self) -> BoundaryLaw:
        """The law of ``R + O``: the wait for the step in flight and the work of the other appends admitted with
        this one at its end (module docstring, The appends that share the append's step), tabulated on
        ``[0, τ_m + K·w̄]`` with K the count past which the Poisson tail at ``λ_a·τ_m`` is below
        :data:`COUNT_TAIL`. Each step length's part ``F_R(·, σ)`` is tabulated on its own grid over [0, s_σ] (constant
        past s_σ: R ≤ s_σ) and read shifted by k·w̄ by linear interpolation. Without appends (λ_a·w̄ = 0) it is
        :meth:`tabulated`."""
        if not self.finite:
            return BoundaryLaw(np.zeros(1), np.zeros(1), math.inf)
        lam, work = self.append_rate_per_s, self.append_work_s
        if lam * work <= 0.0:
            return self.tabulated()
        top = _poisson_top(lam * self.mixed_s)
        a = np.linspace(0.0, self.mixed_s + top * work, LAW_POINTS * (top + 1))
        cdf = np.full(a.shape, 1.0 - self.busy)
        counts = np.arange(top + 1, dtype=np.float64)
        log_factorial = np.cumsum(np.log(np.maximum(counts, 1.0)))
        for s, own, part in self._joint():
            mean = lam * s
            pmf = np.exp(-mean + counts * math.log(mean) - log_factorial) if mean > 0 else (counts == 0) * 1.0
            for count, p in zip(counts.tolist(), pmf.tolist(), strict=True):
                cdf += p * np.interp(a - count * work, own, part, left=0.0, right=float(part[-1]))
        cdf = np.clip(cdf, 0.0, 1.0)
        return BoundaryLaw(a, cdf, _trapezoid(1.0 - cdf, a))

    def _joint(self) -> list[tuple[float, FloatArray, FloatArray]]:
        """Per step length s_σ in flight (τ_p, τ_m): ``(s_σ, x, P(busy, the step in flight is s_σ, R ≤ x))`` on a
        grid x of :data:`LAW_POINTS` over [0, s_σ] (module docstring): the terms of :meth:`cdf` split by the step in
        flight."""
        cdf_g = np.vectorize(self.think.cdf, otypes=[np.float64])
        draws = ((self.plain_s, 1.0 - self.mixed_share), (self.mixed_s, self.mixed_share))
        after = sum(p * (1.0 - self.think.cdf(s)) for s, p in draws if p > 0)  # C: arrived after S1
        mean = self.plain_s * (1.0 - self.mixed_share) + self.mixed_s * self.mixed_share
        pi_m = self.mixed_share * self.mixed_s / mean if mean > 0 else 0.0
        out: list[tuple[float, FloatArray, FloatArray]] = []
        for (s, p), pi in zip(draws, (1.0 - pi_m, pi_m), strict=True):
            if p <= 0 and pi <= 0:
                continue
            x = np.linspace(0.0, s, LAW_POINTS)
            tied = p * (self.think.cdf(s) - cdf_g(s - x)) if p > 0 else np.zeros(x.shape)
            out.append((s, x, np.asarray(self.busy * (tied + after * pi * _uniform(x, s)), dtype=np.float64)))
        return out

    def _residual(self, a: FloatArray) -> FloatArray:
        """``F_eq(a)``: the step in flight at a random time, uniform over a plain step or, with probability π_m, a
        step carrying appends (module docstring)."""
        mean = self.plain_s * (1.0 - self.mixed_share) + self.mixed_s * self.mixed_share
        pi_m = self.mixed_share * self.mixed_s / mean if mean > 0 else 0.0
        return (1.0 - pi_m) * _uniform(a, self.plain_s) + pi_m * _uniform(a, self.mixed_s)

    def tabulated(self) -> BoundaryLaw:
        """The law on its own grid of :data:`LAW_POINTS` over [0, τ_m], for reading on any lattice."""
        if not self.finite:
            return BoundaryLaw(np.zeros(1), np.zeros(1), math.inf)
        a = np.linspace(0.0, self.mixed_s, LAW_POINTS)
        cdf = self.cdf(a)
        return BoundaryLaw(a, cdf, _trapezoid(1.0 - cdf, a))

    @property
    def excess_s(self) -> float:
        """``q·(τ_m − τ_p) = τ' − τ_p``: a first step's mean excess over a plain step."""
        return self.mixed_share * (self.mixed_s - self.plain_s) if self.finite else math.inf

    def arrival_law(self) -> BoundaryLaw:
        """A request whose KV came over the link (module docstring, Arrivals over the link): ``D = R' + X``, R' the
        step in flight at a random time (0 on an idle instance), X its first step's excess over a plain step,
        ``τ_m − τ_p`` with probability q; tabulated on [0, 2τ_m − τ_p]."""
        if not self.finite:
            return BoundaryLaw(np.zeros(1), np.zeros(1), math.inf)
        a = np.linspace(0.0, 2.0 * self.mixed_s - self.plain_s, LAW_POINTS)
        q, jump = self.mixed_share, self.mixed_s - self.plain_s

        def waited(x: FloatArray) -> FloatArray:
            return np.where(x < 0.0, 0.0, 1.0 - self.busy + self.busy * self._residual(np.maximum(x, 0.0)))

        cdf = np.clip((1.0 - q) * waited(a) + q * waited(a - jump), 0.0, 1.0)
        return BoundaryLaw(a, cdf, _trapezoid(1.0 - cdf, a))


@dataclass(frozen=True, slots=True)
class BoundaryLaw:
    """``F_R`` tabulated on [0, τ_m] (:meth:`StepBoundary.tabulated`); beyond τ_m it is 1 (R ≤ τ_m), and where the
    steps are unbounded it is 0 everywhere (past the decode's stable range)."""

    grid_s: FloatArray
    cdf_grid: FloatArray
    mean_s: float

    @property
    def span_s(self) -> float:
        """The largest wait, τ_m (infinite past the stable range)."""
        return float(self.grid_s[-1]) if math.isfinite(self.mean_s) else math.inf

    def on_lattice(self, h_s: float, cells: int) -> FloatArray:
        """``F_R(i·h)``, i = 0..cells − 1, by linear interpolation of the table (its steps at τ_p and τ_m spread
        over one of its cells)."""
        if not math.isfinite(self.mean_s):
            return np.zeros(cells)
        a = np.arange(cells, dtype=np.float64) * h_s
        return np.asarray(np.interp(a, self.grid_s, self.cdf_grid, right=1.0), dtype=np.float64)

    def shifted_on_lattice(self, h_s: float, cells: int, shifts_s: FloatArray, prob: FloatArray) -> FloatArray:
        """``[K, cells]``: per row k the law of R + D_k on the lattice, D_k = ``shifts_s[k, g]`` with probability
        ``prob[g]`` (or the row's own ``prob[k, g]``) independent of R: ``Σ_g prob_g·F_R(a − d_kg)`` (0 below
        0). Each atom is split between the two whole cells around d_kg (linear, as the lattice reads every law) and
        the sum is one product of spectra per row."""
        shifts = np.asarray(shifts_s, dtype=np.float64)
        rows = shifts.shape[0]
        if not math.isfinite(self.mean_s):
            return np.zeros((rows, cells))
        pos = np.where(np.isfinite(shifts), shifts / h_s, float(cells))  # an unbounded excess never completes
        whole = np.floor(np.minimum(pos, float(cells))).astype(np.intp)
        frac = pos - whole
        weight = np.broadcast_to(np.atleast_2d(np.asarray(prob, dtype=np.float64)), shifts.shape)
        pmf = np.zeros((rows, cells + 1))
        row = np.broadcast_to(np.arange(rows)[:, None], shifts.shape)
        np.add.at(pmf, (row, np.minimum(whole, cells)), weight * (1.0 - frac))
        np.add.at(pmf, (row, np.minimum(whole + 1, cells)), weight * frac)
        size = 2 * cells
        spectrum = np.fft.rfft(pmf[:, :cells], size, axis=1) * np.fft.rfft(self.on_lattice(h_s, cells), size)[None, :]
        return np.asarray(np.clip(np.fft.irfft(spectrum, size, axis=1)[:, :cells], 0.0, 1.0), dtype=np.float64)


def _poisson_top(mean: float) -> int:
    """The smallest K with P(Poisson(mean) > K) < :data:`COUNT_TAIL` (at least 1)."""
    k, term, total = 0, math.exp(-mean), math.exp(-mean)
    while 1.0 - total >= COUNT_TAIL and k < 10_000:
        k += 1
        term *= mean / k
        total += term
    return max(k, 1)


def _trapezoid(y: FloatArray, x: FloatArray) -> float:
    """∫ y dx by the trapezoid rule."""
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0)


def _uniform(a: FloatArray, length_s: float) -> FloatArray:
    """P(U ≤ a) for U uniform on [0, length] (a point at 0 when the length is 0)."""
    if length_s <= 0:
        return np.ones(a.shape)
    return np.asarray(np.clip(a / length_s, 0.0, 1.0), dtype=np.float64)
