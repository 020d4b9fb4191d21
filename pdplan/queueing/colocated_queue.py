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

  *TTFT.* The prompt queue is an M/G/1 with multiple vacations (the decode steps, Fuhrmann–Cooper):
  TTFT = W (P-K, FFT) + S(L) + the residual ``v = τ_p/2·(1 − e^{−N})`` of a plain step in progress
  (N = λE[n]TPOT̄; an idle instance starts a prompt at once), as for the chunked scheduler.

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
  limit) = ``W_f + G + S_L + P_d w_L``. W_f: the M/G/1 wait (FFT) on the fluid service S_L at ρ_f, the queueing
  when the budget binds (a prompt waits for the chunks of the whole prompts ahead of it). G, the gated step
  (:func:`_gated_step`): a step takes every prompt that arrived during the step before (M/G/1 with gated service
  and multiple vacations, the plain step as the vacation; Takagi, *Queueing Analysis* Vol. 1, 1991), so an
  arrival waits the rest of the step in progress, and its first token comes at the end of the next step, which
  also holds the work of the other prompts that arrived during the step it landed in. ``S_L + P_d w_L``: its own
  plain parts and work, and the drain step's waste when its last chunk rides in one
  (:func:`~pdplan.queueing.chunk_window.chunk_queue`). With short prompts and a large budget (every step
  drains, P_d = 1) the mean is the gated law's ``τ_p + E[s] + E[T*](1/2 + ρ_p)`` plus E[W_f]; as λ → 0, G → the
  residual τ_p/2 of a plain step. (The previous TTFT, the M/G/1 wait on the drain-corrected service at ρ plus
  τ_p/2, made every prompt wait for the drain waste of each prompt ahead of it: P99 3.2x the simulator's at 0.95
  of the limit on MLPerf's 222-token prompts.)
  TPOT per cell: ``t0 + w_i + X`` with the others' decode load (mean u_d τ̄, §2.4 load-noise
  variance) plus e times the fraction of chunk steps among its n steps, whose four-part law (none,
  idle start, busy start, all) comes from the departure-started window of
  :func:`~pdplan.queueing.chunk_window.window_components`; the parts are gammas on the load
  (:class:`~pdplan.queueing.components.ComponentMixture`), the two spread ones cut at f = 1, plus
  the variance of a chunk's attention cost (:func:`_chunk_cost_var`, at the effective slope
  t_a = 2E[A]/E[L²] when the attention is given per prompt). Measured against ``pdplan
  simulate`` (docs/accuracy_serving.md).

*Non-Poisson arrivals* (``arrival_ca2`` = c² of one instance's gaps ≠ 1; :mod:`pdplan.queueing.arrivals`): the
prompt queue's M/G/1 wait (both schedulers) becomes Kingman's G/G/1 law, the lattice stretched by
``(c² + c_s²)/(1 + c_s²)`` with c_s² of the prompts' service (the chunk queue's S_L per rate). The rest stays as
for Poisson arrivals: the step residual (it depends only on whether decodes run), the mean field (rates, not gaps),
and the TPOT side: the group mates, the Poisson count of prompts in a stall window and the load noise. Smoother
arrivals there mean fewer prompts bunched into one window than modelled (TPOT pessimistic), burstier ones more.
Poisson (1) runs exactly the Poisson code.

TTFT and TPOT are returned as independent marginals; their joint attainment as a product is an
approximation here (both live on one instance; docs/queueing.md §5.2 flags it). Under prefill-first
they are positively associated (a long wait W also lengthens the stall window), so the product
understates the joint attainment: on the safe side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pdplan.queueing.arrivals import non_poisson_wait, service_scv
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
from pdplan.queueing.mg1 import mg1_wait_distribution, pk_wait_moments
from pdplan.types import FloatArray

SCHEDULERS: tuple[str, ...] = ("prefill-first", "chunked")


@dataclass(frozen=True, slots=True)
class ColocatedResult:
    """TTFT and TPOT distributions per rate, with the mean-field state (arrays ``[R]``)."""

    ttft: ShiftedMixture
    tpot: GammaMixture  # a ComponentMixture (both schedulers)
    tpot_mean_s: FloatArray
    decode_utilisation: FloatArray
    prefill_utilisation: FloatArray


def _decode_util(rate: FloatArray, wl: DecodeWorkload, st: LinearStepTime) -> FloatArray:
    return np.asarray(rate * (st.t1_s_per_seq * wl.mean_steps + st.t2_s_per_token * wl.mean_work), np.float64)


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


def colocated_prefill_first(
    rate_per_s: ArrayLike,
    workload: DecodeWorkload,
    step_time: LinearStepTime,
    prefill_service_s: ArrayLike,
    max_cells: int = 2**16,
    arrival_ca2: float = 1.0,
) -> ColocatedResult:
    """Prefill-first colocated instance; ``prefill_service_s[i]`` = S(L_i) for each workload bin
    (``max_cells`` caps the FFT lattice of the wait; ``arrival_ca2`` the c² of the instance's arrival gaps, which
    corrects the prompt queue's wait: module docstring). Model in the module docstring."""
    rate = as_rates(rate_per_s)
    s = np.asarray(prefill_service_s, dtype=np.float64).ravel()
    if s.shape != workload.prob.shape or np.any(s <= 0):
        raise ValueError("prefill_service_s must be > 0 and have one entry per workload bin")
    p = workload.prob
    rho_p = rate * float(p @ s)
    u_d = _decode_util(rate, workload, step_time)
    _check_total(rho_p + u_d, "prefill-first")
    tpot_mean = step_time.t0_s / (1.0 - rho_p - u_d)
    tau_plain = (1.0 - rho_p) * tpot_mean
    wait = _renewal(mg1_wait_distribution(rate, s, p, max_cells=max_cells), arrival_ca2, s, p)
    vacation = tau_plain / 2.0 * -np.expm1(-rate * workload.mean_steps * tpot_mean)
    ttft = ShiftedMixture(wait, s[None, :] + vacation[:, None], p)
    tpot = _stall_tpot(rate, workload, step_time, s, tpot_mean, vacation)
    return ColocatedResult(ttft, tpot, tpot_mean, u_d, rho_p)


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
    rate: FloatArray, wl: DecodeWorkload, st: LinearStepTime, s: FloatArray, tpot_mean: FloatArray, vacation: FloatArray
) -> ComponentMixture:
    """TPOT of prefill-first: load (others' plus group mates') and the stall Z/n of the
    departure-started window (module docstring), as the parts none (Z = 0) and stalled (a gamma
    above ``S_min/n``)."""
    p, n = wl.prob, wl.decode_steps[None, :]
    rho_p = rate * float(p @ s)
    var_load, _ = load_noise(_state(rate, tpot_mean, wl, st), wl)
    mates = _group_mates(rate, rho_p, float(p @ s**2))[:, None] * _mate_load(wl, st)[None, :]
    base = (_decode_util(rate, wl, st) * tpot_mean)[:, None] + mates
    own = st.t0_s + _own_weight(wl, st)
    window = s[None, :] + vacation[:, None] + np.maximum(n - 1.0, 0.0) * (own + base)
    p0, z1, z_var = busy_left(rate, rho_p, s, p, window, *pk_wait_moments(rate, s, p))
    floor = float(s[p > 0].min()) / n
    return ComponentMixture.of(
        offset_s=np.broadcast_to(own, var_load.shape).copy(),
        weights=np.stack([p0, 1.0 - p0]),
        mean_s=np.stack([base, base + z1 / n]),
        var_s2=np.stack([var_load, var_load + z_var / n**2]),
        prob=p,
        lo_s=np.stack([np.zeros_like(base), np.broadcast_to(floor, base.shape)]),
        hi_s=np.full((2, *base.shape), np.inf),
    )


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
) -> ColocatedResult:
    """Sarathi-style chunked prefill, token budget C (t_p s/token; attention ``attention_s[i]`` s
    per prompt of cell i, or t_a s/token² as ``t_a L²/2`` when None; ``drain_s[i]`` the GEMM-side
    work of its last chunk alone, or ``t_p m_L`` when None: :func:`~pdplan.queueing.chunk_window.
    chunk_queue`).

    ``max_cells`` caps the FFT lattice of the chunk-queue wait (:func:`mg1_wait_distribution`); ``arrival_ca2``
    corrects it for non-Poisson arrivals (module docstring).
    """
    rate = as_rates(rate_per_s)
    p = workload.prob
    attn = None if attention_s is None else np.asarray(attention_s, dtype=np.float64).ravel()
    drain = None if drain_s is None else np.asarray(drain_s, dtype=np.float64).ravel()
    q = chunk_queue(rate, workload, step_time, token_budget, prefill_s_per_token, attention_s_per_token2, attn, drain)
    if np.any(q.rho >= 1.0):
        raise ValueError(f"chunked: prefill capacity exceeded (chunk-step utilisation {q.rho.max():.4f} >= 1)")
    fluid_wait = _chunk_wait(rate, workload, q.fluid_service_s, max_cells, arrival_ca2)
    n_seqs = rate * workload.mean_steps * q.tau_mean_s
    wait = _with_gated_step(fluid_wait, np.exp(-n_seqs), *_gated_step(q, workload), max_cells)
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
    ttft = ShiftedMixture(wait, q.service_s, p)
    return ColocatedResult(ttft, tpot, q.tau_mean_s, q.u_decode, q.u_prefill)


def _landing_step(q: ChunkQueue, workload: DecodeWorkload) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``E[T*]``, ``E[T*²]`` of the step a Poisson arrival lands in, and ``E[s̃]``, ``E[s̃²]`` of the work one prompt
    puts into one step, per rate (:func:`_gated_step`)."""
    p, lin = workload.prob, workload.computed_tokens
    m = q.tau_mean_s
    own = q.fluid_service_s - lin[None, :] * (q.tau_plain_s / q.chunk_tokens)[:, None]  # t_p L + A_L
    s = np.minimum(own, q.extra_s[:, None])
    es, es2 = s @ p, s**2 @ p
    v = np.maximum(q.rate * m * es2 / (1.0 - q.u_prefill**2), 1e-12 * m**2)
    return (m**2 + v) / m, (m**3 + 3.0 * m * v + 2.0 * v**2 / m) / m, es, es2


def _gated_step(q: ChunkQueue, workload: DecodeWorkload) -> tuple[FloatArray, FloatArray]:
    """Mean and variance of the gated step part G per rate, given decodes run (module docstring).

    A step lasts ``T = τ_p + Σ_{j ∈ G} s̃_j`` over the prompts G that arrived during the step before, ``s̃ =
    min(t_p L + A_L, e)`` the work one prompt puts into one step (at most a full chunk e). Stationarity of the
    compound-Poisson recursion gives ``E[T] = τ̄`` (the mean field's step) and ``Var T = λE[T]E[s̃²] + ρ_p² Var T``,
    i.e. ``Var T = λτ̄E[s̃²]/(1 − ρ_p²)`` (ρ_p = u_p); T is taken gamma for ``E[T³] = m³ + 3mv + 2v²/m``. A Poisson
    arrival lands in the length-biased step T* (``E[T*] = E[T²]/E[T]``, ``E[T*²] = E[T³]/E[T]``), waits its
    residual U·T* (U uniform), then the next step carries the work ``O`` of the others that arrived during T*:
    given T*, Poisson(λT*) of them, ``E[O | T*] = aT*`` with ``a = λE[s̃]`` and ``Var(O | T*) = λT*E[s̃²]``.
    ``G = U·T* + O``: ``E[G] = E[T*](1/2 + a)``, ``E[G²] = E[T*²](1/3 + a + a²) + λE[T*]E[s̃²]``.
    """
    b1, b2, es, es2 = _landing_step(q, workload)
    lam = q.rate
    a = lam * es
    g1 = b1 * (0.5 + a)
    g2 = b2 * (1.0 / 3.0 + a + a**2) + lam * b1 * es2
    return g1, np.maximum(g2 - g1**2, 1e-12 * g1**2)


def _with_gated_step(
    wait: WaitDistribution, atom: FloatArray, mean_s: FloatArray, var_s2: FloatArray, max_cells: int
) -> WaitDistribution:
    """``W + G`` per rate on a lattice: G = 0 with probability ``atom`` (no decode runs: an idle instance starts a
    prompt at once, P = e^{−N}), else a gamma of the given mean and variance, independent of W. The lattice spans
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
    """The prompt queue's M/G/1 wait for arrivals with c² ``ca2``: untouched for Poisson (1), else Kingman-corrected
    with the prompts' service c_s² (:func:`pdplan.queueing.arrivals.non_poisson_wait`)."""
    return wait if ca2 == 1.0 else non_poisson_wait(wait, ca2, service_scv(service_s, prob))


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
        )
    raise ValueError(f"unknown scheduler {scheduler!r}; valid: {', '.join(SCHEDULERS)}")
