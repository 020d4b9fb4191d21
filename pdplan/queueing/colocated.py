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
  step runs all B decodes plus ≤ C − B prefill tokens. ``τ̄ = t0/(1 − u_d − u_p)`` with
  ``u_p = λ(t_p E[L] + t_a E[L²]/2)``; chunk size ``c = C − N`` must be > 0; a chunk step costs
  ``extra = c·(t_p + t_a·E[L²]/(2E[L]))`` more than a plain step (token-weighted mean
  prefix, so that ``π·extra = u_p τ̄`` exactly), ``π = λE[L]τ̄/c`` is the fraction of steps carrying
  a chunk.
  TTFT: prefill tokens are served c per chunk step, so an M/G/1 on ``S_c(L) = L·τ_chunk/c`` with
  τ_chunk = plain + extra (its utilisation π·τ_chunk/τ̄ ≥ π is the binding prefill-capacity bound;
  §3's ``λE[L] ≤ (C − N)/τ̄`` is the looser step-count form). TPOT: §2.4 load noise plus the chunk
  steps a request sees: chunk steps come in runs (busy stretches of the chunk queue) and a request's
  decode starts as its own prefill leaves that queue, when it is busy with the time fraction ρ_c > π;
  :func:`_chunk_step_fraction` gives the per-bin mean and variance of the fraction of chunk steps over
  the request's n steps (two-state correlated process started at a departure; chunk steps conserved),
  variances summed, gamma marginal. Measured against ``pdplan simulate`` (docs/accuracy_serving.md).

TTFT and TPOT are returned as independent marginals; their joint attainment as a product is an
approximation here (both live on one instance; QUEUEING.md §5.2 flags it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

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
    tpot: GammaMixture
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
) -> ColocatedResult:
    """Prefill-first colocated instance; ``prefill_service_s[i]`` = S(L_i) for each workload bin."""
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
    wait = mg1_wait_distribution(rate, s, p)
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
) -> ColocatedResult:
    """Sarathi-style chunked prefill, token budget C (t_p s/token, t_a s/token² attention)."""
    rate = as_rates(rate_per_s)
    lin, p = workload.input_tokens, workload.prob
    el, el2 = float(p @ lin), float(p @ lin**2)
    u_d = _decode_util(rate, workload, step_time)
    u_p = rate * (prefill_s_per_token * el + attention_s_per_token2 * el2 / 2.0)
    _check_total(u_d + u_p, "chunked")
    tau = step_time.t0_s / (1.0 - u_d - u_p)
    st = _state(rate, tau, workload, step_time)
    chunk = token_budget - st.mean_seqs
    if np.any(chunk <= 0):
        raise ValueError(
            f"chunked: token budget {token_budget} <= mean decode batch {st.mean_seqs.max():.1f}"
        )
    extra = chunk * (prefill_s_per_token + attention_s_per_token2 * el2 / (2.0 * el))
    tau_chunk = (
        st.t0_s + st.t1_s_per_seq * st.mean_seqs + st.t2_s_per_token * st.mean_context_tokens
    )
    tau_chunk = tau_chunk + extra
    pi = rate * el * tau / chunk
    rho_c = pi * tau_chunk / tau
    if np.any(rho_c >= 1.0):
        raise ValueError(
            f"chunked: prefill capacity exceeded (chunk-step utilisation {rho_c.max():.4f} >= 1)"
        )
    wait = _chunk_wait(rate, lin, p, tau_chunk / chunk)
    offsets = lin[None, :] * (tau_chunk / chunk)[:, None]
    var_load, _ = load_noise(st, workload)
    frac, frac_var = _chunk_step_fraction(rate, workload, pi, rho_c, el / chunk, tau_chunk - extra)
    w = _own_weight(workload, step_time)
    tpot = GammaMixture(
        offset_s=np.broadcast_to(step_time.t0_s + w, var_load.shape).copy(),
        load_mean_s=(u_d * tau)[:, None] + extra[:, None] * frac,
        load_var_s2=var_load + extra[:, None] ** 2 * frac_var,
        prob=p,
    )
    return ColocatedResult(ShiftedMixture(wait, offsets, p), tpot, tau, u_d, u_p)


def _chunk_step_fraction(rate: FloatArray, workload: DecodeWorkload, pi: FloatArray, rho_c: FloatArray,
                         steps_per_prompt: FloatArray, tau_plain: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Mean and variance of the fraction of a request's n decode steps that carry a prefill chunk, per bin [R, M].

    Chunk steps come in runs: the chunk queue alternates busy stretches of R_on = (E[L]/c)/(1 − ρ_c) steps (an M/G/1
    busy period in chunk steps) and idle stretches of R_off = 1/(λ τ_plain) plain steps. As a two-state process its
    correlation time is τ_c = R_on R_off/(R_on + R_off) steps, and the average of the on/off indicator over a window of
    n steps has variance ``p(1 − p)·h(n)``, ``h(n) = (2τ_c/n)(1 − (τ_c/n)(1 − e^{−n/τ_c}))`` (→ 1 for n ≪ τ_c,
    → 2τ_c/n for n ≫ τ_c). A request's decode starts when its own prefill leaves the chunk queue; by the M/G/1
    departure property the queue is then busy with the *time* fraction ρ_c (> the step fraction π, chunk steps being
    longer), relaxing to the stationary level over τ_c: mean ``p + (ρ_c − p)·g(n)``, ``g(n) = (τ_c/n)(1 − e^{−n/τ_c})``.
    The stationary level p is set so that the token-weighted mean is π (chunk steps are conserved). This replaces the
    earlier binomial-with-dispersion term, which treated steps as nearly independent and missed the start effect.
    """
    n = workload.decode_steps[None, :]
    r_on = (steps_per_prompt / (1.0 - rho_c))[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        r_off = (1.0 / (rate * tau_plain))[:, None]  # inf at zero load: never busy, τ_c = R_on
        tc = np.where(np.isfinite(r_off), r_on * r_off / (r_on + r_off), r_on)
    decay = 1.0 - np.exp(-n / tc)
    g = tc / n * decay
    h = 2.0 * tc / n * (1.0 - tc / n * decay)
    weight = workload.prob[None, :] * n
    mean_g = (weight * g).sum(axis=1) / weight.sum(axis=1)
    level = np.clip((pi - rho_c * mean_g) / np.maximum(1.0 - mean_g, 1e-12), 0.0, 1.0)[:, None]
    frac = np.clip(level + (rho_c[:, None] - level) * g, 0.0, 1.0)
    return frac, frac * (1.0 - frac) * h


def _chunk_wait(
    rate: FloatArray, lin: FloatArray, p: FloatArray, s_per_token: FloatArray
) -> WaitDistribution:
    """M/G/1 wait per rate with S_c(L) = L·s_per_token[r] (one FFT per rate: scale differs)."""
    rows = [
        mg1_wait_distribution(rate[r : r + 1], lin * s_per_token[r], p) for r in range(rate.size)
    ]
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
) -> ColocatedResult:
    """Dispatch on ``scheduler`` ∈ {"prefill-first", "chunked"}; ValueError on missing inputs."""
    if scheduler == "prefill-first":
        if prefill_service_s is None:
            raise ValueError("prefill-first needs prefill_service_s")
        return colocated_prefill_first(rate_per_s, workload, step_time, prefill_service_s)
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
        )
    raise ValueError(f"unknown scheduler {scheduler!r}; valid: {', '.join(SCHEDULERS)}")
