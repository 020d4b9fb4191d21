"""The prompt tokens riding in a chunked-prefill step, priced at the step's own width (issue #23).

A chunked step runs its N decode tokens and its c prompt tokens through the same GEMMs, which read the weights once.
With ``G(n)`` the GEMM side of a pass of n tokens (everything but the causal-attention kernels, from the roofline:
per GEMM ``max(FLOPs/compute, weight bytes/HBM bandwidth)``, :func:`pdplan.serving.roles.prefill_split_s`), the step's
GEMM time is ``G(N + c)``; the decode step τ = t0 + t1·B + t2·K already pays ``G(N)``, so the prompt tokens add

    ``E(N, c) = G(N + c) − G(N)``

(:meth:`GemmWidth.extra_s`; N taken at least 1, the decode step's one token of :func:`~pdplan.serving.roles.
chunk_price`). Below the GEMM's compute knee (about 290 tokens for bf16 on an H100: 989 TFLOP/s over 3.35 TB/s, two
FLOPs per two-byte weight and token) G is flat, the prompt tokens ride on the weight read and E ≈ 0; above it E grows
by the compute of each token. The causal attention is per sequence and stays additive (the chunk queue's ``A_L``).
Until this module the closed form charged every prompt token ``t_p = (G(C) − G(1))/(C − 1)``, the secant at a full
budget C, whatever the width of the step it rode in (55 µs a token for Llama-2-70B TP4 on H100: docs/accuracy.md §6,
*Open-loop: vLLM under inference-perf*, where the real steps of 124-365 tokens carry them almost free).

**The step's width** (:func:`riding_mean_field`, our derivation). A step that carries prompt tokens takes those
queued when it starts: in the gated regime (prompts shorter than the room ``C − N``) the prompts that arrived
during the step before, Poisson with mean ``x = λτ̄``; given at least one, ``x/(1 − e^{−x})`` of them (→ 1 as
x → 0), ``E[L]`` tokens each. A step carries at most the room, so

    ``c_s = min(C − N, E[L]·x/(1 − e^{−x}))``,   ``t_p(λ) = E(N, c_s)/c_s``,   ``N = λE[n]τ̄``,

and the mean step ``τ̄ = t0 + u_d τ̄ + λτ̄(t_p(λ)E[L] + E[A])`` (``u_d = λ(t1E[n] + t2E[work])``, the prefill share
``u_p = λ(t_p E[L] + E[A])`` as in :mod:`pdplan.queueing.chunk_window`): a fixed point in τ̄, as N and c_s grow with
τ̄. The right side is increasing in τ̄ (G is non-decreasing, and its secant over [N, N + c_s] grows with both ends
for the convex roofline), so the map has a least fixed point when one exists; it is bracketed between ``τ_lo =
t0/(1 − u_d − λE[A])`` (prompt tokens free) and the τ̄ at which the decode batch fills the budget (``N = C``, where
the chunk queue has no room left) and found by regula falsi (Illinois). No fixed point below that bound: ValueError
(unstable, or the decode batch fills the budget). At λ → 0, ``t_p E[L] = G(1 + L) − G(1)`` for one length L ≤ C,
the lone prompt's batch-1 GEMM side; for long prompts (E[L] ≥ C − N) every prompt-carrying step is a full chunk
and ``t_p = (G(C) − G(N))/(C − N)``, the old secant taken from the decode batch rather than from one token.
Using the mean width rather than the law of the step's tokens under-prices a convex G (Jensen) where the number of
prompts per step scatters; the Poisson conditioning above keeps the main term, the width of a step that carries one.

**Tile waves** (:func:`lower_convex_hull`). The kernel table's G is not the clean ``max(compute, weights)``: its
GEMMs run in waves of tiles, so G climbs in steps (Llama-2-70B at TP1 on H200: 171 µs a token from 512 to 768
tokens, 43 µs from 768 to 1,024). A price at one exact width reads those steps as noise, t_p swinging by 1.6x as τ̄
moves by a few per cent, and the mean field then has several fixed points and jumps between them (MLPerf's
H200 deployment: τ̄ 142 → 198 ms for 1e-5 more load). G is therefore taken as its lower convex envelope on a
dense grid of token counts (:func:`~pdplan.serving.roles.chunk_price`: every token to about 600, then steps under
0.4 %): the roofline's own shape (flat, then the compute rate) through the points where a wave is full, whose slope
over a run of waves is their mean rise per token. Steps of random width meet the waves at random phases, so
E[G(b) − G(a)] is that mean slope times b − a; one exact width would read one wave's edge (Llama-2-70B TP2 on H100:
G(255) = 28.9 ms, G(260) = 41.8 ms: MLPerf's H100 drain step of N = 76 decodes and a 222-token prompt costs 23.2
ms at its exact width, 13.0 ms on the envelope). Every secant of a convex G grows with both ends, so t_p never falls
as the steps widen and the map ``τ̄ ↦ t0 + τ̄(u_d + λE[A] + λE[L]t_p(τ̄))`` is increasing with one stable (least)
fixed point, gone past a fold where the instance is unstable. The envelope meets G at both ends: a full chunk
beside one decode token is priced ``G(C) − G(1)`` as the full-budget secant priced it. A MoE's expert reads, concave
in the tokens that touch them, are spread along it as that secant spread them. The simulator keeps the raw table
(:class:`pdplan.sim.deployment.SimChunkPrice`, an iteration at its own width): the two do not share this choice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.queueing.decode import DecodeWorkload, LinearStepTime
from pdplan.types import FloatArray

_REGULA_FALSI_STEPS = 100
"""Illinois iterations at most (each halves the stale end's weight); converged rows stop moving."""
_REL_TOL = 1e-12
_EDGE_TOKENS = 1e-6
"""How far past the table's last count a step may read (the budget edge N = C of :func:`riding_mean_field` asks for
C plus the 1e-9 tokens of an empty room)."""
_BRACKET_POINTS = 48
"""Geometric grid points from τ_lo to the budget edge on which :func:`riding_mean_field` looks for the gap's first
sign change (about 15 % apart at a 1e3 ratio of the ends; the root is then refined by regula falsi)."""


def lower_convex_hull(tokens: FloatArray, gemm_s: FloatArray) -> FloatArray:
    """The greatest convex function below the points ``(tokens, gemm_s)`` (``tokens`` increasing), at ``tokens``
    (Andrew's monotone chain, lower half; its slopes are the weighted isotonic regression of the slopes ΔG/Δn, Barlow
    et al., *Statistical Inference under Order Restrictions*, 1972). :class:`GemmWidth` prices on it (module
    docstring, *Tile waves*)."""
    x, y = np.asarray(tokens, dtype=np.float64), np.asarray(gemm_s, dtype=np.float64)
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (y[b] - y[a]) * (x[i] - x[a]) >= (y[i] - y[a]) * (x[b] - x[a]):  # b lies on or above the chord a-i
                hull.pop()
            else:
                break
        hull.append(i)
    return np.asarray(np.interp(x, x[hull], y[hull]), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class GemmWidth:
    """``G(n)`` on a grid of token counts (``tokens`` increasing from 1 to at least the budget; ``gemm_s`` seconds),
    read by linear interpolation (module docstring)."""

    tokens: FloatArray
    gemm_s: FloatArray

    def __post_init__(self) -> None:
        t, g = np.asarray(self.tokens), np.asarray(self.gemm_s)
        if t.ndim != 1 or t.shape != g.shape or t.size < 2 or np.any(np.diff(t) <= 0) or t[0] > 1.0:
            raise ValueError("GemmWidth needs increasing token counts from at most 1 and one G(n) per count")
        if np.any(~np.isfinite(g)) or np.any(g < 0):
            raise ValueError("GemmWidth's G(n) must be finite and >= 0")

    def extra_s(self, decode_tokens: FloatArray, prompt_tokens: FloatArray) -> FloatArray:
        """``E(N, c) = G(max(N, 1) + c) − G(max(N, 1))`` (broadcast; ValueError past the table)."""
        n = np.maximum(np.asarray(decode_tokens, dtype=np.float64), 1.0)
        top = n + np.maximum(np.asarray(prompt_tokens, dtype=np.float64), 0.0)
        if np.any(top > self.tokens[-1] + _EDGE_TOKENS):
            raise ValueError(f"GemmWidth: a step of {float(top.max()):.0f} tokens is past the table ({self.top:.0f})")
        out = np.interp(top, self.tokens, self.gemm_s) - np.interp(n, self.tokens, self.gemm_s)
        return np.asarray(np.maximum(out, 0.0), dtype=np.float64)

    @property
    def top(self) -> float:
        """The largest token count tabulated."""
        return float(self.tokens[-1])


@dataclass(frozen=True, slots=True)
class RidingStep:
    """The mean field with the prompt tokens priced at the step's width, per rate (``[R]``)."""

    tau_mean_s: FloatArray
    s_per_token: FloatArray
    """t_p(λ) = E(N, c_s)/c_s."""
    decode_tokens: FloatArray
    """N = λE[n]τ̄."""
    step_prompt_tokens: FloatArray
    """c_s: the prompt tokens of a step that carries any."""
    stable: npt.NDArray[np.bool_]
    """A fixed point exists with room left in the budget (N < C); elsewhere the fields are those at N = C."""


def step_price(
    decode_tokens: FloatArray, arrivals_per_step: FloatArray, mean_prompt_tokens: float, budget: float, width: GemmWidth
) -> tuple[FloatArray, FloatArray]:
    """``(t_p, c_s)``: the price per prompt token at the width of a step that carries prompt tokens beside N =
    ``decode_tokens`` decodes, when x = ``arrivals_per_step`` prompts of ``mean_prompt_tokens`` arrive per step:
    ``c_s = min(C − N, E[L]·x/(1 − e^{−x}))``, ``t_p = E(N, c_s)/c_s`` with N held in [1, C − 1] and c_s at least one
    token (module docstring; broadcast)."""
    # a step runs at most the budget, its decodes counted as at least one token; at the budget's edge (N → C, no
    # room) the price is the table's last slope, its limit, read over the last token
    n = np.minimum(np.maximum(np.asarray(decode_tokens, dtype=np.float64), 1.0), budget - 1.0)
    x = np.asarray(arrivals_per_step, dtype=np.float64)
    many = x > 1e-9  # x/(1 − e^{−x}) where the divisor is at least 1e-9 (inf/1 = inf), its limit 1 + x/2 below
    per_step = np.where(many, x / -np.expm1(-np.where(many, x, 1.0)), 1.0 + x / 2.0)
    c_s = np.maximum(np.minimum(budget - n, mean_prompt_tokens * per_step), 1.0)
    return np.asarray(width.extra_s(n, c_s) / c_s, dtype=np.float64), np.asarray(c_s, dtype=np.float64)


def _width_price(
    rate: FloatArray, tau: FloatArray, wl: DecodeWorkload, budget: float, width: GemmWidth, mean_prompt_tokens: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(t_p, N, c_s)`` at the mean step ``tau`` (:func:`step_price` at N = λE[n]τ̄, x = λτ̄; E[L] =
    ``mean_prompt_tokens``)."""
    n = rate * wl.mean_steps * tau
    t_p, c_s = step_price(n, rate * tau, mean_prompt_tokens, budget, width)
    return t_p, np.asarray(n, dtype=np.float64), c_s


def riding_mean_field(
    rate: FloatArray, wl: DecodeWorkload, st: LinearStepTime, budget: float, width: GemmWidth, attention_s: FloatArray
) -> RidingStep:
    """τ̄, t_p(λ), N and c_s per rate (module docstring); ``attention_s`` per cell A_i. A rate without a fixed point
    before the decode batch fills the budget (unstable) gets the step at that edge, ``N = C`` (``stable`` False there:
    the chunk queue has no room, :func:`~pdplan.queueing.chunk_window.chunk_queue` raises), so that the price per
    request stays defined and increasing in λ for the bounds that bisect over rates."""
    rate = np.atleast_1d(np.asarray(rate, dtype=np.float64))
    if budget > width.top * (1.0 + 1e-12):
        raise ValueError(f"GemmWidth tabulates {width.top:.0f} tokens, less than the budget {budget:.0f}")
    el, ea = float(wl.prob @ wl.computed_tokens), float(wl.prob @ attention_s)
    load = rate * (st.per_request_s(wl) + ea)  # u_d + λE[A]: the step's share without the prompt GEMMs
    with np.errstate(divide="ignore"):
        edge = np.where(rate > 0.0, budget / np.maximum(rate * wl.mean_steps, 1e-300), np.inf)
        lo = np.where(load < 1.0, st.t0_s / np.maximum(1.0 - load, 1e-300), np.inf)
    lo = np.minimum(lo, edge)

    gap = _Gap(rate, load, wl, el, st.t0_s, budget, width)  # τ − map(τ): ≤ 0 below the least fixed point

    # the first sign change of the gap on a geometric grid from lo to the edge brackets the least fixed point (the
    # gap need not stay positive past it: G's tile waves make its slope jump near the budget)
    top = np.where(np.isfinite(edge), edge, lo)
    grid = lo[:, None] * (top / lo)[:, None] ** (np.arange(_BRACKET_POINTS) / (_BRACKET_POINTS - 1.0))[None, :]
    g = gap(grid)
    up = g >= 0.0
    first = np.argmax(up, axis=1)
    stable = up.any(axis=1) & (load < 1.0) & ((lo < edge) | ~np.isfinite(edge))
    rows = np.arange(rate.size)
    j_hi, j_lo = first, np.maximum(first - 1, 0)
    hi_b, lo_b = grid[rows, j_hi], grid[rows, j_lo]
    g_hi, g_lo = g[rows, j_hi], np.minimum(g[rows, j_lo], 0.0)
    root = _illinois_one if rate.size == 1 else _illinois
    tau = np.where(stable, root(gap, lo_b, hi_b, np.where(j_hi == 0, g_hi, g_lo), g_hi), top)
    t_p, n, c_s = _width_price(rate, tau, wl, budget, width, el)
    return RidingStep(tau, t_p, n, c_s, stable)


class _Gap:
    """``τ − map(τ)`` of :func:`riding_mean_field` per rate (``τ`` of shape [R], or [R, K] for the bracket's grid):
    ``τ − t0 − τ(u_d + λE[A] + λE[L]·t_p(τ))`` with t_p of :func:`step_price` at N = λE[n]τ and x = λτ
    (:func:`_width_price`), the same operations in the same order on the same doubles, with the rate's products and
    the clips a step's N and c_s already satisfy taken once: ``max(N, 1)`` and ``max(c_s, 0)`` of
    :meth:`GemmWidth.extra_s` (N is held in [1, C − 1] and c_s ≥ 1 before it, so they return their argument; a
    budget under 2 tokens, where C − 1 < 1, takes :func:`_width_price` itself), and ``x/(1 − e^{−x})`` without its
    small-x branch where every x exceeds it (the branch then selects the same quotient). About a third of a
    colocated limit's and snapshot's Python calls (docs/accuracy.md §7.22)."""

    __slots__ = ("budget", "el", "load", "per_token", "rate", "rows", "steps", "t0", "width", "wl")

    def __init__(
        self,
        rate: FloatArray,
        load: FloatArray,
        wl: DecodeWorkload,
        el: float,
        t0_s: float,
        budget: float,
        w: GemmWidth,
    ) -> None:
        self.rate, self.load, self.wl, self.steps, self.el, self.t0, self.budget, self.width = (
            rate, load, wl, wl.mean_steps, el, t0_s, budget, w,
        )  # fmt: skip
        self.per_token = rate * el  # λE[L], as ``r * el`` computes it
        self.rows = (rate[:, None], load[:, None], self.per_token[:, None])

    def __call__(self, tau: FloatArray) -> FloatArray:
        r, load, per_token = (self.rate, self.load, self.per_token) if tau.ndim == 1 else self.rows
        if self.budget - 1.0 < 1.0:
            t_p = _width_price(r, tau, self.wl, self.budget, self.width, self.el)[0]
            return np.asarray(tau - self.t0 - tau * (load + per_token * t_p), np.float64)
        n = np.minimum(np.maximum(r * self.steps * tau, 1.0), self.budget - 1.0)
        x = r * tau
        many = x > 1e-9
        if many.all():
            per_step = x / -np.expm1(-x)
        else:
            per_step = np.where(many, x / -np.expm1(-np.where(many, x, 1.0)), 1.0 + x / 2.0)
        c_s = np.maximum(np.minimum(self.budget - n, self.el * per_step), 1.0)
        top = n + c_s
        w = self.width
        if (top > w.tokens[-1] + _EDGE_TOKENS).any():
            raise ValueError(f"GemmWidth: a step of {float(top.max()):.0f} tokens is past the table ({w.top:.0f})")
        extra = np.maximum(np.interp(top, w.tokens, w.gemm_s) - np.interp(n, w.tokens, w.gemm_s), 0.0)
        return np.asarray(tau - self.t0 - tau * (load + per_token * (extra / c_s)), np.float64)


def _illinois(
    fn: Callable[[FloatArray], FloatArray], lo: FloatArray, hi: FloatArray, f_lo: FloatArray, f_hi: FloatArray
) -> FloatArray:
    """A root of the increasing-through-zero ``fn`` in ``[lo, hi]`` per row (``f_lo ≤ 0 ≤ f_hi``) by regula falsi with
    the Illinois rule (the end that stays twice has its value halved), vectorised; to ``_REL_TOL`` of the root."""
    a, b, fa, fb = lo.copy(), hi.copy(), f_lo.copy(), f_hi.copy()
    side = np.zeros_like(a)
    x = np.where(fa >= 0.0, a, b)
    for _ in range(_REGULA_FALSI_STEPS):
        open_ = (b - a > _REL_TOL * b) & (fa < 0.0)
        if not np.any(open_):
            break
        denom = np.where(open_, fb - fa, 1.0)
        x = np.where(open_, (a * fb - b * fa) / denom, x)
        fx = fn(x)
        hit = np.abs(fx) <= _REL_TOL * x
        right = open_ & (fx < 0.0)  # the root lies above x
        left = open_ & ~right
        a, fa = np.where(right, x, a), np.where(right, fx, fa)
        b, fb = np.where(left, x, b), np.where(left, fx, fb)
        fb = np.where(right & (side < 0), fb / 2.0, fb)
        fa = np.where(left & (side > 0), fa / 2.0, fa)
        side = np.where(right, -1.0, np.where(left, 1.0, side))
        a, b = np.where(hit, x, a), np.where(hit, x, b)
    return np.asarray(x, dtype=np.float64)


def _illinois_one(
    fn: Callable[[FloatArray], FloatArray], lo: FloatArray, hi: FloatArray, f_lo: FloatArray, f_hi: FloatArray
) -> FloatArray:
    """:func:`_illinois` of one row, its steps on Python floats: the same operations on the same doubles (IEEE
    arithmetic rounds a product, difference or quotient alike in numpy and Python; ``fn`` is called on the same
    one-element arrays), without the dozen array calls a step of the vectorised loop makes (docs/accuracy.md
    §7.22)."""
    a, b, fa, fb = float(lo[0]), float(hi[0]), float(f_lo[0]), float(f_hi[0])
    side = 0.0
    x = a if fa >= 0.0 else b
    for _ in range(_REGULA_FALSI_STEPS):
        if not (b - a > _REL_TOL * b and fa < 0.0):
            break
        x = (a * fb - b * fa) / (fb - fa)
        fx = float(fn(np.array([x]))[0])
        hit = abs(fx) <= _REL_TOL * x
        if fx < 0.0:  # the root lies above x
            a, fa = x, fx
            if side < 0:
                fb = fb / 2.0
            side = -1.0
        else:
            b, fb = x, fx
            if side > 0:
                fa = fa / 2.0
            side = 1.0
        if hit:
            a, b = x, x
    return np.array([x])
