"""Colocated baseline: prefill and decode share one instance (docs/queueing.md §3).

Per instance, Poisson arrivals at λ_c (= λ/z for z replicas), linear decode step time
``τ = t0 + t1·B + t2·K`` (:class:`~pdplan.queueing.decode.LinearStepTime`), workload bins
``(L_i, n_i, p_i)``. Two schedulers:

``"prefill-first"`` (vanilla vLLM, no chunking): at every step boundary a waiting prompt runs alone
  for its whole prefill S(L) and stalls every running decode.

  *Mean field.* The GPU spends ρ_p = λE[S] of its time on prefill; a decode step without prefill
  (a *plain* step) lasts ``τ_p = t0 + t1 N_s + t2 K_s`` with the step-averaged batch N_s = λE[n]/r_s,
  r_s = (1 − ρ_p)/τ_p steps per second (K_s likewise), so ``τ_p = t0 + u_d τ_p/(1 − ρ_p)``,
  ``τ_p = (1 − ρ_p)·TPOT̄`` and ``TPOT̄ = t0/(1 − ρ_p − u_d)`` (§3 "mean TPOT ≈ τ_d/(1−ρ_p)", the
  token interval per unit time).

  *TTFT.* The prompt queue is an M/G/1 with multiple vacations (the decode steps): by the Fuhrmann–Cooper
  decomposition (Fuhrmann and Cooper, Oper. Res. 33(5), 1985) its wait is the M/G/1 wait W (P-K, FFT) plus,
  independent of it, the equilibrium rest of the vacation in progress, here of a plain step τ_p: uniform on
  [0, τ_p] while some decode runs (probability ``1 − e^{−N}``, N = λE[n]TPOT̄), 0 on an idle instance, which starts
  a prompt at once (:func:`_with_step_rest`). TTFT = W + that rest + S(L); the rest's mean is
  ``v = τ_p/2·(1 − e^{−N})``. (Before, the rest was the constant v: with 94 % of prompts hits, whose TTFT is S +
  the rest, the P90 sat at the mean rest, −14 % against ``pdplan simulate`` on the Zipf prefixes of
  docs/prefix_cache.md §9, whose P90 takes the rest's upper tail.)

  *Lengths within a bin.* A cell stands for every prompt of its length bin, and its own S(L) enters TTFT directly:
  priced at the bin's representative alone, the TTFT law is a sum of point masses p_k and a percentile falls
  between them (docs/prefix_cache.md §9: the load-balance sessions' P90 +9.6 % against ``pdplan simulate``, between
  the bins of 5,053, 6,310 and 8,947 tokens, 4.7 % each). So, as the xPyD prefill pool does
  (:mod:`pdplan.serving.prefill_pool`), each cell may give its prompt's service at the J equal-weight quadrature
  lengths l_kj of its bin (``prefill_service_s`` ``[C, J]``, :func:`pdplan.workload.quadrature.input_quadrature`:
  each bin's lengths keep its mean): the prompt queue's service law is then the C·J points at ``p_c/J`` each (ρ_p =
  λE[S], the P-K wait, the busy periods and group mates of the TPOT side), and since W and the step rest do not
  depend on the tagged prompt's own length (FCFS, Poisson arrivals), ``P(TTFT ≤ a | c) = (1/J) Σ_j F_{W+V}(a −
  S(l_cj))`` (:class:`~pdplan.queueing.ttft_mixture.TtftMixture` with no link delay), a law whose steps are p_c/J.
  A cell's own stall window takes its mean service ``S̄_c = (1/J) Σ_j S(l_cj)`` (E[Z] is linear in the window, so
  its mean is exact; P(Z = 0) is convex in it, so it is slightly low: the stall a little likelier). One value per cell
  (``[C]``) is the case J = 1.

  *Group mates.* No decode step runs while the prompt queue is busy, so all X prompts of one busy
  period join the batch together and start decoding at the same step. A tagged request's group is
  size-biased: it has ``m = E[X(X−1)]/E[X]`` mates, with E[X] = 1/(1 − ρ_p) and Var X = (ρ_p(1 − ρ_p)
  + λ²E[S²])/(1 − ρ_p)³ (prompts served in an M/G/1 busy period), i.e. ``m = (ρ_p(1 − ρ_p) +
  λ²E[S²])/(1 − ρ_p)² + ρ_p/(1 − ρ_p)``. Mate j decodes alongside it for min(n, n_j) steps, adding
  t1 + t2(L_j + k) at step k, so the load it sees per step rises by ``m·E_j[Σ_{k<min(n,n_j)}
  (t1 + t2(L_j + k))]/n`` (:func:`_mate_load`) above the others' mean u_d TPOT̄ (other groups,
  independent of its own). Its mean step is ``τ_i = t0 + w_i + u_d TPOT̄ + mates_i``. (Against
  ``pdplan simulate``, mooncake-arxiv at 70 % load: m = 4.6, the step a request sees is 9 % above
  the step average τ_p; without this term the mean TPOT was −5 %.)

  *Stall window.* A request's n decode steps start at its own prefill departure. The queue then
  holds the prompts that arrived during its sojourn W + v + S_i, and each prompt arriving during
  its first n − 1 steps stalls it before its next step (one arriving in its last step stalls it
  only after it finished); a prompt arriving during a stall is served inside it. So its stall time
  is ``Z = Σ_{j≤K} B_j`` with M/G/1 busy periods B_j and K ~ Poisson(λ(W + v + S_i + (n − 1)τ_i)),
  mixed over W: :func:`~pdplan.queueing.chunk_window.busy_left` gives P(Z = 0) and the moments of
  Z given Z > 0 (the n − 1 steps taken at their mean τ_i). ``TPOT_i = t0 + w_i + X + mates_i +
  Z/n``: own weight, the others' load X (mean u_d TPOT̄, §2.4 variance), the mates' mean load and
  the stall, a two-part mixture (:class:`~pdplan.queueing.components.ComponentMixture`): none
  (Z = 0: the load alone) and stalled, a gamma in load + Z/n with the means and variances added
  (taken independent) above its floor ``S_min/n`` (the load is ≥ 0, and Z > 0 holds at least one
  whole prefill; S_min = the shortest prompt's service). Check: ``Σ_i p_i E[Z_i] = ρ_p/(1 − ρ_p)·
  (E[W] + v + E[S] + E[(n − 1)τ_i])``; per step of a long request that is ``ρ_p τ_i/(1 − ρ_p)``,
  the mean field's ``TPOT̄ − τ_p`` at τ_i = τ_p, while a short one is dominated by the busy time it
  starts in, ``ρ_p E[T]/(1 − ρ_p)`` spread over few steps. Not modelled: the variance the mates
  and the groupiness of the others add to the load (small next to the stall's), and the gamma's
  exponential tail where Z's follows the longest prompts. (The previous closed form spread the
  stalls evenly, variance λTPOT̄E[S²]/n per token: TPOT P99 −31 % (chat) to −77 % (coding) at half
  load.)

``"chunked"`` (Sarathi-Serve stall-free batching, Agrawal et al. OSDI'24, arXiv 2403.02310): every
  step runs all B decodes plus ≤ C − B prefill tokens. Mean field, the plain step τ_p, the full
  chunk step τ_c = τ_p + e and the chunk queue (an M/G/1 in time with per-prompt service S_L plus
  the drain waste of partly filled last chunks) are derived in :mod:`pdplan.queueing.chunk_window`.
  TTFT (our derivation; docs/accuracy.md §6 measures it against ``pdplan simulate`` up to 0.95 of the stable
  limit), *the landing step*. Exactly, a prompt arriving during a step of length T* waits its rest U·T*; the
  tokens ahead of it that this step does not take, Y (the backlog beyond its chunk plus the arrivals before the
  prompt), then pass in full steps of c tokens, and its last step holds the rest of Y, its own last chunk and the B
  tokens behind it that fit: ``TTFT = U·T* + Yφ + S_L + τ_p(1 − m/c) + wB`` (φ = τ_c/c a token's fluid time, w = e/c
  its work, m the tokens of Y and the prompt in the last step), each prompt ahead counted once. The landing step is
  one of three kinds (:func:`_landing_law`), by their shares of time:

  * a plain step (1 − ρ): nothing is queued (Y = 0); the next step takes the prompt and the others that arrived
    meanwhile. Wait ``U·τ_p + O(τ_p)``, O(t) the work of the Poisson(λt) others that arrived during the landing
    step, which ride in the prompt's step (compound Poisson with the per-step work s̃ = min(t_p L + A_L, e)).
  * a drain step (f_d): the step took every queued prompt (Y = the arrivals before the prompt, in O). Wait ``U·T*
    + O(T*)``, T* its length-biased length, a gamma of mean τ_d (the chunk queue's drain step) whose length-biased
    mean balances the capped step law's E[T*]; a step takes every prompt that arrived during the step before (M/G/1
    with gated service and multiple vacations, the plain step as the vacation; Takagi, *Queueing Analysis* Vol. 1,
    1991).
  * a full step (f_f = ρ − f_d, length τ_c): the budget binds and a backlog is queued. The fluid M/G/1 wait W_f (on
    the fluid service S_L at ρ_f) then counts the rest of the step in progress and everything queued ahead, so
    ``U·T* + Yφ ≈ W_f`` given the fluid queue busy: wait ``max(W_f | W_f > 0, U·τ_c) + O(τ_c)``.

  Then ``S_L + P_d w_L`` (:func:`~pdplan.queueing.chunk_window.chunk_queue`): the prompt's own plain parts and
  work and, when its last chunk rides in a drain step (share P_d), that step's waste τ_p(1 − m/c); in that step
  also ride the tokens that arrived during its own earlier chunks (:func:`_behind_s`). With the other 1 − P_d its
  last step is full, the others' tokens filling it: ``(c − E[m])φ`` more (on the whole wait). Short prompts
  under a large budget (MLPerf) land in plain and drain steps only and the mean is the gated law's ``τ_p + E[s] +
  E[T*](1/2 + λE[s̃])``; long prompts under a small budget (c about a prompt) land mostly in full steps and the
  wait is the fluid W_f; as λ → 0 the wait is the rest τ_p/2 of a plain step. With an idle instance (no decode
  runs, P = e^{−N}) a prompt waits W_f alone. (Before this law the TTFT was ``W_f + G + S_L + P_d w_L`` with G the
  rest of the landing step and all the others' work in the next: on the default scenario's baseline, where a
  step takes every waiting prompt while ρ_f = 0.61, W_f and G both counted the prompts ahead, mean +37 % and P50
  +71 % over the simulator at 34.6 req/s.)
  TPOT per cell: ``t0 + w_i + X`` with the others' decode load (mean u_d τ̄, §2.4 load-noise
  variance) plus e times the fraction of chunk steps among its n steps, whose four-part law (none,
  idle start, busy start, all) comes from the departure-started window of
  :func:`~pdplan.queueing.chunk_window.window_components`; the parts are gammas on the load
  (:class:`~pdplan.queueing.components.ComponentMixture`), the two spread ones cut at f = 1, plus
  the variance of a chunk's attention cost (:func:`_chunk_cost_var`, at the effective slope
  t_a = 2E[A]/E[L²] when the attention is given per prompt). Measured against ``pdplan
  simulate`` (docs/accuracy_serving.md).

*Non-Poisson arrivals* (``arrival_ca2`` = c² of one instance's gaps ≠ 1; :mod:`pdplan.queueing.arrivals`): the
prompt queue's M/G/1 wait (prefill-first's W, chunked's fluid W_f) becomes the GI/G/1 law of
:mod:`pdplan.queueing.gig1` with c_s² of the prompts' service (the chunk queue's S_L per rate): Whitt's delay
probability, Kingman's mean times Krämer–Langenbach-Belz's g (c² ≤ 1) or π/ρ (c² > 1). The chunked landing step
(:func:`_landing_wait`) is read as a renewal arrival sees it (issue #22; since the landing-step law it reads W_f only
in full steps, so the correction of W_f alone left the TTFT at the Poisson one on the arrivals benchmark of
docs/reuse_workloads.md §4, where no prompt lands in a full step): the arrival lands in a chunk step with Whitt's π
instead of the time share ρ (:func:`_renewal_landing`), and the others that ride with it in a landing step of length
t number ``(2/t)∫_0^t H(u) du`` on average, H the renewal function of gamma gaps of that c²
(:func:`pdplan.queueing.arrivals.window_count_mean`), not λt; their count keeps the Poisson shape. The rest stays
as for Poisson arrivals: the step laws (the drain step's, the prefill-first step rest), the mean field (rates, not
gaps) and the TPOT side: the group mates, the Poisson count of prompts in a stall window and the load noise.
Smoother arrivals there mean fewer prompts bunched into one window than modelled (TPOT pessimistic), burstier ones
more. Poisson (1) runs exactly the Poisson code.

TTFT and TPOT are returned as independent marginals; their joint attainment as a product is an
approximation here (both live on one instance; docs/queueing.md §5.2 flags it). Under prefill-first
they are positively associated (a long wait W also lengthens the stall window), so the product
understates the joint attainment: on the safe side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pdplan.numerics.special import gammainc, gammaincc, gammaincinv
from pdplan.queueing.arrivals import service_scv, window_count_mean
from pdplan.queueing.chunk_width import GemmWidth
from pdplan.queueing.chunk_window import ChunkQueue, busy_left, chunk_queue, gamma_cdf, window_components
from pdplan.queueing.components import ComponentMixture
from pdplan.queueing.decode import (
    DecodeFixedPoint,
    DecodeWorkload,
    LinearStepTime,
    held_context_sums,
    load_noise,
)
from pdplan.queueing.distributions import GammaMixture, ShiftedMixture, WaitDistribution, as_rates
from pdplan.queueing.exact_memo import value_memo
from pdplan.queueing.gig1 import delay_probability, gig1_wait
from pdplan.queueing.link_delay import no_delay
from pdplan.queueing.mg1 import mg1_wait_distribution, pk_wait_moments
from pdplan.queueing.ttft_mixture import TtftMixture
from pdplan.types import FloatArray

SCHEDULERS: tuple[str, ...] = ("prefill-first", "chunked")
_DRAIN_BINS = 32
"""Quantile bins of the length-biased drain step in the chunked TTFT's wait (:func:`_landing_wait`): on the cases of
benchmarks/chunk_queue_vs_sim.py, MLPerf H100 at its published rate and the default scenario's baseline at 20 and
34.6 req/s, TTFT P50, P90 and P99 are within 0.7 % of 64 bins' (16 bins: 1.1 %)."""


@dataclass(frozen=True, slots=True)
class ColocatedResult:
    """TTFT and TPOT distributions per rate, with the mean-field state (arrays ``[R]``)."""

    ttft: TtftMixture | ShiftedMixture
    """prefill-first: per cell over its quadrature lengths (module docstring); chunked: one offset per cell."""
    tpot: GammaMixture  # a ComponentMixture (both schedulers)
    tpot_mean_s: FloatArray
    decode_utilisation: FloatArray
    prefill_utilisation: FloatArray


def _decode_util(rate: FloatArray, wl: DecodeWorkload, st: LinearStepTime) -> FloatArray:
    return np.asarray(rate * st.per_request_s(wl), np.float64)


def _state(rate: FloatArray, tau: FloatArray, wl: DecodeWorkload, st: LinearStepTime) -> DecodeFixedPoint:
    """A decode fixed-point record at a given token interval τ (for the §2.4 load-noise model)."""
    n_seqs, k_tok = rate * wl.mean_steps * tau, rate * wl.mean_work * tau
    t1 = np.full_like(rate, st.t1_s_per_seq)
    t2 = np.full_like(rate, st.t2_s_per_token)
    u = _decode_util(rate, wl, st)
    return DecodeFixedPoint(rate, tau, u, n_seqs, k_tok, tau - t1 * n_seqs - t2 * k_tok, t1, t2)


def _own_weight(wl: DecodeWorkload, st: LinearStepTime) -> FloatArray:
    return np.asarray(st.t1_s_per_seq + st.t2_s_per_token * wl.bin_mean_context, np.float64)


def _check_total(total: FloatArray, what: str) -> None:
    if np.any(total >= 1.0):
        raise ValueError(f"colocated {what}: unstable, prefill + decode utilisation {total.max():.4f} >= 1")


@dataclass(frozen=True, slots=True)
class _PromptLaw:
    """The prompt queue's service law: ``points_s`` ``[C, J]`` (cell c's prompt at its bin's J quadrature lengths,
    equal weights; module docstring, *Lengths within a bin*) flattened with weights ``p_c/J``."""

    points_s: FloatArray
    service_s: FloatArray
    prob: FloatArray

    @property
    def cell_mean_s(self) -> FloatArray:
        """``S̄_c``, the mean over cell c's points."""
        return np.asarray(self.points_s.mean(axis=1), dtype=np.float64)


def _prompt_law(prefill_service_s: ArrayLike, prob: FloatArray) -> _PromptLaw:
    """:class:`_PromptLaw` of ``[C]`` (one point per cell) or ``[C, J]`` services; ValueError unless every one is > 0
    and there is one row per cell."""
    s = np.asarray(prefill_service_s, dtype=np.float64)
    points = s.reshape(-1, 1) if s.ndim <= 1 else s
    if points.ndim != 2 or points.shape[0] != prob.size or np.any(points <= 0):
        raise ValueError("prefill_service_s must be > 0 and have one entry (or one row of points) per workload bin")
    j = points.shape[1]
    flat_p = prob if j == 1 else np.repeat(prob / j, j)
    return _PromptLaw(points, points.ravel(), np.asarray(flat_p, dtype=np.float64))


def colocated_prefill_first(
    rate_per_s: ArrayLike,
    workload: DecodeWorkload,
    step_time: LinearStepTime,
    prefill_service_s: ArrayLike,
    max_cells: int = 2**16,
    arrival_ca2: float = 1.0,
) -> ColocatedResult:
    """Prefill-first colocated instance; ``prefill_service_s[i]`` = S(L_i) for each workload bin, or ``[C, J]``: S at
    each of bin i's J quadrature lengths (module docstring, *Lengths within a bin*). ``max_cells`` caps the FFT
    lattice of the wait; ``arrival_ca2`` the c² of the instance's arrival gaps, which corrects the prompt queue's
    wait. Model in the module docstring."""
    rate = as_rates(rate_per_s)
    p = workload.prob
    law = _prompt_law(prefill_service_s, p)
    s, ps = law.service_s, law.prob
    rho_p = rate * float(ps @ s)
    u_d = _decode_util(rate, workload, step_time)
    _check_total(rho_p + u_d, "prefill-first")
    tpot_mean = step_time.t0_s / (1.0 - rho_p - u_d)
    tau_plain = (1.0 - rho_p) * tpot_mean
    busy = -np.expm1(-rate * workload.mean_steps * tpot_mean)  # some decode runs: a plain step is in progress
    wait = _renewal(mg1_wait_distribution(rate, s, ps, max_cells=max_cells), arrival_ca2, s, ps)
    vacation = tau_plain / 2.0 * busy
    offsets = np.broadcast_to(law.points_s, (rate.size, *law.points_s.shape))
    ttft = TtftMixture(_with_step_rest(wait, busy, tau_plain, max_cells), no_delay(rate.size), offsets, p)
    tpot = _stall_tpot(rate, workload, step_time, law, tpot_mean, vacation)
    return ColocatedResult(ttft, tpot, tpot_mean, u_d, rho_p)


def _with_step_rest(wait: WaitDistribution, busy: FloatArray, step_s: FloatArray, max_cells: int) -> WaitDistribution:
    """``W + V`` per rate, V independent of W: 0 with probability ``1 − busy`` (no decode runs), else the rest
    ``U·τ_p`` of the plain step in progress, U uniform on [0, 1] (module docstring, *TTFT*).

    Exact for the lattice's law of W (its cdf F linear between the lattice points, as
    :meth:`~pdplan.queueing.distributions.WaitDistribution.cdf` reads it, held at its last value beyond):
    ``P(W + U·τ ≤ x) = (I(x) − I(x − τ))/τ`` with ``I(x) = ∫_0^x F(y) dy`` (:func:`_cdf_area`), so ``P(W + V ≤ x) =
    (1 − busy)F(x) + busy (I(x) − I(x − τ))/τ``, evaluated on a lattice over W's span plus τ in at most
    ``max_cells`` cells (W's own step where that fits). Mean ``E[W] + busy·τ/2``.
    """
    rows = []
    for r in range(wait.h_s.size):
        h, tau, f = float(wait.h_s[r]), float(step_s[r]), wait.cdf_grid[r]
        top = h * (f.size - 1) + tau
        n = min(max_cells, int(np.ceil(top / h)) + 2)
        x = np.arange(n) * (top / (n - 2))
        rest = (_cdf_area(f, h, x) - _cdf_area(f, h, x - tau)) / tau
        rows.append((top / (n - 2), (1.0 - busy[r]) * wait.row(r).cdf(x)[0] + busy[r] * rest))
    n = max(c.size for _, c in rows)
    grid = np.stack([np.pad(c, (0, n - c.size), mode="edge") for _, c in rows])
    return WaitDistribution(
        h_s=np.array([h for h, _ in rows]),
        cdf_grid=np.clip(grid, 0.0, 1.0),
        atom=(1.0 - busy) * wait.atom,
        mean_s=wait.mean_s + busy * step_s / 2.0,
    )


def _cdf_area(cdf: FloatArray, h_s: float, x_s: FloatArray) -> FloatArray:
    """``I(x) = ∫_0^x F(y) dy`` for F linear between the lattice values ``cdf`` (step ``h_s``) and held at the last
    one beyond; 0 for x ≤ 0. Trapezoids up to the cell of x, then within it ``F_k d + (F_{k+1} − F_k)d²/(2h)``,
    d = x − kh (past the lattice F_{k+1} = F_k: linear)."""
    whole = np.concatenate(([0.0], np.cumsum(h_s * (cdf[:-1] + cdf[1:]) / 2.0)))
    y = np.maximum(x_s, 0.0)
    k = np.minimum(np.floor(y / h_s).astype(np.intp), cdf.size - 1)
    d = y - k * h_s
    lo, hi = cdf[k], cdf[np.minimum(k + 1, cdf.size - 1)]
    return np.asarray(whole[k] + lo * d + (hi - lo) * d**2 / (2.0 * h_s), dtype=np.float64)


def _group_mates(rate: FloatArray, rho: FloatArray, es2: float) -> FloatArray:
    """Mean number of prompts that join the decode batch with a tagged one (module docstring):
    ``E[X(X−1)]/E[X] = (ρ(1 − ρ) + λ²E[S²])/(1 − ρ)² + ρ/(1 − ρ)``, X = prompts served in an
    M/G/1 busy period."""
    return np.asarray((rho * (1.0 - rho) + rate**2 * es2) / (1.0 - rho) ** 2 + rho / (1.0 - rho), dtype=np.float64)


def _mate_load(wl: DecodeWorkload, st: LinearStepTime) -> FloatArray:
    """Per cell i, the load one random mate adds per step of i, averaged over i's n_i steps:
    ``E_j[Σ_{k<m} (t1 + t2(L_j + k))]/n_i`` with m = min(n_i, n_j), i.e.
    ``E_j[m(t1 + t2 L_j) + t2 m(m − 1)/2]/n_i`` (evaluated once per distinct n); with a window w the mate's context
    sum is Σ_{k<m} min(L_j + k, w) (:func:`pdplan.queueing.decode.held_context_sums`)."""
    n, lin = wl.decode_steps, wl.input_tokens
    uniq, inverse = np.unique(n, return_inverse=True)
    m = np.minimum(uniq[:, None], n[None, :])
    if wl.window_tokens is None:
        total = m * (st.t1_s_per_seq + st.t2_s_per_token * lin[None, :]) + (st.t2_s_per_token * m * (m - 1.0) / 2.0)
    else:
        held = held_context_sums(np.broadcast_to(lin[None, :], m.shape), m, wl.window_tokens)[0]
        total = m * st.t1_s_per_seq + st.t2_s_per_token * held
    return np.asarray((total @ wl.prob / uniq)[inverse.ravel()], dtype=np.float64)


def _stall_tpot(
    rate: FloatArray,
    wl: DecodeWorkload,
    st: LinearStepTime,
    law: _PromptLaw,
    tpot_mean: FloatArray,
    vacation: FloatArray,
) -> ComponentMixture:
    """TPOT of prefill-first: load (others' plus group mates') and the stall Z/n of the
    departure-started window (module docstring), as the parts none (Z = 0) and stalled (a gamma
    above ``S_min/n``, S_min the shortest service of the prompt law); the window holds the cell's mean service."""
    p, n = wl.prob, wl.decode_steps[None, :]
    s, ps = law.service_s, law.prob
    rho_p = rate * float(ps @ s)
    var_load, _ = load_noise(_state(rate, tpot_mean, wl, st), wl)
    mates = _group_mates(rate, rho_p, float(ps @ s**2))[:, None] * _mate_load(wl, st)[None, :]
    base = (_decode_util(rate, wl, st) * tpot_mean)[:, None] + mates
    own = st.t0_s + _own_weight(wl, st)
    window = law.cell_mean_s[None, :] + vacation[:, None] + np.maximum(n - 1.0, 0.0) * (own + base)
    p0, z1, z_var = busy_left(rate, rho_p, s, ps, window, *pk_wait_moments(rate, s, ps))
    floor = float(s[ps > 0].min()) / n
    return ComponentMixture.of(
        offset_s=np.broadcast_to(own, var_load.shape).copy(),
        weights=np.stack([p0, 1.0 - p0]),
        mean_s=np.stack([base, base + z1 / n]),
        var_s2=np.stack([var_load, var_load + z_var / n**2]),
        prob=p,
        lo_s=np.stack([np.zeros_like(base), np.broadcast_to(floor, base.shape)]),
        hi_s=np.full((2, *base.shape), np.inf),
    )


@value_memo(entries=128, max_bytes=2**26)
def colocated_chunked(
    rate_per_s: ArrayLike,
    workload: DecodeWorkload,
    step_time: LinearStepTime,
    *,
    token_budget: float,
    prefill_s_per_token: float,
    attention_s_per_token2: float,
    attention_s: ArrayLike | None = None,
    drain_s: ArrayLike | None = None,
    max_cells: int = 2**16,
    arrival_ca2: float = 1.0,
    width: GemmWidth | None = None,
) -> ColocatedResult:
    """Sarathi-style chunked prefill, token budget C (t_p s/token; attention ``attention_s[i]`` s
    per prompt of cell i, or t_a s/token² as ``t_a L²/2`` when None; ``drain_s[i]`` the GEMM-side
    work of its last chunk alone, or ``t_p m_L`` when None; ``width``: the prompt tokens priced at the step's width
    instead of t_p and drain_s, :mod:`pdplan.queueing.chunk_width`: :func:`~pdplan.queueing.chunk_window.
    chunk_queue`).

    ``max_cells`` caps the FFT lattice of the chunk-queue wait (:func:`mg1_wait_distribution`); ``arrival_ca2``
    corrects it for non-Poisson arrivals (module docstring). Memoised on the exact doubles of every input
    (:func:`~pdplan.queueing.exact_memo.value_memo`; arrays read-only): a search asks for the same instance at the same
    rate again (its goodput root and its snapshot, a sweep's next forecast), 102 calls for 21 results over 12
    default-family sweep points. 128 results (at most 64 MiB of arrays) span one ``optimize`` of every bundled
    example: with 32 the memo emptied twice in ``examples/h100-prefill-l40s-decode.yaml``, whose 90 calls then
    computed 90 results for 75 distinct inputs (``shared-system-prompt.yaml``: 45 for 33).
    """
    rate = as_rates(rate_per_s)
    p = workload.prob
    attn = None if attention_s is None else np.asarray(attention_s, dtype=np.float64).ravel()
    drain = None if drain_s is None else np.asarray(drain_s, dtype=np.float64).ravel()
    q = chunk_queue(
        rate, workload, step_time, token_budget, prefill_s_per_token, attention_s_per_token2, attn, drain, width
    )
    if np.any(q.rho >= 1.0):
        raise ValueError(f"chunked: prefill capacity exceeded (chunk-step utilisation {q.rho.max():.4f} >= 1)")
    fluid_wait = _chunk_wait(rate, workload, q.fluid_service_s, max_cells, arrival_ca2)
    n_seqs = rate * workload.mean_steps * q.tau_mean_s
    wait = _landing_wait(fluid_wait, np.exp(-n_seqs), q, workload, max_cells, arrival_ca2)
    st = _state(rate, q.tau_mean_s, workload, step_time)
    var_load, _ = load_noise(st, workload)
    win = window_components(q, workload)
    e = q.extra_s[None, :, None]
    var_e = _chunk_cost_var(workload, q.chunk_tokens, q.attention_s_per_token2)[None, :, None]
    base = np.broadcast_to((q.u_decode * q.tau_mean_s)[:, None], var_load.shape)[None]
    w = _own_weight(workload, step_time)
    tpot = ComponentMixture.of(
        offset_s=np.broadcast_to(step_time.t0_s + w, var_load.shape).copy(),
        weights=win.weights,
        mean_s=base + e * win.mean,
        var_s2=var_load[None] + e**2 * win.var + win.mean**2 * var_e,
        prob=p,
        lo_s=np.where(win.partial, base, 0.0),
        hi_s=np.where(win.partial, base + e, np.inf),
    )
    ttft = ShiftedMixture(wait, q.service_s + _behind_s(q, workload), p)
    return ColocatedResult(ttft, tpot, q.tau_mean_s, q.u_decode, q.u_prefill)


def _landing_step(q: ChunkQueue, workload: DecodeWorkload) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``E[T*]``, ``E[T*²]`` of the step a Poisson arrival lands in, and ``E[s̃]``, ``E[s̃²]`` of the work one prompt
    puts into one step, per rate, by the gated step law.

    A step lasts ``T = τ_p + Σ_{j ∈ G} s̃_j`` over the prompts G that arrived during the step before, ``s̃ =
    min(t_p L + A_L, e)`` the work one prompt puts into one step (at most a full chunk e). Stationarity of the
    compound-Poisson recursion gives ``E[T] = τ̄`` (the mean field's step) and ``Var T = λE[T]E[s̃²] + ρ_p² Var T``,
    i.e. ``Var T = λτ̄E[s̃²]/(1 − ρ_p²)`` (ρ_p = u_p); T is taken gamma for ``E[T³] = m³ + 3mv + 2v²/m``. A Poisson
    arrival lands in the length-biased step T* (``E[T*] = E[T²]/E[T]``, ``E[T*²] = E[T³]/E[T]``).
    """
    p, m, s = workload.prob, q.tau_mean_s, _step_work(q, workload)
    es, es2 = s @ p, s**2 @ p
    v = np.maximum(q.rate * m * es2 / (1.0 - q.u_prefill**2), 1e-12 * m**2)
    return (m**2 + v) / m, (m**3 + 3.0 * m * v + 2.0 * v**2 / m) / m, es, es2


def _step_work(q: ChunkQueue, workload: DecodeWorkload) -> FloatArray:
    """``s̃ = min(t_p L + A_L, e)`` per rate and cell: the work one prompt puts into one step (at most a full chunk)."""
    own = q.fluid_service_s - workload.computed_tokens[None, :] * (q.tau_plain_s / q.chunk_tokens)[:, None]
    return np.asarray(np.minimum(own, q.extra_s[:, None]), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Landing:
    """The step a Poisson arrival lands in, per rate: shares of time in plain (1 − ρ), drain (f_d) and full
    (f_f = ρ − f_d) steps, and the unbiased drain step's gamma shape k_d and scale θ_d (:func:`_landing_law`)."""

    plain: FloatArray
    drain: FloatArray
    full: FloatArray
    drain_shape: FloatArray
    drain_scale_s: FloatArray


def _landing_law(q: ChunkQueue, workload: DecodeWorkload) -> _Landing:
    """Time shares of the three step kinds and the drain step's law (module docstring, "the landing step").

    The step law of :func:`_landing_step` (gamma, mean τ̄, variance v) is capped at a full step: a step carries at
    most c tokens, so no step lasts more than τ_c; ``E[min(T, τ_c)²] = k(k + 1)θ²P(k + 2, τ_c/θ) + τ_c²Q(k, τ_c/θ)``
    (gamma shape k = τ̄²/v, scale θ = v/τ̄; P, Q the regularised incomplete gammas) gives the length-biased mean
    ``E[T*] = E[min(T, τ_c)²]/τ̄``. The chunk queue splits the chunk-busy time ρ into drain steps (share f_d, mean
    τ_d: :func:`~pdplan.queueing.chunk_window.chunk_queue`) and full steps (τ_c); the plain steps (τ_p) take 1 − ρ.
    Balancing ``E[T*] = (1 − ρ)τ_p + f_d E[T_d*] + f_f τ_c`` gives the drain steps' length-biased mean E[T_d*]
    (at least τ_d), and with their mean τ_d a gamma drain step of variance ``τ_d(E[T_d*] − τ_d)``.
    """
    tau, tau_p, tau_c, rho = q.tau_mean_s, q.tau_plain_s, q.tau_chunk_s, q.rho
    t_star = _landing_step(q, workload)[0]
    var = np.maximum(t_star * tau - tau**2, 1e-12 * tau**2)
    k, theta = tau**2 / var, var / tau
    capped = (
        k * (k + 1.0) * theta**2 * gammainc(k + 2.0, tau_c / theta) + tau_c**2 * gammaincc(k, tau_c / theta)
    ) / tau
    full = rho - q.drain_time
    some = q.drain_time > 1e-12
    share = np.where(some, q.drain_time, 1.0)
    drain_star = np.maximum(np.where(some, (capped - (1.0 - rho) * tau_p - full * tau_c) / share, 0.0), q.tau_drain_s)
    var_d = np.maximum(q.tau_drain_s * (drain_star - q.tau_drain_s), 1e-12 * q.tau_drain_s**2)
    return _Landing(1.0 - rho, q.drain_time, full, q.tau_drain_s**2 / var_d, var_d / q.tau_drain_s)


def _renewal_landing(q: ChunkQueue, workload: DecodeWorkload, ca2: float) -> _Landing:
    """:func:`_landing_law` as an arrival of a renewal stream with c² ``ca2`` ≠ 1 sees it.

    A Poisson arrival lands in a chunk step (drain or full) with the time share ρ of those steps (PASTA). The chunk
    queue is an M/G/1 in time on the fluid service S_L (:func:`~pdplan.queueing.chunk_window.chunk_queue`), busy
    exactly while chunk steps run, so a renewal arrival finds it busy with that queue's GI/G/1 delay probability π
    (Whitt's, :func:`pdplan.queueing.gig1.delay_probability`, at ρ and the fluid service's c_s²) instead: the plain
    share is 1 − π and the drain and full shares are scaled by π/ρ (their drain step law kept). Smooth arrivals land
    in plain steps more often than ρ says, bursty ones less often. The others that ride with the prompt are counted
    by the renewal stream's window count (:func:`pdplan.queueing.arrivals.window_count_mean`, in
    :func:`_landing_wait`).
    """
    law = _landing_law(q, workload)
    pi = np.array(
        [
            float(delay_probability(q.rho[r], ca2, service_scv(q.fluid_service_s[r], workload.prob)))
            for r in range(q.rate.size)
        ]
    )
    busy = q.rho > 0.0
    scale = np.where(busy, pi / np.where(busy, q.rho, 1.0), 0.0)
    return _Landing(
        1.0 - np.where(busy, pi, 0.0), law.drain * scale, law.full * scale, law.drain_shape, law.drain_scale_s
    )


def _landing_wait(
    fluid: WaitDistribution,
    atom: FloatArray,
    q: ChunkQueue,
    workload: DecodeWorkload,
    max_cells: int,
    arrival_ca2: float = 1.0,
) -> WaitDistribution:
    """The chunked TTFT's wait per rate on a lattice (module docstring, "the landing step"): with probability
    ``atom`` (no decode runs, P = e^{−N}) the fluid wait W_f alone; else the landing-step mixture

    * plain step (share 1 − ρ): the rest ``U·τ_p`` plus the others' work O(τ_p);
    * drain step (share f_d, T* the length-biased gamma of :func:`_landing_law`, on :data:`_DRAIN_BINS` quantile
      bins): ``U·T* + O(T*)``;
    * full step (share f_f): ``max(W_f | W_f > 0, U·τ_c) + O(τ_c)`` (W_f independent of U; the cdf of the max is the
      product of the cdfs);

    O(t) the work of the Poisson(λt) others that arrived during the landing step of length t (a renewal stream,
    ``arrival_ca2`` ≠ 1: its window count's mean, the part weights of :func:`_renewal_landing`), compound Poisson with
    the per-cell step work s̃ (:func:`_step_work`), summed per part by its transform ``exp(λt(φ_s̃ − 1))``; then with
    probability 1 − P_d the prompt's last step is full, adding ``(c − E[m])τ_c/c`` (the others' tokens that fill
    it; m at the chunk c, :func:`_last_chunk_tokens`). The lattice spans W_f's grid, the longest landing step, O's
    mean and ten of its standard deviations at that
    step plus three of the largest s̃, and the full-step shift, in at most ``max_cells`` cells. The mean, per part and
    independent of the lattice but for the max: ``t/2 + λtE[s̃]``, the max's by the trapezoid rule on the lattice
    (its cdf is piecewise linear there), ``(1 − P_d)`` times the fill; W_f's analytic mean for the idle part.
    """
    law = _landing_law(q, workload) if arrival_ca2 == 1.0 else _renewal_landing(q, workload, arrival_ca2)
    s = _step_work(q, workload)
    p = workload.prob
    fill = (q.chunk_tokens - _last_chunk_tokens(q, workload) @ p) * q.tau_chunk_s / q.chunk_tokens
    rows = []
    for r in range(q.rate.size):
        bins = (
            gammaincinv(law.drain_shape[r] + 1.0, (np.arange(_DRAIN_BINS) + 0.5) / _DRAIN_BINS) * law.drain_scale_s[r]
        )
        steps = [(float(q.tau_plain_s[r]), float(law.plain[r]), False)]
        steps += [(float(t), float(law.drain[r]) / _DRAIN_BINS, False) for t in bins]
        steps.append((float(q.tau_chunk_s[r]), float(law.full[r]), True))
        rate = float(q.rate[r])
        if arrival_ca2 == 1.0:
            counts = [rate * t for t, _, _ in steps]  # Poisson: λt others in a step of length t
        else:
            counts = window_count_mean(rate, np.array([t for t, _, _ in steps]), arrival_ca2).tolist()
        parts = [(t, w, full, n) for (t, w, full), n in zip(steps, counts, strict=True)]
        rows.append(
            _landing_row(
                fluid.row(r),
                parts,
                s[r],
                p,
                float(fill[r]),
                float(1.0 - q.p_drain[r]),
                float(atom[r]),
                max_cells,
            )
        )
    n = max(c.size for _, c, _ in rows)
    grid = np.stack([np.pad(c, (0, n - c.size), mode="edge") for _, c, _ in rows])
    h = np.array([h for h, _, _ in rows])
    mean = atom * fluid.mean_s + (1.0 - atom) * np.array([m for _, _, m in rows])
    return WaitDistribution(h_s=h, cdf_grid=grid, atom=fluid.atom * atom, mean_s=mean)


LANDING_ROWS = 8
"""Landing parts whose pmfs :func:`_landing_row` transforms in one call, each row alone (the same doubles as one call
per part): numpy's pocketfft plans every call afresh, so a call per part (34 per rate) planned 34 times."""


def _landing_row(
    fluid: WaitDistribution,
    parts: list[tuple[float, float, bool, float]],
    work_s: FloatArray,
    prob: FloatArray,
    fill_s: float,
    p_full: float,
    atom: float,
    max_cells: int,
) -> tuple[float, FloatArray, float]:
    """One rate of :func:`_landing_wait`: lattice step, the cdf on it and the landing part's mean. ``parts``: (landing
    step t, weight, full step?, mean count of the others that ride with the prompt: λt for Poisson arrivals) with
    weights summing to 1."""
    t_max = max(t for t, _, _, _ in parts)
    n_max = max(n for _, _, _, n in parts)
    e1, e2 = float(work_s @ prob), float(work_s**2 @ prob)
    top_o = n_max * e1 + 10.0 * np.sqrt(n_max * e2) + 3.0 * float(work_s.max())
    top = float(fluid.h_s[0]) * (fluid.cdf_grid.shape[1] - 1) + t_max + top_o + fill_s
    n = min(max_cells, int(np.ceil(top / float(fluid.h_s[0]))) + 2)
    h = top / (n - 2)
    edges = np.arange(n) * h
    size = 1 << int(np.ceil(np.log2(2 * n)))
    cells = np.minimum(np.rint(work_s / h).astype(np.intp), size - 1)
    phi = np.fft.rfft(np.bincount(cells, weights=prob, minlength=size))
    cdf_w = fluid.cdf(edges)[0]
    busy = (cdf_w - cdf_w[0]) / max(1.0 - float(cdf_w[0]), 1e-12)  # W_f given W_f > 0
    acc = np.zeros(size // 2 + 1, dtype=np.complex128)
    mean = p_full * fill_s
    phi_less_1 = phi - 1.0
    kept = [part for part in parts if part[1] > 0.0]
    block = np.zeros((min(len(kept), LANDING_ROWS), size))  # each row a part's pmf, zero-padded to the lattice
    for lo in range(0, len(kept), LANDING_ROWS):
        rows = kept[lo : lo + LANDING_ROWS]
        cdf = _landing_cdfs(edges, rows, busy)
        block[: len(rows), 0] = cdf[:, 0] - 0.0  # np.diff(cdf, prepend=0.0) without its concatenation: the same doubles
        np.subtract(cdf[:, 1:], cdf[:, :-1], out=block[: len(rows), 1:n])
        for j, (t, weight, full, others) in enumerate(rows):
            first = h * float(np.sum(1.0 - cdf[j, :-1] / 2.0 - cdf[j, 1:] / 2.0)) if full else t / 2.0  # E[max]
            mean += weight * (first + others * e1)
        for (_, weight, _, others), spectrum in zip(rows, np.fft.rfft(block[: len(rows)], axis=1), strict=True):
            acc += weight * spectrum * np.exp(others * phi_less_1)  # in the parts' order, as one part at a time
    pmf = np.fft.irfft(acc, size)[:n]
    shift = round(fill_s / h)
    pmf = (1.0 - p_full) * pmf + p_full * np.concatenate((np.zeros(shift), pmf))[:n]
    landing = np.clip(np.cumsum(pmf), 0.0, 1.0)
    return h, np.clip(atom * cdf_w + (1.0 - atom) * landing, 0.0, 1.0), mean


def _landing_cdfs(edges: FloatArray, parts: list[tuple[float, float, bool, float]], busy: FloatArray) -> FloatArray:
    """Each landing part's cdf on the lattice ``edges`` (one row a part, :func:`_landing_row`): ``U·t``'s,
    ``clip(edges/t, 0, 1)``, times W_f's given W_f > 0 (``busy``) for a full step (the max's cdf). The rows in one
    array call (the same elementwise operations on the same doubles as one call per part: 34 a rate, each a clip's
    Python wrappers; docs/accuracy.md §7.22)."""
    t = np.array([part[0] for part in parts])
    cdf = np.clip(edges[None, :] / t[:, None], 0.0, 1.0)
    full = np.array([part[2] for part in parts])
    if full.any():
        cdf[full] = busy * cdf[full]
    return np.asarray(cdf, dtype=np.float64)


def _last_chunk_tokens(q: ChunkQueue, workload: DecodeWorkload) -> FloatArray:
    """``m = L − c(⌈L/c⌉ − 1)`` per rate and cell: a prompt's last chunk at the chunk c (not the budget C: a prompt of
    exactly kC tokens ends in a small chunk of its own once decodes take part of the budget)."""
    lin, c = workload.computed_tokens[None, :], q.chunk_tokens[:, None]
    return np.asarray(lin - c * (np.ceil(lin / c) - 1.0), dtype=np.float64)


def _behind_s(q: ChunkQueue, workload: DecodeWorkload) -> FloatArray:
    """Per rate and cell, the others' work behind a prompt in its last step when that is a drain step (share P_d).

    A prompt of ``k = ⌈L/c⌉`` chunks of c tokens spends k − 1 full steps (τ_c each) before its last chunk of ``m =
    L − c(k − 1)``; the tokens that arrived meanwhile, ``λ(k − 1)τ_c E[L]`` on average and at most the room ``c − m``
    left beside its last chunk, ride in that step and delay its end by e/c each (prefill and attention per token of a
    full chunk); m at the chunk c (:func:`_last_chunk_tokens`). With the other 1 − P_d the last step is full
    (:func:`_landing_wait`'s fill). Zero for single-chunk prompts.
    """
    lin, c = workload.computed_tokens[None, :], q.chunk_tokens[:, None]
    earlier = np.ceil(lin / c) - 1.0
    room = c - _last_chunk_tokens(q, workload)
    arrived = (q.rate * q.tau_chunk_s)[:, None] * earlier * float(workload.prob @ workload.computed_tokens)
    per_token = (q.extra_s / q.chunk_tokens)[:, None]
    return np.asarray(q.p_drain[:, None] * per_token * np.minimum(room, arrived), dtype=np.float64)


def _with_gated_step(
    wait: WaitDistribution, atom: FloatArray, mean_s: FloatArray, var_s2: FloatArray, max_cells: int
) -> WaitDistribution:
    """``W + G`` per rate on a lattice: G = 0 with probability ``atom`` (no decode runs: an idle instance starts a
    prompt at once, P = e^{−N}), else a gamma of the given mean and variance, independent of W (the prefill-wait
    estimate of benchmarks/chunk_queue_vs_sim.py; the chunked TTFT's wait is :func:`_landing_wait`). The lattice spans
    W's grid plus ``θ(k + 10√k + 20)`` of G (shape k, scale θ: tail mass below 1e-7) in at most ``max_cells``
    cells; G's masses at the cell midpoints, the sum by FFT convolution."""
    shape, scale = mean_s**2 / var_s2, var_s2 / mean_s
    rows = []
    for r in range(wait.h_s.size):
        top_w = wait.h_s[r] * (wait.cdf_grid.shape[1] - 1)
        top_g = float(scale[r] * (shape[r] + 10.0 * np.sqrt(shape[r]) + 20.0))  # tail mass < 1e-7
        n = min(max_cells, int(np.ceil((top_w + top_g) / wait.h_s[r])) + 2)
        h = (top_w + top_g) / (n - 2)
        edges = np.arange(n) * h
        cdf_w = wait.row(r).cdf(edges)[0]
        pmf_w = np.diff(np.concatenate(([0.0], cdf_w)))
        cdf_g = gamma_cdf(np.concatenate(([0.0], (np.arange(n) + 0.5) * h)), shape[r], scale[r])
        pmf_g = (1.0 - atom[r]) * np.diff(cdf_g)
        pmf_g[0] += atom[r]
        size = 1 << int(np.ceil(np.log2(2 * n)))
        conv = np.fft.irfft(np.fft.rfft(pmf_w, size) * np.fft.rfft(pmf_g, size), size)[:n]
        rows.append((h, np.clip(np.cumsum(conv), 0.0, 1.0)))
    n = max(c.size for _, c in rows)
    grid = np.stack([np.pad(c, (0, n - c.size), mode="edge") for _, c in rows])
    return WaitDistribution(
        h_s=np.array([h for h, _ in rows]),
        cdf_grid=grid,
        atom=wait.atom * atom,
        mean_s=wait.mean_s + (1.0 - atom) * mean_s,
    )


def _chunk_cost_var(workload: DecodeWorkload, chunk: FloatArray, t_a: float) -> FloatArray:
    """Variance of a full chunk step's cost over chunks, ``(t_a c)²·Var(mid)`` per rate.

    A chunk of c tokens starting at position s costs ``t_p c + t_a c(s + c/2)``: t_a c times its
    midpoint. Token positions x are uniform within a prompt, so over tokens ``E[x] = E[L²]/(2E[L])``,
    ``E[x²] = E[L³]/(3E[L])``; a chunk's midpoint averages c consecutive positions (−c²/12). A
    request's chunk steps in one window mostly come from the same prompt, so this variance is not
    divided by their number (an upper bound on that side).
    """
    lin, p = workload.computed_tokens, workload.prob
    el = float(p @ lin)
    var_x = float(p @ lin**3) / (3.0 * el) - (float(p @ lin**2) / (2.0 * el)) ** 2
    return np.asarray((t_a * chunk) ** 2 * np.maximum(var_x - chunk**2 / 12.0, 0.0), np.float64)


def _chunk_wait(
    rate: FloatArray, workload: DecodeWorkload, service_s: FloatArray, max_cells: int, arrival_ca2: float = 1.0
) -> WaitDistribution:
    """M/G/1 wait per rate with service ``service_s[r]`` per cell (one FFT per rate: the service
    differs), on the distinct prompt lengths; G/G-corrected per rate when ``arrival_ca2`` ≠ 1."""
    key = workload.input_tokens if workload.prefill_tokens is None else _pair_key(workload)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    prob = np.bincount(inverse.ravel(), weights=workload.prob)
    rows = [
        _renewal(
            mg1_wait_distribution(rate[r : r + 1], service_s[r, first], prob, max_cells=max_cells),
            arrival_ca2,
            service_s[r, first],
            prob,
        )
        for r in range(rate.size)
    ]
    n = max(d.cdf_grid.shape[1] for d in rows)
    grid = np.stack([np.pad(d.cdf_grid[0], (0, n - d.cdf_grid.shape[1]), mode="edge") for d in rows])
    return WaitDistribution(
        h_s=np.concatenate([d.h_s for d in rows]),
        cdf_grid=grid,
        atom=np.concatenate([d.atom for d in rows]),
        mean_s=np.concatenate([d.mean_s for d in rows]),
    )


def _pair_key(workload: DecodeWorkload) -> FloatArray:
    """One key per distinct (context, computed tokens): with a prefix cache the service depends on both."""
    ctx = workload.input_tokens
    return np.asarray(workload.computed_tokens * (float(ctx.max()) + 1.0) + ctx, dtype=np.float64)


def _renewal(wait: WaitDistribution, ca2: float, service_s: ArrayLike, prob: ArrayLike) -> WaitDistribution:
    """The prompt queue's M/G/1 wait for arrivals with c² ``ca2``: untouched for Poisson (1), else the GI/G/1 law
    with the prompts' service c_s² (:func:`pdplan.queueing.gig1.gig1_wait`)."""
    return wait if ca2 == 1.0 else gig1_wait(wait, ca2, service_scv(service_s, prob))


def colocated_distributions(
    scheduler: str,
    rate_per_s: ArrayLike,
    workload: DecodeWorkload,
    step_time: LinearStepTime,
    *,
    prefill_service_s: ArrayLike | None = None,
    token_budget: float | None = None,
    prefill_s_per_token: float | None = None,
    attention_s_per_token2: float = 0.0,
    attention_s: ArrayLike | None = None,
    drain_s: ArrayLike | None = None,
    max_cells: int = 2**16,
    arrival_ca2: float = 1.0,
    width: GemmWidth | None = None,
) -> ColocatedResult:
    """Dispatch on ``scheduler`` ∈ {"prefill-first", "chunked"}; ValueError on missing inputs. ``arrival_ca2``: the
    c² of one instance's arrival gaps (1: Poisson)."""
    if scheduler == "prefill-first":
        if prefill_service_s is None:
            raise ValueError("prefill-first needs prefill_service_s")
        return colocated_prefill_first(rate_per_s, workload, step_time, prefill_service_s, max_cells, arrival_ca2)
    if scheduler == "chunked":
        if token_budget is None or prefill_s_per_token is None:
            raise ValueError("chunked needs token_budget and prefill_s_per_token")
        return colocated_chunked(
            rate_per_s,
            workload,
            step_time,
            token_budget=token_budget,
            prefill_s_per_token=prefill_s_per_token,
            attention_s_per_token2=attention_s_per_token2,
            attention_s=attention_s,
            drain_s=drain_s,
            max_cells=max_cells,
            arrival_ca2=arrival_ca2,
            width=width,
        )
    raise ValueError(f"unknown scheduler {scheduler!r}; valid: {', '.join(SCHEDULERS)}")
