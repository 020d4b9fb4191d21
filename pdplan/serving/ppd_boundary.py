"""The wait of a Turn 2+ append for the decode step in flight (PPD, docs/prefix_cache.md §11).

A turn placed on decode (:mod:`pdplan.serving.ppd`) arrives at the decode instance that decoded its session's
previous turn, a think time G after that turn's last token, and that last token came out at a step boundary of this
same instance. The engine admits work only at step boundaries, so the append first waits R for the step in flight,
then rides in the next step. The generic boundary of :func:`pdplan.serving.ttft.first_token_s`, ``busy·τ̄/2``, takes
the arrival at a random time of a step of mean length: it is not the wait of an arrival tied to a boundary (zero
think time: R is a whole step, not half of one), nor of one in a mix of short and long steps.

**Steps.** A step is plain, ``τ_p``, or carries appends: the engine admits at a boundary every append that arrived
during the step before, and the step lasts τ_p plus their work (the simulator's mixed step, :mod:`pdplan.sim.
decode_append`: ``decode_step_s(B) + Σ chunk_s``). So step n lasts ``S_n = τ_p + X_n``, ``X_n = w_1 + … + w_K``
with K ~ Poisson(λ_a·S_{n−1}) appends of work w drawn from the placed appends' law (:class:`AppendWork`); in the
stationary sequence ``E[S] = τ_p + λ_a·E[w]·E[S]``, so ``E[S] = τ_p/(1 − ρ_a) = τ'``, the placement's mean step
(:mod:`pdplan.serving.ppd`, ρ_a = λ_a·E[w]). Steps are taken independent, the step before at its mean: K ~
Poisson(μ), μ = λ_a·τ', and X compound Poisson, ``P(X = 0) = e^{−μ} = 1 − q`` (q the share of steps carrying an
append) and ``E[X] = μ·E[w] = ρ_a·τ'``: the mean step is τ' exactly. The part K ≥ 1 (mass q, mean ``ρ_a·τ'/q``) is
split into M equal-mass slices (:data:`MIXED_SLICES`) by X's own order, each at its conditional mean: mixed steps
``τ_{m,j} = τ_p + E[X | slice j]`` of probability q/M each, which keeps the mean. With M = 1 (or without a work law)
this is the two-point law ``τ_m = τ_p + ρ_a·τ'/q`` with probability q. X|K ≥ 1 is tabulated on a lattice by its
spectrum, ``exp(μ·(φ_w − 1)) − e^{−μ}`` (φ_w the spectrum of the work law, each value split between its two cells so
that its mean is kept; the Poisson tail past :data:`COUNT_TAIL` left out of the span and the slices scaled back to
the mean ``ρ_a·τ'``). Write s_σ for the steps' lengths (σ = p, or a slice j) and P_σ for their probabilities by
count.

**The wait.** S1, the step that starts at the previous turn's last boundary, is a step drawn by count: ``P(S1 = s_σ)
= P_σ``. If G < S1 the turn arrives during it: ``R = S1 − G``. Otherwise it arrives during a later step, taken to be
at a random time of the stationary step sequence (renewal theory's length-biased residual, exact as G ≫ τ'): the step
in flight is s_σ with probability ``π_σ = P_σ·s_σ/τ'`` (its share of the time) and R is uniform over it, ``F_eq(a) =
Σ_σ π_σ·min(a/s_σ, 1)``. With P(busy) the probability that the instance has a step in flight at all
(:func:`pdplan.serving.ttft.first_token_s`'s ``1 − e^{−N}``; an idle instance admits at once):

    F_R(a) = 1 − busy + busy · Σ_σ P_σ · [F_G(s_σ) − F_G(s_σ − a) + (1 − F_G(s_σ)) · F_eq(a)]

with F_G the think-time law's cdf (:class:`pdplan.cache.lru_closed_form.ThinkTime`; F_G(t) = 0 for t ≤ 0; read by
linear interpolation on :data:`LAW_POINTS` points over [0, max s_σ]). Exact at G = 0 (R = S1) and as G → ∞ (R the
equilibrium residual, mean ``E[S²]/(2E[S])``); an approximation for think times of one to a few steps, where the
arrival lands in the second or third step after the boundary, not at a random time of the sequence. The engine's host
time (API server, tokeniser) is added to TTFT apart, as for every row, and does not delay the arrival here (the
simulator's convention too).

**Arrivals over the link** (:meth:`StepBoundary.arrival_law`). A request whose KV came over the P→D link (Turn 1,
and a Turn 2+ whose history its decode instance no longer holds) arrives at a random time of the step sequence: it
waits R' (0 on an idle instance, else the equilibrium residual ``F_eq``), and its first step is a step drawn by count
(the model's ``τ'`` on average, s_σ with probability P_σ). The appends' work is a share of all time, not of the busy
time alone: an append that arrives while the instance has no sequence to decode (the share 1 − busy; Poisson arrivals
see time averages) runs a step of its own (the simulator's mixed step on an empty batch). So the idle share holds
append steps for ``u = (1 − busy)·ρ_a`` of all time, taken at the mixed steps' lengths (length-biased, π_σ over the
mixed σ alone), and ``F_{R'}(a) = 1 − busy − u + busy·F_eq(a) + u·F_eq,mixed(a)``. Without u the mixed steps' share
of all time was busy·(ρ_a + q·τ_p/τ'), below ρ_a where busy < 1: Qwen3-30B-A3B 1P1D, decode DP4, 13-turn sessions of
3,000 new tokens at 1.32 req/s (docs/prefix_cache.md §11, *The prefill pool's TTFT, piece by piece*), busy 0.723,
0.100 of the KVs met a mixed step where the simulator's instance spent 0.138 of its time in them; with u 0.135.
The model's convention-A boundary ``(1 + busy/2)·τ'`` is
the mean of neither when the steps differ (the residual of a mix of short and long steps is length-biased) and has no
spread; a PPD model gives these rows the law of ``D = R' + (S1 − τ_p)`` as part of their wait and takes
``busy·τ'/2 + (τ' − τ_p)`` out of their offset (:mod:`pdplan.serving.ppd_pool`), so that the two add to
``R' + S1``. Plain disaggregation keeps the model's boundary: its steps carry no appends.

**The appends that share the append's step** (:meth:`StepBoundary.carried`; issue #24). Every append that arrived
during the step in flight is admitted with this one, and the step that carries them lasts the plain step plus all
their work (every append in it emits token 1 at its end when the token budget holds them all). So an append's first
step is not the mean step τ' but ``τ_p + w + O``, O the work of the *other* appends that arrived during the same step
in flight. The other sessions' appends are a Poisson stream of rate λ_a independent of the tagged one (Poisson
arrivals see the stream's own law, PASTA), so given a step in flight of length s their count is Poisson(λ_a·s) and O
is compound Poisson, each term's work drawn from the law (:class:`AppendWork`). R and O are independent given s, and
s is the step in flight's length in the law above (the think-tied first step S1 included), so

    F_{R+O}(a) = 1 − busy + Σ_σ (F_R(·, σ) ⊛ f_{O|s_σ})(a),    f_{O|s} = compound Poisson(λ_a·s) of the work law,

with ``F_R(a, σ) = busy·[P_σ·(F_G(s_σ) − F_G(s_σ − a)) + C·π_σ·min(a/s_σ, 1)]``, C = Σ_σ P_σ·(1 − F_G(s_σ)) the
share arriving after S1 (an idle instance admits at once, with no others: O = 0). Each convolution is a product of
spectra on one lattice (:data:`LAW_CELLS` cells over [0, max s_σ + K·max w], K the count past which the Poisson tail
at ``λ_a·max s_σ`` is below :data:`COUNT_TAIL`; the law is cut where its cdf passes ``1 − COUNT_TAIL``). Its mean,
``λ_a·E[w]·E[s_in flight]`` with the in-flight step length-biased, exceeds the ``ρ_a·τ' = λ_a·E[w]·E[s]`` that the
mean step τ' holds: a decode row's offset prices its first step at τ_p and its wait takes this law instead
(:mod:`pdplan.serving.ppd_model`). The spread is what moves the percentile: a step carrying a long append lasts long,
and an append arriving during it waits its length-biased residual and shares its own step with more others
(``ppd-geo-think``: the appends' work E[w] 7.9 ms, P90 17.6 ms; a Monte Carlo of one busy instance,
``benchmarks/ppd_decode_tail.py``, put 3.2 ms of the decode turns' P90 in the step in flight's spread and 0.9 ms in
the others' of the own step). On a decode instance of D attention-DP ranks (``ranks``; :mod:`pdplan.serving.ppd`,
*Attention data parallelism*) an append shares its rank's part of the step only with the others on its rank, a
Poisson stream of rate λ_a/D: the others' parts run in parallel on their own ranks (they lengthen the step only where
a rank's total exceeds this one's, and by their experts' tokens; left out). Left out: an append whose tokens
overflow the step's budget behind the others (a later step; an append's work is its whole work, as in ρ_a), the
count's dependence on the step before (K mixed Poisson over the previous step's length, not Poisson(λ_a·τ')), and
the spread inside each slice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdplan.cache.lru_closed_form import ThinkTime
from pdplan.numerics.sorted_stats import sorted_unique
from pdplan.types import FloatArray

LAW_POINTS = 513
"""Points of the law's own grid over [0, max s_σ] (the think time's cdf, :meth:`StepBoundary.tabulated`; a lattice
reads it by interpolation)."""

LAW_CELLS = 2048
"""Cells of the lattices of the compound Poisson sums (the mixed steps' work, :meth:`StepBoundary.carried`)."""

MIXED_SLICES = 16
"""M: the equal-mass slices of the mixed steps' law (module docstring, Steps; as the placed appends' 16 groups,
:data:`pdplan.serving.ppd.APPEND_GROUPS`)."""

COUNT_TAIL = 1e-6
"""The Poisson tail left out of the compound Poisson sums' span, and the law's tail cut from :meth:`carried`."""


@dataclass(frozen=True, slots=True)
class AppendWork:
    """The law of an append's work in the step that carries it: values (seconds) and their probabilities."""

    values_s: FloatArray
    prob: FloatArray

    @classmethod
    def point(cls, work_s: float) -> AppendWork:
        """Every append's work ``work_s`` (no spread)."""
        return cls(np.array([float(work_s)]), np.ones(1))

    @property
    def mean_s(self) -> float:
        return float(self.prob @ self.values_s) / float(self.prob.sum())

    def spectrum(self, h_s: float, size: int) -> FloatArray:
        """φ_w: the rfft of the law on a lattice of step ``h_s`` (``size`` cells), each value split between its two
        cells (linear: its mean kept)."""
        pos = np.maximum(self.values_s, 0.0) / h_s
        whole = np.floor(pos).astype(np.intp)
        frac = pos - whole
        p = self.prob / float(self.prob.sum())
        pmf = np.bincount(np.minimum(whole, size - 1), p * (1.0 - frac), minlength=size)
        pmf += np.bincount(np.minimum(whole + 1, size - 1), p * frac, minlength=size)
        return np.asarray(np.fft.rfft(pmf[:size]), dtype=np.complex128)


@dataclass(frozen=True, slots=True)
class StepBoundary:
    """The step-in-flight wait R of a Turn 2+ on decode (module docstring)."""

    plain_s: float
    """τ_p: a step without appends."""
    mixed_steps_s: FloatArray
    """τ_{m,j}: the steps carrying appends, one per slice (their work in them included)."""
    mixed_prob: FloatArray
    """P(S = τ_{m,j}) by count; they sum to q, the share of steps that carry appends."""
    busy: float
    """P(a step is in flight)."""
    think: ThinkTime
    append_rate_per_s: float = 0.0
    """λ_a: appends placed on one decode instance per second."""
    work: AppendWork | None = None
    """The law of an append's work (:meth:`carried`); None: the others in an append's step are left out."""
    ranks: int = 1
    """The decode instance's attention-DP ranks D: the others that share an append's step on its own rank arrive
    at λ_a/D (:meth:`carried`)."""

    @classmethod
    def of(cls, tau_s: float, rho_append: float, append_rate_per_s: float, busy: float, think: ThinkTime,
           work: AppendWork | None = None, slices: int = MIXED_SLICES, ranks: int = 1) -> StepBoundary:  # fmt: skip
        """From the placement's decode: the mean step τ' with appends, their load ρ_a and rate λ_a per instance, and
        the law of an append's work (module docstring, Steps: the mixed steps in ``slices`` slices of its compound
        Poisson sum, at the mean ``ρ_a/λ_a`` the placement holds; without it, or with one slice, the two-point law)."""
        if slices < 1:
            raise ValueError(f"slices must be at least 1, got {slices}")
        rho = min(max(rho_append, 0.0), 1.0)
        lam = max(append_rate_per_s, 0.0)
        q = float(-math.expm1(-lam * tau_s)) if math.isfinite(tau_s) else 1.0
        plain = tau_s * (1.0 - rho)
        busy = min(max(busy, 0.0), 1.0)
        if q <= 0:
            return cls(plain, np.zeros(0), np.zeros(0), busy, think, lam, work, ranks)
        excess = rho * tau_s / q  # E[X | K ≥ 1]
        if work is None or slices == 1 or not math.isfinite(tau_s) or excess <= 0:
            return cls(plain, np.array([plain + excess]), np.array([q]), busy, think, lam, work, ranks)
        means = _mixed_slices(lam * tau_s, work, slices)
        means *= excess / float(means.mean())  # the Poisson tail left out of the lattice: the mean kept exactly
        return cls(plain, plain + means, np.full(slices, q / slices), busy, think, lam, work, ranks)

    @property
    def mixed_share(self) -> float:
        """q: the share of steps that carry appends."""
        return float(self.mixed_prob.sum())

    @property
    def mixed_s(self) -> float:
        """τ_m: the mean step carrying appends (τ_p where none does)."""
        q = self.mixed_share
        return float(self.mixed_prob @ self.mixed_steps_s) / q if q > 0 else self.plain_s

    @property
    def idle_append_share(self) -> float:
        """u = (1 − busy)·ρ_a: the share of all time the instance has no sequence to decode and runs an append's step
        (module docstring, Arrivals over the link); ρ_a = q·(τ_m − τ_p)/τ' read back from the steps."""
        s, p, _ = self._steps()
        mean = float(p @ s)
        if not (self.mixed_prob.size and mean > 0 and math.isfinite(mean)):
            return 0.0
        rho = float(self.mixed_prob @ (self.mixed_steps_s - self.plain_s)) / mean
        return (1.0 - self.busy) * min(max(rho, 0.0), 1.0)

    @property
    def finite(self) -> bool:
        return math.isfinite(self.plain_s) and bool(np.all(np.isfinite(self.mixed_steps_s)))

    def _steps(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(s_σ, P_σ, π_σ)``: the steps' lengths, their probabilities by count and by time (module docstring)."""
        s = np.concatenate(([self.plain_s], self.mixed_steps_s))
        p = np.concatenate(([1.0 - self.mixed_share], self.mixed_prob))
        mean = float(p @ s)
        return s, p, (p * s / mean if mean > 0 else p)

    def _parts(self, x: FloatArray) -> FloatArray:
        """``[σ, x]``: P(busy, the step in flight is s_σ, R ≤ x) (module docstring: the terms of ``F_R`` by the step
        in flight)."""
        s, p, pi = self._steps()
        t = sorted_unique(np.concatenate((np.linspace(0.0, float(s.max()), LAW_POINTS), s)))  # np.union1d's array
        g = np.vectorize(self.think.cdf, otypes=[np.float64])(t)
        before = np.interp(s, t, g)
        tied = p[:, None] * (before[:, None] - np.interp(s[:, None] - x[None, :], t, g, left=0.0))
        after = float(p @ (1.0 - before))  # C: arrived after S1
        return np.asarray(self.busy * (tied + after * pi[:, None] * _uniform(x, s)), dtype=np.float64)

    def cdf(self, a_s: FloatArray) -> FloatArray:
        """``F_R(a)`` (module docstring); 0 everywhere when the steps are unbounded (past the decode's stable
        range)."""
        a = np.maximum(np.asarray(a_s, dtype=np.float64), 0.0)
        if not self.finite:
            return np.zeros(a.shape)
        flat = self._parts(a.ravel()).sum(axis=0).reshape(a.shape)
        return np.asarray(np.clip(1.0 - self.busy + flat, 0.0, 1.0), dtype=np.float64)

    def carried(self) -> BoundaryLaw:
        """The law of ``R + O``: the wait for the step in flight and the work of the other appends admitted with
        this one at its end (module docstring, The appends that share the append's step), on a lattice of
        :data:`LAW_CELLS` cells over ``[0, max s_σ + K·max w]``, cut where it passes ``1 −`` :data:`COUNT_TAIL`.
        Without appends (λ_a·E[w] = 0, or no work law) it is :meth:`tabulated`."""
        if not self.finite:
            return BoundaryLaw(np.zeros(1), np.zeros(1), math.inf)
        lam, work = self.append_rate_per_s / max(self.ranks, 1), self.work  # the others on this append's rank
        if work is None or lam * work.mean_s <= 0.0:
            return self.tabulated()
        s, _, _ = self._steps()
        top = _poisson_top(lam * float(s.max()))
        a = np.linspace(0.0, float(s.max()) + top * float(work.values_s.max()), LAW_CELLS)
        size = 2 * LAW_CELLS
        others = np.exp(lam * s[:, None] * (work.spectrum(float(a[1]), size)[None, :] - 1.0))  # O | s_σ
        spectrum = (np.fft.rfft(self._parts(a), size, axis=1) * others).sum(axis=0)
        cdf = np.clip(1.0 - self.busy + np.fft.irfft(spectrum, size)[:LAW_CELLS], 0.0, 1.0)
        cdf = np.maximum.accumulate(cdf)  # the FFT's rounding: a cdf does not fall
        end = min(int(np.searchsorted(cdf, 1.0 - COUNT_TAIL)) + 1, LAW_CELLS)
        return BoundaryLaw(a[:end], cdf[:end], _trapezoid(1.0 - cdf[:end], a[:end]))

    def _residual(self, a: FloatArray) -> FloatArray:
        """``F_eq(a)``: the step in flight at a random time, s_σ with probability π_σ, uniform over it (module
        docstring)."""
        s, _, pi = self._steps()
        return np.asarray(np.tensordot(pi, _uniform(a, s), axes=1), dtype=np.float64)

    def tabulated(self) -> BoundaryLaw:
        """The law on its own grid of :data:`LAW_POINTS` over [0, max s_σ], for reading on any lattice."""
        if not self.finite:
            return BoundaryLaw(np.zeros(1), np.zeros(1), math.inf)
        a = np.linspace(0.0, float(np.max(self.mixed_steps_s, initial=self.plain_s)), LAW_POINTS)
        cdf = self.cdf(a)
        return BoundaryLaw(a, cdf, _trapezoid(1.0 - cdf, a))

    @property
    def excess_s(self) -> float:
        """``Σ_j P_j·(τ_{m,j} − τ_p) = τ' − τ_p``: a first step's mean excess over a plain step."""
        return float(self.mixed_prob @ (self.mixed_steps_s - self.plain_s)) if self.finite else math.inf

    def arrival_law(self) -> BoundaryLaw:
        """A request whose KV came over the link (module docstring, Arrivals over the link): ``D = R' + X``, R' the
        step in flight at a random time (0 on an idle instance), X its first step's excess over a plain step,
        ``s_σ − τ_p`` with probability P_σ; tabulated on [0, 2·max s_σ − τ_p]."""
        if not self.finite:
            return BoundaryLaw(np.zeros(1), np.zeros(1), math.inf)
        s, p, pi = self._steps()
        a = np.linspace(0.0, 2.0 * float(s.max()) - self.plain_s, LAW_POINTS)
        idle = self.idle_append_share
        mixed = np.tensordot(pi[1:], _uniform(a, s[1:]), axes=1) / max(float(pi[1:].sum()), 1e-300)
        waited = 1.0 - self.busy - idle + self.busy * self._residual(a) + idle * mixed  # R' on the grid
        shifted = np.interp(a[None, :] - (s - self.plain_s)[:, None], a, waited, left=0.0)
        cdf = np.clip(p @ shifted, 0.0, 1.0)
        return BoundaryLaw(a, cdf, _trapezoid(1.0 - cdf, a))


@dataclass(frozen=True, slots=True)
class BoundaryLaw:
    """A wait's cdf tabulated on [0, span] (:meth:`StepBoundary.tabulated`, :meth:`~StepBoundary.carried`,
    :meth:`~StepBoundary.arrival_law`); beyond its span it is 1 (R ≤ max s_σ; the carried law cut at ``1 −``
    :data:`COUNT_TAIL`), and where the steps are unbounded it is 0 everywhere (past the decode's stable range)."""

    grid_s: FloatArray
    cdf_grid: FloatArray
    mean_s: float

    @property
    def span_s(self) -> float:
        """The largest wait tabulated (infinite past the stable range)."""
        return float(self.grid_s[-1]) if math.isfinite(self.mean_s) else math.inf

    def on_lattice(self, h_s: float, cells: int) -> FloatArray:
        """``F_R(i·h)``, i = 0..cells − 1, by linear interpolation of the table (its steps at the steps' lengths
        spread over one of its cells)."""
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


def _uniform(x: FloatArray, lengths_s: FloatArray) -> FloatArray:
    """``[σ, *x.shape]``: P(U_σ ≤ x) for U_σ uniform on [0, lengths_s[σ]] (a point at 0 where the length is 0)."""
    x = np.asarray(x, dtype=np.float64)
    s = np.asarray(lengths_s, dtype=np.float64).reshape(-1, *([1] * x.ndim))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(s > 0, np.clip(x[None] / s, 0.0, 1.0), 1.0), dtype=np.float64)


def _mixed_slices(mean_count: float, work: AppendWork, slices: int) -> FloatArray:
    """``[M]``: E[X | slice j] of the compound Poisson sum X of Poisson(``mean_count``) appends' work, its part K ≥ 1
    in ``slices`` equal-mass slices by X's order (module docstring, Steps), on a lattice of :data:`LAW_CELLS` cells
    over [0, K·max w] (K: :func:`_poisson_top`)."""
    span = _poisson_top(mean_count) * float(work.values_s.max())
    size = 2 * LAW_CELLS
    x = np.linspace(0.0, span, LAW_CELLS)
    spectrum = np.exp(mean_count * (work.spectrum(float(x[1]), size) - 1.0)) - math.exp(-mean_count)
    pmf = np.maximum(np.fft.irfft(spectrum, size)[:LAW_CELLS], 0.0)  # K ≥ 1; the FFT's rounding below 0 dropped
    mass = np.concatenate(([0.0], np.cumsum(pmf)))
    moment = np.concatenate(([0.0], np.cumsum(pmf * x)))
    at = np.interp(np.linspace(0.0, float(mass[-1]), slices + 1), mass, moment)  # a cell's mass at its point
    return np.asarray(np.diff(at) / (float(mass[-1]) / slices), dtype=np.float64)
