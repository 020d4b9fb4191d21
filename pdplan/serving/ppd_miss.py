"""The gaps a prefill-pool turn's cached prompt must survive, conditioned on why the PPD placement left the turns on
the prefill pool (docs/prefix_cache.md §11, *Held histories under cache pressure*; issue #24 item 6).

Under PPD a Turn 2+ runs on decode when its decode rank still holds the session's history and the policy places it
there; it comes to the prefill pool when its history is gone (its think time outlasted the decode rank's
characteristic time T_D, or its rank is another one) or when the policy leaves it there. The same think times are the
gaps the prefill cache's copy of the session's last prefill-pool prompt must survive: a prefill-pool turn's gaps are
the long ones, the decode turns' between the short ones. :mod:`pdplan.serving.ppd_hits` took them unconditioned
(``c_m = P(m·d + Z_1 + … + Z_m < T_P)``), which gave the turns that missed on decode a prefill hit 5–23 % of the
time where the simulator has 0–2 %.

**Derivation.** Let Z_j be the think time before turn j (j ≥ 2), independent with law F, and τ = T_D − d_D the
longest think time after which the decode rank still holds the history (d_D the decode side's turn duration, 0:
the history is touched as the turn ends; :func:`pdplan.serving.ppd.held_probability`), p = F(τ). Turn j runs on
decode (D_j) when it lands on its rank (probability q_D: 1 session-affine, else 1/domains), Z_j < τ and the policy
places it (π_j, on its append alone): P(D_j) = q_D·p·π_j = s_j. Else it runs on the prefill pool (P_j) and leaves its
prompt on turn k's prefill cache with probability q (:mod:`pdplan.serving.ppd_hits`). The events of different turns
are independent (each reads its own think time, routing and append), so for turn k on the prefill pool whose last
turn to leave a prompt on its cache is k − m (probability a_{k,m}, unchanged), the gaps Z_{k−m+1}, …, Z_k are
independent given those events, each a mixture of the law below τ, ``L⁻ = (Z | Z < τ)``, and above it, ``L⁺ = τ +
R``, ``R = (Z − τ | Z > τ)``, with the share above

    α_k^P = (1 − p) / ((1 − p) + p·(1 − q_D·π_k))                   (turn k: on the prefill pool),
    α_j^E = (1 − p)·(1 − q) / (1 − q·(1 − s_j))                     (turn j between: on decode, or another cache),

(the numerators the mass above τ of each event, the denominators the events' probabilities; turn j's below τ is
q_D·π_j + (1 − q)·(1 − q_D·π_j) of p). The sum depends only on how many gaps lie above τ, A, a Poisson-binomial
count of those shares, so

    c_{k,m} = Σ_a P(A = a | k, m) · P(S⁻_{m−a} + R_a < T_P − m·d − a·τ),

S⁻_b a sum of b draws of L⁻, R_a of a draws of R (d the prefill side's turn duration). Session-affine prefill routing
(q = 1) puts every between gap below τ, A ∈ {0, 1}: ``c_m = P(m·d + Z_{k−m+1} + … + Z_k < T_P | Z_{k−m+1}, …,
Z_{k−1} < τ, turn k missed)``. With nothing placed (every s_j = 0) every share is 1 − p and c_{k,m} is the
unconditioned c_m. Exponential think times (mean μ): R is the think time itself (no memory), so for a decode miss
``c_1 = P(d + τ + Z < T_P) = 1 − e^{−(T_P − d − τ)/μ}`` and ``c_2 = 1 − e^{−(T_P − 2d − τ)/μ}·(τ/μ)/(1 − e^{−τ/μ})``
where T_P − 2d ≥ 2τ (E[e^{Z/μ} | Z < τ] = (τ/μ)/(1 − e^{−τ/μ})); every decode miss survives with probability 0
whenever T_P ≤ d + τ (tests/unit/test_ppd_miss.py works them).

**Evaluation.** The laws are put on one grid of G + 1 points over [0, T_P − d] (sums beyond it never survive) by
local moment matching (the mass of each point from the limited expected values E[min(Y, t)] of L⁻ and R, written
from the law's own E[min(Z, t)] and F: ``E[min(L⁻, t)] = (E[min(Z, u)] − u·(1 − p))/p``, u = min(t, τ), and
``E[min(R, t)] = (E[min(Z, τ + t)] − E[min(Z, τ)])/(1 − p)``; Klugman, Panjer & Willmot, *Loss Models*, 4th ed.,
§9.6.5: each law's mean kept), the sums by truncated FFT convolution, each stopped where its mass left on the grid
is below 1e−12; a point's cumulative probability is the masses below it and half its own (the tent around each
point), linear between points; the grid's step puts τ on a point (where L⁻ ends and R starts). For exponential
(and Erlang) think times the grid's error is taken out with the unconditioned sums on the same grid (Z's own
masses): c_{k,m} is the grid's conditioned value times the exact unconditioned c_m
(:func:`pdplan.cache.lru_closed_form.gap_sums`, the Erlang law) over the grid's, clipped to [0, 1] (within 1e−6 of
the closed forms above; a zero stays exactly zero, and the conditioned sums equal to the unconditioned give gap_sums'
c_m).
For lognormal think times gap_sums' sums are Fenton–Wilkinson's lognormal of the same mean and variance, which errs
more than the grid (mean 10 s, σ = 1.2, d = 0.5 s, T_P = 30 s: P(A_4 < T_P) 0.4682 against the grid's 0.4518 and
0.4517 by 2·10⁶ draws): the grid's conditioned value is taken as it is (so a placement near nothing placed gives the
grid's c_m, not Fenton–Wilkinson's). Fixed think times need no conditioning (Z is its mean whatever the event): the
unconditioned c_m; so do p = 0 or 1 (no think time decides the placement).

Limits: the prefill cache's characteristic time T_P keeps the unconditioned gaps' occupancy
(:func:`pdplan.serving.ppd_hits.prefill_characteristic_time_s`: a prompt's hold time E[min(t, A_m)] with the
between gaps unconditioned); a rank's T_D is one number (its free KV at its mean); τ is read at the decode side's
turn duration, the prefill side's d added to every gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdplan.cache.lru_closed_form import SessionRouting, SessionWorkload, ThinkTime, gap_sums, session_cache
from pdplan.types import FloatArray

GRID_POINTS = 1023
"""G: the most intervals of the grid over [0, T_P − d] (G + 1 points: FFTs of 2,048 points; within 1e−6 of the closed
forms of tests/unit/test_ppd_miss.py)."""
NEGLIGIBLE = 1e-12
"""A sum whose mass left on the grid is below this survives with probability 0 (its longer sums too)."""


@dataclass(frozen=True, slots=True)
class DecodeMiss:
    """Why a turn is on the prefill pool (module docstring): the think law, τ = T_D − d_D (``threshold_s``: a think
    time below it finds the history on its decode rank), the decode landing q_D and per turn the policy's share of
    held turns placed, π_j (``chosen``, [N], π_1 unused)."""

    think: ThinkTime
    threshold_s: float
    landing: float
    chosen: FloatArray


def decode_miss(workload: SessionWorkload, free_tokens: float, domains: int, affine: bool, held: FloatArray,
                placed: FloatArray) -> DecodeMiss:  # fmt: skip
    """:class:`DecodeMiss` of the decode side's ``workload`` (:func:`pdplan.serving.ppd.decode_session_workload`)
    on ``domains`` history caches of ``free_tokens`` each, as :func:`pdplan.serving.ppd.held_probability` reads them
    (the same memoised :func:`~pdplan.cache.lru_closed_form.session_cache`): τ = T_D − d_D, π_j = s_j / f_j."""
    routing: SessionRouting = "session-affine" if affine else "random"
    t_d = session_cache(workload, max(free_tokens, 0.0), instances=domains, routing=routing, partial_hits=False)
    f, s = np.asarray(held, dtype=np.float64), np.asarray(placed, dtype=np.float64)
    chosen = np.where(f > 0, s / np.maximum(f, 1e-300), 0.0)
    threshold = t_d.characteristic_time_s - workload.turn_duration_s
    return DecodeMiss(workload.think_time, threshold, 1.0 if affine else 1.0 / domains, np.clip(chosen, 0.0, 1.0))


def _masses(levels: FloatArray, h: float) -> FloatArray:
    """Point masses at 0, h, …, G·h matching each interval's first moment, from E[min(Y, i·h)], i = 0..G + 1:
    ``f_0 = 1 − E[min(Y, h)]/h``, ``f_i = (2E[min(Y, ih)] − E[min(Y, (i − 1)h)] − E[min(Y, (i + 1)h)])/h``."""
    out = np.empty(levels.size - 1)
    out[0] = 1.0 - levels[1] / h
    out[1:] = (2.0 * levels[1:-1] - levels[:-2] - levels[2:]) / h
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


def _laws(miss: DecodeMiss, span_s: float, points: int) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """``(L⁻, R, Z, h)`` on a grid of about ``points`` intervals over [0, ``span_s``], τ on one of its points
    (module docstring; Z the unconditioned think time, the grid's control)."""
    tau, think = miss.threshold_s, miss.think
    h = span_s / points
    if tau < span_s:  # τ on a grid point: L⁻ and R end and start there
        h = tau / max(math.floor(tau / h), 1)  # a step no finer than asked: the FFTs keep their length
        points = math.ceil(span_s / h - 1e-9)
    grid = h * np.arange(points + 2, dtype=np.float64)
    p = think.cdf(tau)
    u = np.minimum(grid, tau)
    whole = think.mean_min_array(grid)
    below = (think.mean_min_array(u) - u * (1.0 - p)) / p
    at_tau = float(think.mean_min_array(np.array([tau]))[0])
    above = (think.mean_min_array(np.asarray(tau + grid, dtype=np.float64)) - at_tau) / (1.0 - p)
    return _masses(below, h), _masses(above, h), _masses(whole, h), h


def _sums(law: FloatArray, depth: int, size: int) -> FloatArray:
    """``[B + 1, G + 1]`` the grid masses of 0, 1, …, B ≤ ``depth`` draws of ``law`` (truncated at the grid's end),
    B the last whose mass left on the grid is not negligible (more draws: 0)."""
    g = law.size
    out = np.zeros((depth + 1, g))
    out[0, 0] = 1.0
    spectrum = np.fft.rfft(law, size)
    for b in range(1, depth + 1):
        out[b] = np.maximum(np.fft.irfft(np.fft.rfft(out[b - 1], size) * spectrum, size)[:g], 0.0)
        if out[b].sum() < NEGLIGIBLE:
            return out[:b]
    return out


def _below(masses: FloatArray, x: FloatArray, h: float) -> FloatArray:
    """P(S < x) of grid masses ``[R, G + 1]`` (one x per row): the masses below x's point and half its own, linear
    between points; 0 at x ≤ 0, the whole mass past the grid."""
    cum = np.cumsum(masses, axis=1) - masses / 2.0
    pos = np.clip(x / h, 0.0, masses.shape[1] - 1.0)
    lo = np.minimum(np.floor(pos).astype(np.intp), masses.shape[1] - 2)
    rows = np.arange(masses.shape[0])
    frac = pos - lo
    out = cum[rows, lo] * (1.0 - frac) + cum[rows, lo + 1] * frac
    out = np.where(x / h >= masses.shape[1] - 1.0, masses.sum(axis=1), out)
    return np.asarray(np.where(x > 0, out, 0.0), dtype=np.float64)


def sum_table(miss: DecodeMiss, t_p_s: float, duration_s: float, depth: int, top: int, points: int = GRID_POINTS
              ) -> tuple[FloatArray, FloatArray]:  # fmt: skip
    """``([depth + 1, top + 1], [depth + 1])``: P(S⁻_{m−a} + R_a < T_P − m·d − a·τ) at [m, a] (0 where a > m or m = 0;
    module docstring), and the grid's unconditioned P(Z_1 + … + Z_m < T_P − m·d) at [m] (the control)."""
    table, control = np.zeros((depth + 1, top + 1)), np.zeros(depth + 1)
    span = t_p_s - duration_s
    if span <= 0:
        return table, control
    below, above, whole, h = _laws(miss, span, points)
    g = below.size
    size = 1 << math.ceil(math.log2(2 * g))
    m = np.arange(depth + 1, dtype=np.float64)
    plain = _sums(whole, depth, size)
    control[: plain.shape[0]] = _below(plain, t_p_s - m[: plain.shape[0]] * duration_s, h)
    lows = _sums(below, depth, size)
    highs = _sums(above, top, size)
    lows_hat = np.fft.rfft(lows, size, axis=1) if highs.shape[0] > 1 else lows
    for a in range(highs.shape[0]):
        b = np.arange(min(lows.shape[0], depth + 1 - a))  # S⁻_b with m = a + b
        mixed = lows[b] if a == 0 else np.fft.irfft(lows_hat[b] * np.fft.rfft(highs[a], size), size, axis=1)[:, :g]
        x = np.asarray(t_p_s - (a + b) * duration_s - a * miss.threshold_s, dtype=np.float64)
        table[a + b, a] = _below(np.maximum(mixed, 0.0), x, h)
    table[0], control[0] = 0.0, 0.0
    return table, control


def _above_counts(first: FloatArray, between: FloatArray, top: int, depth: int) -> FloatArray:
    """``[N, depth, A + 1]`` P(A = a | k, m) at [k, m − 1, a], m ≤ ``depth`` (0-based turn k; counts past A
    dropped): the gap before turn k above τ with probability ``first[k]``, each between turn j's with
    ``between[j]``."""
    n = first.size
    out = np.zeros((n, depth, top + 1))
    state = np.zeros((n, top + 1))
    state[:, 0] = 1.0 - first
    if top >= 1:
        state[:, 1] = first
    k = np.arange(n)
    for m in range(1, depth + 1):
        live = k >= m
        out[live, m - 1] = state[live]
        up = between[np.clip(k - m, 0, n - 1)][:, None]  # the next between turn's gap (0-based k − m)
        nxt = state * (1.0 - up)
        nxt[:, 1:] += state[:, :-1] * up
        state = nxt
    return out


def conditioned_survival(workload: SessionWorkload, t_p_s: float, placed: FloatArray, landing: float,
                         miss: DecodeMiss | None) -> FloatArray:  # fmt: skip
    """``[N, N]`` c[k − 1, m − 1] = c_{k,m}: P(the prompt turn k − m left on turn k's prefill cache survives the m
    gaps to prefill-pool turn k | the placement's events) (module docstring), ``workload`` the prefill side's view,
    ``placed`` s_j, ``landing`` q. ``miss`` None, a fixed law, p ∈ {0, 1}, nothing placed or T_P unbounded: the
    unconditioned c_m in every row."""
    s = np.array(placed, dtype=np.float64)
    n = s.size
    s[0] = 0.0
    plain, _ = gap_sums(workload, t_p_s, n)
    rows = np.array(np.broadcast_to(np.asarray(plain, dtype=np.float64), (n, n)))
    if miss is None or miss.think.kind == "fixed" or math.isinf(t_p_s) or not np.any(s > 0):
        return rows
    p = miss.think.cdf(miss.threshold_s)
    if not 0.0 < p < 1.0:
        return rows
    pi = np.asarray(miss.chosen, dtype=np.float64)[:n]
    first = (1.0 - p) / ((1.0 - p) + p * (1.0 - miss.landing * pi))
    events = 1.0 - landing * (1.0 - s)  # P(E_j); 0 only for turn 1 under q = 1, which is never between
    between = np.where(events > 0, (1.0 - p) * (1.0 - landing) / np.maximum(events, 1e-300), 0.0)
    span, tau = t_p_s - workload.turn_duration_s, miss.threshold_s
    fit = max(math.ceil(span / tau) - 1, 0)  # a gaps above τ leave T_P − m·d − a·τ > 0 only for a ≤ fit
    top = min(fit, n, 1 if not np.any(between[1:] > 0) else n)
    table, control = sum_table(miss, t_p_s, workload.turn_duration_s, n, top)
    live = np.flatnonzero(table[1:].any(axis=1) | (control[1:] > 0))
    depth = int(live[-1]) + 1 if live.size else 0
    if depth == 0:
        return rows  # T_P ≤ d: nothing survives a gap (gap_sums' c_m are 0)
    cond = np.einsum("kma,ma->km", _above_counts(first, between, top, depth), table[1 : depth + 1])
    if miss.think.kind == "lognormal":  # the rows' sums are Fenton–Wilkinson's approximation: the grid's own
        rows[:, :depth] = cond  # (module docstring, Evaluation)
    else:
        grid = control[None, 1 : depth + 1]
        exact = rows[:, :depth]
        rows[:, :depth] = np.where(grid > NEGLIGIBLE, cond * exact / np.maximum(grid, NEGLIGIBLE), cond)
    return np.asarray(np.clip(rows, 0.0, 1.0), dtype=np.float64)


def miss_of(res: Any, rate_rps: float, free_tokens: float, domains: int, held: FloatArray, placed: FloatArray
            ) -> DecodeMiss:  # fmt: skip
    """:func:`decode_miss` of a resolved PPD scenario at the hit rates' rate: its sessions' decode view on
    ``domains`` history caches (instances × DP ranks), as :func:`pdplan.serving.ppd_model` reads P(held)."""
    from pdplan.serving.ppd import decode_session_workload, turns_pmf  # lazy: start-up (issue #27)

    sessions = res.cache.reuse.sessions
    workload = decode_session_workload(sessions, rate_rps, turns_pmf(sessions))
    return decode_miss(workload, free_tokens, domains, res.cache.spec.routing == "affinity", held, placed)
