"""A colocated instance's TTFT with the overlap scheduler's extra iteration, whose length follows the request's own
TTFT (:mod:`pdplan.serving.colocated`, :mod:`pdplan.serving.ttft` ``overlap_s``).

Token 1 leaves k iterations after the one that sampled it (the end of its prompt). On a colocated instance that
iteration is either a plain decode step (k·s_p) or one that carries prompt work (k·s_b, a chunk step or another
prompt's pass), the latter where the departing prompt leaves its queue holding work, probability ρ on average. Which
requests: a prompt whose sojourn T in the queue was long leaves work behind more often (the prompts that arrived
during it, 1 − e^{−λT} for an M/G/1), and a long sojourn is a long TTFT. Taking the step independent of the TTFT puts
the long steps on the short TTFTs as often as on the long ones: SGLang's colocated chat (default hardware, half its
limit) then gains 45 ms at P90 where the simulator gains 75 (TensorRT-LLM's OPT-13B on one A100 pair at 7.8 req/s;
both 40-46 ms at the mean). So the step is coupled to the TTFT *comonotonically* within each prompt bin: the longest
share ρ of the bin's TTFTs get k·s_b, the rest k·s_p (the strongest positive coupling, where the M/G/1's is
``1 − e^{−λT}``), i.e. with F_0 the bin's TTFT law without the step

    F(a) = min(1 − ρ, F_0(a − k s_p)) + max(0, F_0(a − k s_b) − (1 − ρ)),

whose mean is ``E[T_0] + k((1 − ρ)s_p + ρ s_b)`` (the coupling moves no mass between the two steps) and whose
quantiles lie between the law's shifted by k·s_p and by k·s_b. With more than two steps s_1 ≤ … ≤ s_n of weights
w_i (cumulative c_i, c_0 = 0) the same coupling gives the quantile band (c_{i−1}, c_i] of the bin's TTFT the step
s_i:

    F(a) = Σ_i min(w_i, max(0, F_0(a − k s_i) − c_{i−1})),

mean ``E[T_0] + k Σ_i w_i s_i`` (:func:`coupled`).

The chunked scheduler's steps (:func:`chunk_step_law`): the busy share ρ is split by count into the full chunk step
τ_c and the drain steps, and the drain steps are not of one length: a drain step carries the K ≥ 1 prompts that
arrived during the step before, so it spreads with K (:func:`drain_step_var_s2`). Since 2026-12-07 they are
:data:`DRAIN_SLICES` equal-mass slices of a gamma law of mean τ_d and that variance (:func:`drain_step_slices`; the
mean unchanged), which the coupling gives to the longest TTFTs: the simulator's next iteration grows with the TTFT
(MLPerf DGX-H100 on TensorRT-LLM at 0.95 of the limit, drain steps only: 77 / 110 / 146 / 190 ms over the TTFT's
lower half / 50–90 % / 90–99 % / top 1 %, against a two-point law of 59 and 95 ms and now drain slices of 70 / 87 /
101 / 123 ms; its P99 TTFT 0.445 → 0.472 s against 0.529 s simulated; benchmarks/chunk_queue_vs_sim.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import numpy as np

from pdplan.numerics.special import gammainc, gammaincinv
from pdplan.queueing.chunk_window import ChunkQueue
from pdplan.queueing.distributions import ShiftedMixture, mixture_quantile
from pdplan.queueing.ttft_mixture import TtftMixture
from pdplan.types import FloatArray

DRAIN_SLICES = 4
"""Equal-mass slices of the drain steps' law in the next iteration (:func:`chunk_step_law`): each slice one more
shifted law in :class:`OverlapTtft`, so its percentiles cost one cdf per point."""
BRACKET_RTOL = 1e-8
"""The busy law's quantile, found to brentq's tolerance (1e-10 relative), is widened by this share as the bracket's
top."""


def shifted(ttft: TtftMixture | ShiftedMixture, shift_s: FloatArray) -> TtftMixture | ShiftedMixture:
    """``ttft`` with every offset ``shift_s[r]`` later at rate r (a constant shift of the law per rate)."""
    if isinstance(ttft, TtftMixture):
        return dataclasses.replace(ttft, offsets_s=ttft.offsets_s + shift_s[:, None, None])
    offsets = np.broadcast_to(ttft.offsets_s, (shift_s.size, ttft.prob.size))
    return ShiftedMixture(ttft.wait, offsets + shift_s[:, None], ttft.prob)


@dataclass(frozen=True, slots=True)
class OverlapTtft:
    """TTFT plus the overlap scheduler's extra iteration, coupled to the TTFT (module docstring)."""

    laws: tuple[TtftMixture | ShiftedMixture, ...]
    """The TTFT law shifted by k·s_i at each rate, the steps ascending at every rate (:func:`coupled`)."""
    weights: FloatArray
    """``[R, n]`` w_i per rate: the share of tokens whose next iteration is step i."""

    @classmethod
    def two(
        cls, plain: TtftMixture | ShiftedMixture, busy: TtftMixture | ShiftedMixture, busy_prob: FloatArray
    ) -> OverlapTtft:
        """A plain step (probability 1 − ρ) and a longer one carrying work (ρ, per rate ``busy_prob``)."""
        rho = np.asarray(busy_prob, dtype=np.float64)
        return cls((plain, busy), np.stack((1.0 - rho, rho), axis=1))

    @property
    def mean_s(self) -> FloatArray:
        means = np.stack([law.mean_s for law in self.laws], axis=1)
        return np.asarray(np.sum(self.weights * means, axis=1), dtype=np.float64)

    def cdf_per_bin(self, a_s: float) -> FloatArray:
        """``P(TTFT ≤ a | bin)``, shape ``[R, L]`` (module docstring)."""
        below = np.cumsum(self.weights, axis=1) - self.weights  # c_{i−1}
        out = np.zeros(())
        for i, law in enumerate(self.laws):
            band = np.maximum(0.0, law.cdf_per_bin(a_s) - below[:, i, None])
            out = out + np.minimum(self.weights[:, i, None], band)
        return np.asarray(out, dtype=np.float64)

    def quantile(self, q: float) -> FloatArray:
        """The mixture's quantile per rate by brentq, between the shortest and the longest step's law (each found to
        brentq's tolerance: the bracket is widened by :data:`BRACKET_RTOL` of the longest one, so the cdf there
        reaches q)."""
        lo, hi = self.laws[0].quantile(q), self.laws[-1].quantile(q)
        out = np.empty(lo.size)
        prob = self.laws[0].prob
        for r in range(lo.size):
            low, high = float(min(lo[r], hi[r])), float(max(lo[r], hi[r]))
            high += BRACKET_RTOL * high
            out[r] = mixture_quantile(partial(self._row_cdf, r, prob), q, low, high, "TTFT")
        return out

    def _row_cdf(self, r: int, prob: FloatArray, a_s: float) -> float:
        """The mixture cdf of rate r at ``a_s``."""
        return float(self.cdf_per_bin(a_s)[r] @ prob)


def coupled(ttft: TtftMixture | ShiftedMixture, steps_s: FloatArray, weights: FloatArray) -> OverlapTtft:
    """``ttft`` with the next iterations ``steps_s[r, i]`` (k steps each, seconds) of weights ``weights[r, i]``
    coupled to it comonotonically (module docstring): the steps sorted per rate, each column a shifted law (the
    columns of weight 0 at every rate left out)."""
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), np.shape(steps_s))
    kept = np.any(w > 0.0, axis=0)  # a step of weight 0 at every rate adds a law's cost and nothing else
    kept[0] |= not kept.any()
    order = np.argsort(np.asarray(steps_s, dtype=np.float64)[:, kept], axis=1, kind="stable")
    steps = np.take_along_axis(np.asarray(steps_s, dtype=np.float64)[:, kept], order, axis=1)
    w = np.take_along_axis(w[:, kept], order, axis=1)
    return OverlapTtft(tuple(shifted(ttft, steps[:, i]) for i in range(steps.shape[1])), np.array(w))


def drain_step_slices(mean_s: FloatArray, var_s2: FloatArray, slices: int) -> FloatArray:
    """``[R, slices]``: the conditional means of ``slices`` equal-mass slices of a gamma law of mean ``mean_s`` and
    variance ``var_s2`` per rate (the chunked scheduler's drain steps, :meth:`pdplan.serving.colocated.
    ColocatedModel.overlap_step_law`), ``E[X | slice j] = M·kθ·(P(k + 1, x_j/θ) − P(k + 1, x_{j−1}/θ))`` with shape
    k = m²/v, scale θ = v/m, x_j = θ·P⁻¹(k, j/M) (P the regularised lower incomplete gamma), scaled so that they
    average to the mean exactly; a variance of 0 puts every slice at the mean."""
    if slices < 1:
        raise ValueError(f"slices must be at least 1, got {slices}")
    m = np.asarray(mean_s, dtype=np.float64)[:, None]
    v = np.asarray(var_s2, dtype=np.float64)[:, None]
    spread = (v > 0.0) & (m > 0.0)
    shape = np.divide(m * m, v, out=np.ones_like(m), where=spread)
    u = np.arange(slices + 1, dtype=np.float64)[None, :] / slices
    edges = gammaincinv(shape, np.clip(u, 0.0, 1.0))  # in units of θ; P⁻¹(k, 1) = ∞
    upper = gammainc(shape + 1.0, edges)
    means = slices * np.diff(upper, axis=1) * m  # kθ = m
    means *= m / np.maximum(means.mean(axis=1, keepdims=True), 1e-300)
    return np.asarray(np.where(spread, means, m), dtype=np.float64)


def drain_step_var_s2(
    lam: FloatArray, tau_drain_s: FloatArray, tau_plain_s: FloatArray, drain_time: FloatArray
) -> FloatArray:
    """The variance of a chunked instance's drain step per rate (:mod:`pdplan.serving.colocated`, the overlap
    scheduler): a drain step lasts τ_p plus the own work of the K ≥ 1 prompts it carries, w̄ each, those that arrived
    during the step before (the gated regime, every step taking the prompts of the one before: Takagi's gated M/G/1,
    :mod:`pdplan.queueing.chunk_window` *Drains*), K a Poisson count of mean μ = λτ_d given K ≥ 1: mean
    ``m = μ/(1 − e^{−μ})``, variance ``m(1 + μ − m)``. The step before's own spread passes on with the slope λw̄ of
    E[K | S_prev] (exact for a Poisson count; the zero-truncated one's is smaller), so the stationary
    ``Var S = w̄²·m(1 + μ − m)/(1 − (λw̄)²)``, with ``w̄ = (τ_d − τ_p)/m``; 0 where no time is in drain steps
    (``drain_time``). Left out: the spread of w (prompt lengths) and the decode batch's own drift."""
    mu = lam * tau_drain_s
    count = np.divide(mu, -np.expm1(-mu), out=np.ones_like(mu), where=mu > 0)  # m
    work = np.maximum(tau_drain_s - tau_plain_s, 0.0) / count
    gain = np.minimum(lam * work, 1.0 - 1e-9)
    var = work**2 * count * np.maximum(1.0 + mu - count, 0.0) / (1.0 - gain**2)
    return np.asarray(np.where(drain_time > 0, var, 0.0), dtype=np.float64)


def chunk_step_law(lam: FloatArray, q: ChunkQueue) -> tuple[FloatArray, FloatArray]:
    """A chunked instance's next iteration per rate (module docstring), points ``[R, 2 + DRAIN_SLICES]`` and their
    weights: a plain step τ_p (1 − ρ); of the busy share ρ, by count, a full chunk step τ_c (``n_c = (ρ − f_d)/τ_c``
    a second) or a drain step (``n_d = f_d/τ_d``), the latter in :data:`DRAIN_SLICES` slices of its law. The mean,
    ``(1 − ρ)τ_p + ρ·ρ/(n_c + n_d)``, is the per-step mean's (:mod:`pdplan.serving.colocated`)."""
    rho = np.minimum(q.rho, 1.0)
    drain = np.minimum(q.drain_time, rho)
    full_per_s, drain_per_s = (rho - drain) / q.tau_chunk_s, drain / q.tau_drain_s  # chunk-carrying steps a second
    per_s = full_per_s + drain_per_s
    full = np.divide(rho * full_per_s, per_s, out=rho.copy(), where=per_s > 0)  # the busy share, by count
    var = drain_step_var_s2(lam, q.tau_drain_s, q.tau_plain_s, drain)
    slices = drain_step_slices(q.tau_drain_s, var, DRAIN_SLICES)
    points = np.concatenate((q.tau_plain_s[:, None], q.tau_chunk_s[:, None], slices), axis=1)
    each = np.repeat(((rho - full) / DRAIN_SLICES)[:, None], DRAIN_SLICES, axis=1)
    weights = np.concatenate(((1.0 - rho)[:, None], full[:, None], each), axis=1)
    return np.asarray(points, dtype=np.float64), np.asarray(weights, dtype=np.float64)
