"""Colocated baseline: prefill and decode share one instance (QUEUEING.md §3).

Per instance, Poisson arrivals at λ_c (= λ/z for z replicas), linear decode step time
``τ = t0 + t1·B + t2·K`` (:class:`~pdplan.queueing.decode.LinearStepTime`), workload bins
``(L_i, n_i, p_i)``. Two schedulers:

``"prefill-first"`` (vanilla vLLM, no chunking): every prefill of S(L) seconds stalls all decodes.
  The GPU spends a fraction ρ_p = λE[S] on prefill, so a decode token interval is the step time
  stretched by 1/(1 − ρ_p): ``TPOT̄ = τ_step/(1 − ρ_p)`` with ``τ_step = t0 + t1 N + t2 K̄`` and
  Little's law at TPOT̄ ⇒ ``TPOT̄ = t0/(1 − ρ_p − u_d)`` (§3 "mean TPOT ≈ τ_d/(1−ρ_p)", closed at the
  mean-field point). Stall per token of a request with n steps: total prefill work arriving during
  its life n·TPOT̄ is compound Poisson, variance ``λ n TPOT̄ E[S²]``, i.e. ``λ TPOT̄ E[S²]/n`` per
  token. TTFT: M/G/1 (FFT) on S plus S(L) plus the mean residual of a decode step in progress,
  ``(1 − ρ_p)·τ_step/2`` (our addition; decode steps are not preempted).

``"chunked"`` (Sarathi-Serve stall-free batching, Agrawal et al. OSDI'24, arXiv 2403.02310): every
  step runs all B decodes plus ≤ C − B prefill tokens. Mean field, the plain step τ_p, the full
  chunk step τ_c = τ_p + e and the chunk queue (an M/G/1 in time with per-prompt service S_L plus
  the drain waste of partly filled last chunks) are derived in :mod:`pdplan.queueing.chunk_window`.
  TTFT: wait of that M/G/1 (FFT) + S_L + δ_L + the residual of the plain step in progress when the
  chunk queue is empty (M/G/1 with multiple vacations, Fuhrmann–Cooper decomposition: the vacation
  is one plain step τ_p, residual τ_p/2, taken while decodes run, P(B > 0) = 1 − e^{−N}).
  TPOT per cell: ``t0 + w_i + X`` with the others' decode load (mean u_d τ̄, §2.4 load-noise
  variance) plus e times the fraction of chunk steps among its n steps, whose four-part law (none,
  idle start, busy start, all) comes from the departure-started window of
  :func:`~pdplan.queueing.chunk_window.window_components`; the parts are gammas on the load
  (:class:`~pdplan.queueing.components.ComponentMixture`), the two spread ones cut at f = 1, plus
  the variance of a chunk's attention cost (:func:`_chunk_cost_var`). Measured against ``pdplan
  simulate`` (docs/accuracy_serving.md).

TTFT and TPOT are returned as independent marginals; their joint attainment as a product is an
approximation here (both live on one instance; QUEUEING.md §5.2 flags it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pdplan.queueing.chunk_window import chunk_queue, window_components
from pdplan.queueing.components import ComponentMixture
from pdplan.queueing.decode import DecodeFixedPoint, DecodeWorkload, LinearStepTime, load_noise
from pdplan.queueing.distributions import (
    FloatArray,
    GammaMixture,
    ShiftedMixture,
    WaitDistribution,
    as_rates,
)
from pdplan.queueing.mg1 import mg1_wait_distribution

SCHEDULERS: tuple[str, ...] = ("prefill-first", "chunked")


@dataclass(frozen=True, slots=True)
class ColocatedResult:
    """TTFT and TPOT distributions per rate, with the mean-field state (arrays ``[R]``)."""

    ttft: ShiftedMixture
    tpot: GammaMixture  # a ComponentMixture for the chunked scheduler
    tpot_mean_s: FloatArray
    decode_utilisation: FloatArray
    prefill_utilisation: FloatArray


def _decode_util(rate: FloatArray, wl: DecodeWorkload, st: LinearStepTime) -> FloatArray:
    return np.asarray(
        rate * (st.t1_s_per_seq * wl.mean_steps + st.t2_s_per_token * wl.mean_work), np.float64
    )


def _state(
    rate: FloatArray, tau: FloatArray, wl: DecodeWorkload, st: LinearStepTime
) -> DecodeFixedPoint:
    """A decode fixed-point record at a given token interval τ (for the §2.4 load-noise model)."""
    n_seqs, k_tok = rate * wl.mean_steps * tau, rate * wl.mean_work * tau
    t1 = np.full_like(rate, st.t1_s_per_seq)
    t2 = np.full_like(rate, st.t2_s_per_token)
    u = _decode_util(rate, wl, st)
    return DecodeFixedPoint(rate, tau, u, n_seqs, k_tok, tau - t1 * n_seqs - t2 * k_tok, t1, t2)


def _own_weight(wl: DecodeWorkload, st: LinearStepTime) -> FloatArray:
    lin, n = wl.input_tokens, wl.decode_steps
    return np.asarray(st.t1_s_per_seq + st.t2_s_per_token * (lin + (n - 1.0) / 2.0), np.float64)


def _check_total(total: FloatArray, what: str) -> None:
    if np.any(total >= 1.0):
        raise ValueError(
            f"colocated {what}: unstable, prefill + decode utilisation {total.max():.4f} >= 1"
        )


def colocated_prefill_first(
    rate_per_s: ArrayLike,
    workload: DecodeWorkload,
    step_time: LinearStepTime,
    prefill_service_s: ArrayLike,
    max_cells: int = 2**16,
) -> ColocatedResult:
    """Prefill-first colocated instance; ``prefill_service_s[i]`` = S(L_i) for each workload bin
    (``max_cells`` caps the FFT lattice of the wait)."""
    rate = as_rates(rate_per_s)
    s = np.asarray(prefill_service_s, dtype=np.float64).ravel()
    if s.shape != workload.prob.shape or np.any(s <= 0):
        raise ValueError("prefill_service_s must be > 0 and have one entry per workload bin")
    p = workload.prob
    rho_p = rate * float(p @ s)
    u_d = _decode_util(rate, workload, step_time)
    _check_total(rho_p + u_d, "prefill-first")
    tpot_mean = step_time.t0_s / (1.0 - rho_p - u_d)
    tau_step = (1.0 - rho_p) * tpot_mean
    wait = mg1_wait_distribution(rate, s, p, max_cells=max_cells)
    offsets = s[None, :] + ((1.0 - rho_p) * tau_step / 2.0)[:, None]
    var_load, _ = load_noise(_state(rate, tpot_mean, workload, step_time), workload)
    var_stall = (rate * tpot_mean * float(p @ s**2))[:, None] / workload.decode_steps[None, :]
    w = _own_weight(workload, step_time)
    tpot = GammaMixture(
        offset_s=np.broadcast_to(step_time.t0_s + w, var_load.shape).copy(),
        load_mean_s=np.broadcast_to(((u_d + rho_p) * tpot_mean)[:, None], var_load.shape).copy(),
        load_var_s2=var_load + var_stall,
        prob=p,
    )
    return ColocatedResult(ShiftedMixture(wait, offsets, p), tpot, tpot_mean, u_d, rho_p)


def colocated_chunked(
    rate_per_s: ArrayLike,
    workload: DecodeWorkload,
    step_time: LinearStepTime,
    *,
    token_budget: float,
    prefill_s_per_token: float,
    attention_s_per_token2: float,
    max_cells: int = 2**16,
) -> ColocatedResult:
    """Sarathi-style chunked prefill, token budget C (t_p s/token, t_a s/token² attention).

    ``max_cells`` caps the FFT lattice of the chunk-queue wait (:func:`mg1_wait_distribution`).
    """
    rate = as_rates(rate_per_s)
    p = workload.prob
    q = chunk_queue(rate, workload, step_time, token_budget, prefill_s_per_token,
                    attention_s_per_token2)
    if np.any(q.rho >= 1.0):
        raise ValueError(
            f"chunked: prefill capacity exceeded (chunk-step utilisation {q.rho.max():.4f} >= 1)"
        )
    wait = _chunk_wait(rate, workload, q.service_s, max_cells)
    n_seqs = rate * workload.mean_steps * q.tau_mean_s
    residual = q.tau_plain_s / 2.0 * -np.expm1(-n_seqs)  # vacation residual, P(B > 0) = 1 − e^{−N}
    st = _state(rate, q.tau_mean_s, workload, step_time)
    var_load, _ = load_noise(st, workload)
    win = window_components(q, workload)
    e = q.extra_s[None, :, None]
    var_e = _chunk_cost_var(workload, q.chunk_tokens, attention_s_per_token2)[None, :, None]
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
    ttft = ShiftedMixture(wait, q.service_s + residual[:, None], p)
    return ColocatedResult(ttft, tpot, q.tau_mean_s, q.u_decode, q.u_prefill)


def _chunk_cost_var(workload: DecodeWorkload, chunk: FloatArray, t_a: float) -> FloatArray:
    """Variance of a full chunk step's cost over chunks, ``(t_a c)²·Var(mid)`` per rate.

    A chunk of c tokens starting at position s costs ``t_p c + t_a c(s + c/2)``: t_a c times its
    midpoint. Token positions x are uniform within a prompt, so over tokens ``E[x] = E[L²]/(2E[L])``,
    ``E[x²] = E[L³]/(3E[L])``; a chunk's midpoint averages c consecutive positions (−c²/12). A
    request's chunk steps in one window mostly come from the same prompt, so this variance is not
    divided by their number (an upper bound on that side).
    """
    lin, p = workload.input_tokens, workload.prob
    el = float(p @ lin)
    var_x = float(p @ lin**3) / (3.0 * el) - (float(p @ lin**2) / (2.0 * el)) ** 2
    return np.asarray((t_a * chunk) ** 2 * np.maximum(var_x - chunk**2 / 12.0, 0.0), np.float64)


def _chunk_wait(rate: FloatArray, workload: DecodeWorkload, service_s: FloatArray,
                max_cells: int) -> WaitDistribution:
    """M/G/1 wait per rate with service ``service_s[r]`` per cell (one FFT per rate: the service
    differs), on the distinct prompt lengths."""
    _, first, inverse = np.unique(workload.input_tokens, return_index=True, return_inverse=True)
    prob = np.bincount(inverse.ravel(), weights=workload.prob)
    rows = [mg1_wait_distribution(rate[r : r + 1], service_s[r, first], prob, max_cells=max_cells)
            for r in range(rate.size)]
    n = max(d.cdf_grid.shape[1] for d in rows)
    grid = np.stack(
        [np.pad(d.cdf_grid[0], (0, n - d.cdf_grid.shape[1]), mode="edge") for d in rows]
    )
    return WaitDistribution(
        h_s=np.concatenate([d.h_s for d in rows]),
        cdf_grid=grid,
        atom=np.concatenate([d.atom for d in rows]),
        mean_s=np.concatenate([d.mean_s for d in rows]),
    )


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
    max_cells: int = 2**16,
) -> ColocatedResult:
    """Dispatch on ``scheduler`` ∈ {"prefill-first", "chunked"}; ValueError on missing inputs."""
    if scheduler == "prefill-first":
        if prefill_service_s is None:
            raise ValueError("prefill-first needs prefill_service_s")
        return colocated_prefill_first(rate_per_s, workload, step_time, prefill_service_s,
                                       max_cells)
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
            max_cells=max_cells,
        )
    raise ValueError(f"unknown scheduler {scheduler!r}; valid: {', '.join(SCHEDULERS)}")
