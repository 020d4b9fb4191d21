"""Chunked-prefill colocated instance: the prefill chunk queue and the decode window it overlaps.

Model (docs/queueing.md §3, Sarathi-Serve stall-free batching). One instance, Poisson arrivals at λ,
workload cells ``(L_i, n_i, p_i)``, linear decode step ``τ = t0 + t1·B + t2·K``, token budget C,
prefill cost ``t_p`` per token plus the causal attention of the prompt's chunks over the context
already prefilled, ``A_i`` in all for a prompt of L_i tokens (:func:`pdplan.serving.roles.chunk_price`
prices both from the roofline at the scheduler's chunk sizes). Without per-cell ``A_i`` the attention
is ``t_a·x`` for the token at position x, ``A_i = t_a L_i²/2``.

Mean field (§3): ``u_d = λ(t1 E[n] + t2 E[nL + n(n−1)/2])``, ``u_p = λ(t_p E[L] + E[A])`` (with a
:class:`~pdplan.queueing.chunk_width.GemmWidth`, t_p per rate at the step's width and τ̄ below the fixed point of
:func:`~pdplan.queueing.chunk_width.riding_mean_field`; the drain step's own work ``d = G(N + m) − G(N)``),
``τ̄ = t0/(1 − u_d − u_p)``, N = λE[n]τ̄, K̄ = λE[work]τ̄, chunk ``c = C − N``. A *plain* step (no
prefill) lasts ``τ_p = t0 + t1 N + t2 K̄ = t0 + u_d τ̄``; a full chunk step adds
``e = c(t_p + E[A]/E[L])`` (the attention work per prefilled token, token-weighted; with
``A = t_a L²/2`` that is t_a times the mean position E[x] = E[L²]/(2E[L])), so
``τ_c = τ_p + e`` and ``π·e = u_p τ̄`` with ``π = λE[L]τ̄/c``. (Until this module the chunk step was
taken as ``τ̄ + e``, which counts the prefill share ``u_p τ̄`` of τ̄ twice.)

Chunk queue: prompts queue FCFS for tokens; while it holds work every step is a chunk step. As an
M/G/1 in time (the *fluid* queue) a prompt of L tokens occupies L/c steps, each with the plain part
τ_p, plus its own prefill work: ``S_L = L·τ_p/c + t_p L + A_L`` (E[S] = E[L]τ_c/c, so
``ρ_f = λE[L]τ_c/c``; using the prompt's own attention cost rather than the mean per token keeps the
variance of S that drives the wait). On top comes the *drain* waste δ_L = P_d w_L (below): the step that empties
the queue carries m < c tokens but still costs τ_p plus its own prefill work d(m), where the fluid
queue charged ``m·τ_p/c + t_p m``, wasting ``w_L = τ_p(1 − m/c) + d(m) − t_p m`` (≥ 0). d is the
caller's: by default ``t_p m`` (w = τ_p(1 − m/c)); from the roofline, ``g(m) = G(m) − G(1)`` (a
partial chunk below the GEMM ridge rides on the weight read; :func:`pdplan.serving.roles.
chunk_price`). For a lone prompt m is its remainder ``m_L = L − C(⌈L/C⌉ − 1)`` capped at c, d
scaled by that cap (taken at the budget C rather than c, which keeps δ continuous in the rate and
is exact at λ → 0, where S_L + δ_L = ⌈L/C⌉t0 + t_p(L − m_L) + d_L + A_L: the prompt's own chunks
at zero load).

Drains (our derivation; docs/accuracy.md §6 measures it). A busy stretch of the queue starts at the step
boundary after an arrival finds it empty: a prompt arriving during a plain step waits for its end, so all the
arrivals of one plain step start one stretch, ``(1 − e^{−λτ_p})/τ_p`` stretches per second of empty queue, i.e.
``(1 − ρ)g`` per prompt, ``g = (1 − e^{−λτ_p})/(λτ_p)`` (→ 1 as λτ_p → 0). A drain step with an arrival during it is
followed by another, so a stretch has ``e^{λτ_d}`` drain steps (geometric, P(no arrival) = e^{−λτ_d}): ``a = g
e^{λτ_d}`` drain steps per prompt and unit of 1 − ρ. The prompts whose last chunk rides in a drain step: the first
of a stretch carries the arrivals of the plain step before it (1/g given at least one), each of the e^{λτ_d} − 1
later ones those of the drain step before it (``λτ_d/(1 − e^{−λτ_d})``), ``λτ_d e^{λτ_d}`` in all, so ``P_d =
min(1, (1 − ρ)b)``, ``b = 1 + gλτ_d e^{λτ_d}``: 1 in the gated regime of short prompts and a large budget, where
every step takes all the prompts that arrived during the step before and empties the queue (an M/G/1 with gated
service and multiple vacations, the class of Takagi, *Queueing Analysis* Vol. 1, 1991), and ``(1 − ρ)e^{λτ_d}`` to
first order at low load. ``τ_d = τ_p + (b/a)E[d(m) + m E[A]/E[L]]``, b/a prompts' own last-chunk work per drain
step (:func:`_drain_counts`). A long prompt arriving during a drain step does not fit in the
next step; its own last chunk is counted as that drain (as before this count: ρ within 0.016 of the simulator for
long prompts). Each drain step wastes its plain part on the tokens it lacks, and each prompt in it costs its own
d(m) where the fluid queue charged ``m(τ_p/c + t_p)``: ``ρ = ρ_f + λ[(1 − ρ)aτ_p − P_d E[σ_L]]``, ``σ_L = m τ_p/c
+ t_p m − d(m)``, linear in 1 − ρ below the cap, ``ρ = (ρ_f + κ)/(1 + κ)``, ``κ = λ(aτ_p − bE[σ])``; at P_d = 1,
``ρ = (ρ_f − λE[σ] + λaτ_p)/(1 + λaτ_p)`` (:func:`_drain_rho`). A prompt's TTFT offset is ``S_L + P_d w_L``: its
fluid service plus, when its last chunk rides in a drain step, that step's waste (``S_L + w_L`` = the plain parts
of its steps, the drain step's whole, plus its own work; the landing-step wait and the others' tokens in its steps
are :mod:`pdplan.queueing.colocated_queue`'s). The time in drain steps is ``f_d = min(λ(1 − ρ)aτ_d, ρ)`` (a per
prompt and unit 1 − ρ, each τ_d long), the rest of ρ in full steps. (Against ``pdplan simulate`` at steady state,
benchmarks/chunk_queue_vs_sim.py with 40,000 requests, from half the stable limit to 0.95 of it: ρ within 0.008 of
the simulated chunk-busy fraction, for MLPerf's 222-token prompts at a 4,096-token budget, up to 1.8 prompts a
step, and the long-prompt cases alike; the previous count, a stretch per arrival finding the queue empty and one
prompt per drain step, was +0.050 at 0.95 on MLPerf. Since both price the prompt tokens at the step's width, issue
#23, the long-prompt cases stay within 0.011 and MLPerf's is -0.037 / -0.068 / +0.023 / +0.006 at 0.5 / 0.7 / 0.85 /
0.95 of the limit: the simulator's drain steps of ~76 decodes and a 222-token prompt sit just past a tile wave of the
kernel table, which it pays at their exact width and this module at the envelope's mean slope,
:mod:`pdplan.queueing.chunk_width`.)

Decode window of a tagged request (:func:`window_components`): its n decode steps start at its own
departure from the chunk queue. What is left then is the work of the N prompts that arrived during
its sojourn T = W + S_L, N ~ Poisson(λT); the queue stays busy for ``R = Σ_{j≤N} B_j`` (each of them
opens a sub-busy period B), i.e. ``R/τ_c`` chunk steps; afterwards it alternates idle stretches
(``Exp(λ)`` in time, ``a = 1/(λτ_p)`` plain steps on average) and busy periods (``B/τ_c`` steps).
The fraction of chunk steps X/n a request sees is a four-part mixture: none (R = 0 and no arrival
in its n plain steps), idle start (R = 0, some arrival), busy start (0 < R < nτ_c) and all
(R ≥ nτ_c). A request's TPOT is ``τ_p + e·X/n`` plus its own weight and the decode load noise:
short requests are nearly all-or-nothing (a request whose decode lies inside one long busy stretch
sees every step carry a chunk), long ones average towards π.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pdplan.numerics.special import gammainc, gammaln
from pdplan.queueing.chunk_width import GemmWidth, riding_mean_field
from pdplan.queueing.decode import DecodeWorkload, LinearStepTime
from pdplan.types import FloatArray

_DRAIN_ITERATIONS = 30
"""Fixed-point iterations of the drain step's prompt count b/a (:func:`_drain_counts`): on the cases of
benchmarks/chunk_queue_vs_sim.py up to the stable limit it agrees with 100 iterations to rounding by 20."""

_DRAIN_EXPONENT_MAX = 700.0
"""Cap on ``λτ_d`` in :func:`_drain_counts`: ``e^{700}`` ≈ 1e304 is the last power of e well inside float64
(``e^{709.8}`` overflows). λτ_d is the mean number of arrivals during one drain step; past a few units the chunk
queue is already far beyond its stable limit (ρ → 1, every prompt drains), so capping the exponent changes no rate
that can be stable, and keeps ``a``, ``b`` finite where they used to overflow to inf (and then inf − inf = NaN in
:func:`_drain_rho`) at the extreme rates property tests probe."""


@dataclass(frozen=True, slots=True)
class ChunkQueue:
    """Mean-field state and chunk-queue service per rate (``[R]``) and cell (``[R, M]``)."""

    rate: FloatArray
    u_decode: FloatArray
    u_prefill: FloatArray
    tau_mean_s: FloatArray
    tau_plain_s: FloatArray
    tau_chunk_s: FloatArray
    chunk_tokens: FloatArray
    rho: FloatArray
    service_s: FloatArray
    rho_fluid: FloatArray
    fluid_service_s: FloatArray
    p_drain: FloatArray
    """P_d: the share of prompts whose last chunk rides in a drain step (module docstring)."""
    drain_time: FloatArray
    """f_d = min(λ(1 − ρ)aτ_d, ρ): the share of time in drain steps (a per prompt and unit 1 − ρ, τ_d long);
    the rest of the chunk-busy time ρ − f_d is in full steps (c tokens, τ_c)."""
    tau_drain_s: FloatArray
    """τ_d, the mean drain step."""
    attention_s_per_token2: float = 0.0
    """Effective t_a = 2E[A]/E[L²] (exact for ``A = t_a L²/2``): the chunk-cost variance's slope."""

    def fluid(self) -> ChunkQueue:
        """The same queue without the drain waste: service ``L·τ_c/c``, utilisation ρ_f."""
        return replace(self, service_s=self.fluid_service_s, rho=self.rho_fluid)

    @property
    def extra_s(self) -> FloatArray:
        """Extra time of a full chunk step, ``e = τ_c − τ_p``."""
        return np.asarray(self.tau_chunk_s - self.tau_plain_s, dtype=np.float64)


def _cell_costs(
    wl: DecodeWorkload,
    budget: float,
    t_p: float,
    t_a: float,
    attention_s: FloatArray | None,
    drain_s: FloatArray | None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per cell: attention A_i (default ``t_a L²/2``), last-chunk tokens m_L and that chunk's own prefill
    work d_L (default ``t_p m_L``), validated."""
    lin = wl.computed_tokens
    rem = lin - budget * (np.ceil(lin / budget) - 1.0)  # m_L: last chunk, alone
    attn = t_a * lin**2 / 2.0 if attention_s is None else np.asarray(attention_s, dtype=np.float64)
    drain = t_p * rem if drain_s is None else np.asarray(drain_s, dtype=np.float64)
    for name, x in (("attention_s", attn), ("drain_s", drain)):
        if x.shape != lin.shape or np.any(~np.isfinite(x)) or np.any(x < 0):
            raise ValueError(f"{name} must be finite, >= 0 and have one entry per workload cell")
    return attn, rem, drain


def chunk_queue(
    rate: FloatArray,
    wl: DecodeWorkload,
    st: LinearStepTime,
    token_budget: float,
    t_p: float,
    t_a: float,
    attention_s: FloatArray | None = None,
    drain_s: FloatArray | None = None,
    width: GemmWidth | None = None,
) -> ChunkQueue:
    """Mean field, plain/chunk step times and drain-corrected service (module docstring);
    ``attention_s[i]`` = A_i per cell (None: ``t_a L_i²/2``), ``drain_s[i]`` = d_L, the GEMM-side work
    of its last chunk alone (None: ``t_p m_L``). ``width``: the prompt tokens priced at the step's width
    (:mod:`pdplan.queueing.chunk_width`): t_p per rate from :func:`~pdplan.queueing.chunk_width.riding_mean_field`
    (the scalar ``t_p`` is then not used) and a drain step's own work ``E(N, m) = G(N + m) − G(N)``, its last chunk
    beside the N decode tokens (``drain_s`` must then be None).

    ValueError when u_d + u_p ≥ 1 or the mean decode batch fills the token budget.
    """
    lin, p = wl.computed_tokens, wl.prob
    el, el2 = float(p @ lin), float(p @ lin**2)
    if width is not None and drain_s is not None:
        raise ValueError("chunk_queue: with a GemmWidth the drain work is priced at the step's width; drain_s is None")
    attn, rem, drain = _cell_costs(wl, token_budget, t_p, t_a, attention_s, drain_s)
    ea = float(p @ attn)
    u_d = rate * st.per_request_s(wl)
    t_p_r = np.full_like(rate, t_p)
    if width is not None:
        riding = riding_mean_field(rate, wl, st, token_budget, width, attn)
        if not np.all(riding.stable):
            raise ValueError("colocated chunked: no stable mean step before the decode batch fills the token budget")
        t_p_r = riding.s_per_token
    u_p = rate * (t_p_r * el + ea)
    if np.any(u_d + u_p >= 1.0):
        raise ValueError(
            f"colocated chunked: unstable, prefill + decode utilisation {float((u_d + u_p).max()):.4f} >= 1"
        )
    tau = st.t0_s / (1.0 - u_d - u_p)
    chunk = token_budget - rate * wl.mean_steps * tau
    if np.any(chunk <= 0):
        raise ValueError(
            f"chunked: token budget {token_budget} <= mean decode batch {float((token_budget - chunk).max()):.1f}"
        )
    tau_p = st.t0_s + u_d * tau
    extra = chunk * (t_p_r + ea / el)
    m = np.minimum(rem[None, :], chunk[:, None])
    # the drain step's own GEMM work: d_L at m = m_L, or with a width its last chunk beside the N = C − c decodes
    decodes = (token_budget - chunk)[:, None]  # N; a step of N + m tokens, N counted as at least one, fits C
    fit = np.minimum(m, token_budget - np.maximum(decodes, 1.0))
    own = drain[None, :] * m / rem[None, :] if width is None else width.extra_s(decodes, fit)
    tp2 = t_p_r[:, None]
    waste = np.maximum(tau_p[:, None] * (1.0 - m / chunk[:, None]) + own - tp2 * m, 0.0)
    rho_f = rate * el * (tau_p + extra) / chunk
    per_step, per_prompt, tau_d = _drain_counts(rate, tau_p, (own + m * ea / el) @ p)
    saving = (tp2 * m + m * (tau_p / chunk)[:, None] - own) @ p  # per prompt in a drain step, vs the fluid charge
    rho, p_drain = _drain_rho(rate, rho_f, tau_p, per_step, per_prompt, saving)
    fluid = lin[None, :] * (tau_p / chunk)[:, None] + tp2 * lin[None, :] + attn[None, :]
    service = fluid + p_drain[:, None] * waste
    drain_time = np.minimum(rate * (1.0 - rho) * per_step * tau_d, rho)
    return ChunkQueue(
        rate,
        u_d,
        u_p,
        tau,
        tau_p,
        tau_p + extra,
        chunk,
        rho,
        service,
        rho_f,
        fluid,
        p_drain,
        drain_time,
        tau_d,
        2.0 * ea / el2,
    )


def _drain_counts(rate: FloatArray, tau_p: FloatArray, work_s: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per prompt and per unit (1 − ρ): drain steps ``a = g·e^{λτ_d}`` and prompts finishing in one
    ``b = 1 + g·λτ_d·e^{λτ_d}`` (module docstring), with ``g = (1 − e^{−λτ_p})/(λτ_p)``, and the drain step
    ``τ_d = τ_p + (b/a)·work_s`` (work_s: one prompt's own work in it), solved by fixed-point iteration."""
    x = rate * tau_p
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(x > 1e-9, -np.expm1(-x) / np.where(x > 1e-9, x, 1.0), 1.0)
    share = np.ones_like(rate)  # prompts per drain step, b/a
    for _ in range(_DRAIN_ITERATIONS):
        y = np.minimum(rate * (tau_p + share * work_s), _DRAIN_EXPONENT_MAX)
        a, b = g * np.exp(y), 1.0 + g * y * np.exp(y)
        share = b / a
    return a, b, tau_p + share * work_s


def _drain_rho(
    rate: FloatArray, rho_f: FloatArray, tau_p: FloatArray, a: FloatArray, b: FloatArray, saving: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """ρ and P(drain) from ``ρ = ρ_f + λ[(1 − ρ)a·τ_p − P_d·saving]``, ``P_d = min(1, (1 − ρ)b)`` (module docstring):
    linear in 1 − ρ below the cap; at the cap P_d = 1."""
    k_free = rate * (a * tau_p - b * saving)
    rho = (rho_f + k_free) / (1.0 + k_free)
    capped = (1.0 - rho) * b > 1.0
    k_cap = rate * a * tau_p
    rho_cap = (rho_f - rate * saving + k_cap) / (1.0 + k_cap)
    rho = np.where(capped, rho_cap, rho)
    return rho, np.minimum(1.0, (1.0 - rho) * b)


def _relax(m: FloatArray, theta: FloatArray) -> FloatArray:
    """``m − θ(1 − e^{−m/θ})``: the integrated relaxation of a process started off (≥ 0)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x = m / theta
        out = np.where(x < 1e-6, m * x / 2.0, m - theta * -np.expm1(-x))
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


def _idle_start_var(m: FloatArray, p: FloatArray, theta: FloatArray) -> FloatArray:
    """``Var Y_m`` of a two-state Markov on/off process started off (time constant θ, p = P(on)).

    ``Cov(I_s, I_t) = p(1 − e^{−s/θ})[(1 − p)e^{−(t−s)/θ} + p e^{−t/θ}]`` for s < t; integrating
    twice over [0, m] with x = m/θ gives ``2θ²p[(1 − p)I₁ + pI₂]``, ``I₁ = x − 2(1 − e^{−x}) + xe^{−x}``,
    ``I₂ = (1 − e^{−x}) − xe^{−x} − (1 − e^{−2x})/2 + e^{−x}(1 − e^{−x})``: → p m³/(3θ) for m ≪ θ
    and → 2p(1 − p)θ·m for m ≫ θ (the renewal CLT rate of :func:`_alternation`).
    """
    x = m / theta
    em = np.exp(-x)
    i1 = np.where(x < 1e-3, x**3 / 6.0, x - 2.0 * (1.0 - em) + x * em)
    i2 = np.where(x < 1e-3, x**3 / 6.0, (1.0 - em) - x * em - (1.0 - em**2) / 2.0 + em * (1.0 - em))
    return np.asarray(np.maximum(2.0 * theta**2 * p * ((1.0 - p) * i1 + p * i2), 0.0), np.float64)


@dataclass(frozen=True, slots=True)
class WindowComponents:
    """Chunk-step fraction f = X/n a request sees, as four parts per rate and cell, each array
    ``[4, R, M]`` in the order none (f = 0), idle start (the queue was empty at its departure, some
    prompt arrived during its window), busy start (it left work behind that ended within its
    window) and all (f = 1): weights, and mean and variance of f within each part."""

    weights: FloatArray
    mean: FloatArray
    var: FloatArray

    partial = np.array([False, True, True, False])[:, None, None]
    """Parts with f spread over [0, 1] (the others are the points f = 0 and f = 1)."""


def _part(weight: FloatArray, s1: FloatArray, s2: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Mean and variance of f = X/n within a part from its weight and raw moments Σ E[X^j; part],
    clipped to [0, 1] and the Bhatia–Davis bound."""
    ok = weight > 1e-12
    w = np.where(ok, weight, 1.0)
    mean = np.clip(np.where(ok, s1 / w, 0.0) / n, 0.0, 1.0)
    var = np.clip(np.where(ok, s2 / w, 0.0) / n**2 - mean**2, 0.0, mean * (1.0 - mean))
    return mean, var


def wait_moments(q: ChunkQueue, prob: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Pollaczek–Khinchine ``E[W]``, ``E[W²]`` of the chunk queue per rate (service ``[R, M]``)."""
    s = q.service_s
    m2, m3 = (s**2) @ prob, (s**3) @ prob
    mean = q.rate * m2 / (2.0 * (1.0 - q.rho))
    return mean, 2.0 * mean**2 + q.rate * m3 / (3.0 * (1.0 - q.rho))


def busy_left(
    rate: FloatArray,
    rho: FloatArray,
    service_s: FloatArray,
    prob: FloatArray,
    window_s: FloatArray,
    w1: FloatArray,
    w2: FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Busy time Z an M/G/1 queue still owes from a tagged departure on, counting the arrivals of a
    window ``W + c_i``: ``P(Z = 0)``, ``E[Z | Z > 0]``, ``Var(Z | Z > 0)`` (seconds), each ``[R, M]``.

    The queue: rate λ, utilisation ρ, service ``service_s`` (``[M]`` or ``[R, M]``) with cell
    probabilities ``prob``, FCFS wait W with moments ``w1 = E[W]``, ``w2 = E[W²]``; ``window_s[r,
    i] = c_i`` is deterministic (the tagged prompt's own service S_i, plus whatever else the
    caller's window holds). ``Z = Σ_{j≤N} B_j``, N ~ Poisson(λ(W + c_i)): each arrival of the window
    opens a sub-busy period B, served before the queue next empties. P-K transform at s = λ:
    ``E[e^{−λW}] = (1 − ρ)/S̃(λ)``, so ``P(N = 0) = (1 − ρ)e^{−λc_i}/S̃(λ)`` (with c_i = S_i its
    p-mean is 1 − ρ, the M/G/1 probability of leaving the queue empty). ``E[N] = λ(E[W] + c)``,
    ``E[N(N−1)] = λ²E[(W + c)²]``; busy period ``E[B] = E[S]/(1 − ρ)``, ``E[B²] = E[S²]/(1 − ρ)³``
    (Kleinrock Vol. 1 §5.8); hence ``E[Z] = E[N]E[B]``, ``E[Z²] = E[N]E[B²] + E[N(N−1)]E[B]²``.
    """
    lam, rho2 = rate[:, None], rho[:, None]
    s = np.broadcast_to(service_s, (rate.size, prob.size))
    eb = (s @ prob)[:, None] / (1.0 - rho2)
    eb2 = ((s**2) @ prob)[:, None] / (1.0 - rho2) ** 3
    s_tilde = np.exp(-lam * s) @ prob
    p0 = np.clip((1.0 - rho2) * np.exp(-lam * window_s) / s_tilde[:, None], 0.0, 1.0)
    en = lam * (w1[:, None] + window_s)
    en2 = lam**2 * (w2[:, None] + 2.0 * w1[:, None] * window_s + window_s**2)
    busy = np.maximum(1.0 - p0, 1e-300)
    m1 = en * eb / busy
    m2 = (en * eb2 + en2 * eb**2) / busy
    return p0, m1, np.maximum(m2 - m1**2, 1e-12 * m1**2)


def _remaining_busy(
    q: ChunkQueue, prob: FloatArray, w1: FloatArray, w2: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Busy time R left behind by a departing prompt of cell i: ``P(R = 0)`` and the gamma shape
    and scale (in chunk steps) of R given R > 0, each ``[R, M]``: :func:`busy_left` with the
    window the prompt's own sojourn T = W + S_i (c_i = S_i), matched by a gamma given R > 0.
    """
    p0, m1, var = busy_left(q.rate, q.rho, q.service_s, prob, q.service_s, w1, w2)
    with np.errstate(divide="ignore", invalid="ignore"):
        shape = np.where(m1 > 0, m1**2 / var, 1.0)
        scale = np.where(m1 > 0, var / m1, 1.0) / q.tau_chunk_s[:, None]
    return p0, shape, scale


def _alternation(q: ChunkQueue, prob: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Chunk-step alternation after the queue first empties, per rate ``[R, 1]``: mean idle run
    ``a = 1/(λτ_p)`` steps, stationary chunk-step fraction ``p = b/(a + b)`` (b = E[B]/τ_c) and the
    time constant θ of the two-state form (below).

    Alternating renewal started at the start of an off (idle) period, off ~ Exp (mean a, E[off²] =
    2a²), on = B/τ_c (mean b, second moment b₂), cycle μ = a + b. Laplace asymptotics of P(on at
    s): ``∫(P(on) − p)ds = −a·b₂/(2μ²)`` and the on-time CLT rate ``(a²Var(on) + b²Var(off))/μ³ =
    a²b₂/μ³``. Both are those of a two-state Markov process started off with ``θ = a·b₂/(2μb)``,
    which we use for all m: ``E[Y_m] = p(m − θ(1 − e^{−m/θ}))``, Var from :func:`_idle_start_var`.
    """
    lam, tau_c, rho = q.rate[:, None], q.tau_chunk_s[:, None], q.rho[:, None]
    b = (q.service_s @ prob)[:, None] / (1.0 - rho) / tau_c
    b2 = ((q.service_s**2) @ prob)[:, None] / (1.0 - rho) ** 3 / tau_c**2
    with np.errstate(divide="ignore"):
        a = np.where(lam > 0, 1.0 / (lam * q.tau_plain_s[:, None]), np.inf)
    finite = np.isfinite(a)
    mu = np.where(finite, a + b, 1.0)
    p = np.where(finite, b / mu, 0.0)
    theta = np.where(finite, np.where(finite, a, 1.0) * b2 / (2.0 * mu * b), 1.0)
    return a, p, theta


def gamma_cdf(x_s: FloatArray, shape: float, scale_s: float) -> FloatArray:
    """Gamma cdf ``P(k, x/θ)`` (the regularised lower incomplete gamma) at ``x_s``, shape k, scale θ."""
    return np.asarray(gammainc(shape, np.maximum(x_s, 0.0) / scale_s), dtype=np.float64)


def _gamma_p012(a: FloatArray, x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Regularised ``P(a, x)``, ``P(a + 1, x)``, ``P(a + 2, x)`` from one incomplete-gamma call by
    ``P(a + 1, x) = P(a, x) − x^a e^{−x}/Γ(a + 1)`` (Abramowitz & Stegun 6.5.21)."""
    p0 = gammainc(a, x)
    with np.errstate(divide="ignore"):
        d = np.exp(a * np.log(x) - x - gammaln(a + 1.0))
    p1 = np.clip(p0 - d, 0.0, p0)
    return p0, p1, np.clip(p1 - d * x / (a + 1.0), 0.0, p1)


def window_components(q: ChunkQueue, wl: DecodeWorkload) -> WindowComponents:
    """Chunk steps X among a request's n decode steps, started at its prefill departure.

    ``X = min(K, n) + Y_{(n−K)⁺}``, K = R/τ_c the steps of the busy stretch it starts in
    (:func:`_remaining_busy`), Y the alternation afterwards (:func:`_alternation`); both in the
    fluid queue (service L·τ_c/c): the drain waste lengthens busy time but adds no prefill work, and
    TPOT·n = n·τ_p + (prefill work done in the window) is what the window has to get right. Parts:
    *none* ``P₀e^{−n/a}`` (no arrival during n plain steps); *idle start* ``P₀(1 − e^{−n/a})`` with
    ``E[X^j] = E[Y_n^j]/(1 − e^{−n/a})``; *all* ``(1 − P₀)P(K ≥ n)``; *busy start*
    ``P_m = (1 − P₀)P(K < n)`` with X = K + Y_{n−K} taken at the conditional mean k̄ of the truncated
    gamma, ``Var ≈ Var(K|·)(1 − y'(n − k̄))² + Var Y_{n−k̄}`` (y' = p(1 − e^{−m/θ}): each step K
    holds displaces a step of Y). Truncated gamma: ``E[K^j; K < n] = θ^j Γ(α + j)/Γ(α)·P(α + j, n/θ)``.
    """
    q = q.fluid()
    p0, shape, scale = _remaining_busy(q, wl.prob, *wait_moments(q, wl.prob))
    a, p, theta = _alternation(q, wl.prob)
    n = wl.decode_steps[None, :]
    x = n / scale
    k_lt, p1, p2 = _gamma_p012(shape, x)
    safe = np.maximum(k_lt, 1e-300)
    k1 = np.clip(shape * scale * p1 / safe, 0.0, n)
    var_k = np.clip(shape * (shape + 1.0) * scale**2 * p2 / safe - k1**2, 0.0, None)
    rest = n - k1
    y_n, y_r = p * _relax(n, theta), p * _relax(rest, theta)
    v_n, v_r = _idle_start_var(n, p, theta), _idle_start_var(rest, p, theta)
    slope = p * -np.expm1(-rest / theta)
    quiet = np.exp(-n / a)
    w_idle = p0 * (1.0 - quiet)
    w_busy = (1.0 - p0) * k_lt
    idle = _part(w_idle, p0 * y_n, p0 * (v_n + y_n**2), n)
    busy = _part(w_busy, w_busy * (k1 + y_r), w_busy * (var_k * (1.0 - slope) ** 2 + v_r + (k1 + y_r) ** 2), n)
    zero, one = np.zeros_like(k1), np.ones_like(k1)
    weights = np.stack([p0 * quiet, w_idle, w_busy, (1.0 - p0) * (1.0 - k_lt)])
    return WindowComponents(weights, np.stack([zero, idle[0], busy[0], one]), np.stack([zero, idle[1], busy[1], zero]))
