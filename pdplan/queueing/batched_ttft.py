"""TTFT of batched prefill, per prompt bin, from the stationary chain of :mod:`pdplan.queueing.batched`.

A tagged request with prompt l (bin k) arrives (PASTA) to an idle instance — it runs alone at once,
``TTFT = F(l)`` — or during a batch of state s (duration T, carry C), a fraction u ~ U(0, 1) into
it, so ``R = T(1 − u)`` remains. The other arrivals during that batch bring N tokens,
N ~ ``arrivals[s]`` (compound Poisson, independent of u). Ahead of the tagged request at the next
batch start: ``V = C + u·N`` (the arrivals before it, by thinning the token count: exact in
expectation, and for many small mates); behind it: ``(1 − u)·N``.

* **Fits the next batch** (``V + l ≤ B``, i.e. ``u ≤ u* = (B − l − C)/N``): it joins everything
  queued and arriving during R: own batch ``X = l + C + N`` tokens (when that exceeds B, a full
  batch of ``max(B_full, l + C + u*N/2)`` tokens), ``TTFT = R + F_own(l, X)`` with R uniform on
  ``[T(1 − u*), T]``.
* **Overflows** (``u > u*``; taken at the midpoint u_o of that range): it waits
  ``n = ⌈(V + l − B)/B_full⌉`` full batches of F_full each, then runs with what remains ahead, its
  own prompt and what arrived behind it (``(1 − u_o)N`` plus λE[l] per second of extra wait),
  capped at a full batch. A prompt longer than B runs alone after the queue ahead clears
  (``⌈V/B_full⌉`` batches, the last one partial).

``F_own(l, X) = F(X, l² + m·min(κ, m))`` with m = X − l the mates' tokens (their Σl² at the
mean, as in the chain). Every (state, arrival-token cell, bin) thus gives two uniform segments of
``Z = TTFT − F(l)``; they are deposited exactly on a lattice as cdf ramps (second differences,
two cumulative sums), so the cdf is exact at lattice points and linear in between. The lattice
spans the segments holding all but 1e−6 of the mass in ``TTFT_CELLS`` cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.queueing.batched import BatchedPrefill, ChainState, chain_state
from pdplan.queueing.distributions import as_rates
from pdplan.queueing.erlang import erlang_c
from pdplan.types import FloatArray, IntArray

TTFT_CELLS = 2**11
ANCHORS = 8
DURATION_NODES = 24
CARRY_NODES = 12
_PAIR_FLOOR = 1e-13
_TAIL_MASS = 1e-5


@dataclass(frozen=True, slots=True)
class PerBinWait:
    """``Z_k = TTFT − F(l_k)`` per rate and prompt bin on a lattice of step ``h_s[r]``.

    ``cdf_grid[r, k, i] = P(Z_k ≤ i·h)``; ``mean_s[r, k]`` the exact mean; ``busy[r]`` the busy
    time fraction of an instance. ``cdf_rowwise`` takes thresholds of shape ``[R, K, ...]``.
    """

    h_s: FloatArray
    cdf_grid: FloatArray
    mean_s: FloatArray
    busy: FloatArray

    def cdf_rowwise(self, t_s: FloatArray) -> FloatArray:
        """``P(Z_k ≤ t[r, k, ...])`` by linear interpolation (0 below 0, last value beyond)."""
        extra = t_s.ndim - 2
        n = self.cdf_grid.shape[2]
        x = t_s / self.h_s.reshape((-1, 1) + (1,) * extra)
        i = np.clip(np.floor(x), 0, n - 1).astype(np.intp)
        i1 = np.minimum(i + 1, n - 1)
        frac = np.clip(x - i, 0.0, 1.0)
        r = np.arange(self.cdf_grid.shape[0]).reshape((-1, 1) + (1,) * extra)
        k = np.arange(self.cdf_grid.shape[1]).reshape((1, -1) + (1,) * extra)
        lo = self.cdf_grid[r, k, i]
        out = lo + frac * (self.cdf_grid[r, k, i1] - lo)
        return np.asarray(np.where(x < 0, 0.0, out), dtype=np.float64)

    def row(self, r: int) -> PerBinWait:
        sl = slice(r, r + 1)
        return PerBinWait(self.h_s[sl], self.cdf_grid[sl], self.mean_s[sl], self.busy[sl])

    @property
    def span_s(self) -> FloatArray:
        """Largest lattice time per rate."""
        return np.asarray(self.h_s * (self.cdf_grid.shape[2] - 1), dtype=np.float64)


def batched_wait(model: BatchedPrefill, rate_per_s: FloatArray, servers: int = 1) -> PerBinWait:
    """:class:`PerBinWait` for each rate (one chain solve and one lattice per rate).

    ``servers`` = c > 1 models c instances fed by one central FCFS queue (least-work routing),
    as M/G/c is modelled for one prompt at a time (docs/queueing.md §1.3): an arrival finds an idle
    instance with probability 1 − C(c, c·ρ) (Erlang C, ρ the busy fraction of the scaled chain,
    :func:`pdplan.queueing.batched.chain_state`) and then runs alone at once; otherwise its wait,
    mates and missed batches follow the scaled chain (durations T/c), while its own batch still
    takes the full time F.
    """
    rates = as_rates(rate_per_s)
    k = model.lengths.size
    anchors, left, theta = _anchors(model)
    h = np.ones(rates.size)
    cdf = np.ones((rates.size, k, TTFT_CELLS))
    mean = np.zeros((rates.size, k))
    busy = np.zeros(rates.size)
    for r, lam in enumerate(rates.tolist()):
        if lam <= 0.0:
            continue
        state = chain_state(model, lam, servers)
        lo, hi, w, bins = _segments(model, state, anchors)
        idle = state.idle_prob
        if servers > 1:
            wait_prob = float(erlang_c(servers, servers * state.busy_fraction)[0])
            w = w * wait_prob / state.busy_fraction
            idle = 1.0 - wait_prob
        h[r], grid, at = _deposit(lo, hi, w, bins, anchors.size, idle)
        cdf[r] = (1.0 - theta)[:, None] * grid[left] + theta[:, None] * grid[left + 1]
        mean[r] = (1.0 - theta) * at[left] + theta * at[left + 1]
        busy[r] = state.busy_fraction
    return PerBinWait(h, cdf, mean, busy)


def _anchors(model: BatchedPrefill) -> tuple[IntArray, IntArray, FloatArray]:
    """Anchor bins and, per bin, its left anchor (index into anchors) and weight θ of the right.

    ``ANCHORS`` bins spread over the prompt bins, plus the last bin within the budget and the
    first beyond it (a longer prompt runs alone: no interpolation across that edge); the other
    bins interpolate the anchors' lattices linearly in l. Z_k = TTFT − F(l_k) varies slowly with
    l_k (R does not depend on it; the own batch grows with the mates' tokens, not with l_k), which
    tests/unit/test_batched_prefill.py checks against all bins computed.
    """
    k = model.lengths.size
    inside = model.lengths <= model.budget_tokens
    picks = set(np.round(np.linspace(0, k - 1, min(ANCHORS, k))).astype(int).tolist())
    if inside.any() and not inside.all():
        last = int(np.flatnonzero(inside).max())
        picks |= {last, last + 1}
    anchors = np.array(sorted(picks), dtype=np.intp)
    if anchors.size == 1:
        return anchors, np.zeros(k, dtype=np.intp), np.zeros(k)
    left = np.clip(np.searchsorted(anchors, np.arange(k), side="right") - 1, 0, anchors.size - 2)
    la, lb = model.lengths[anchors[left]], model.lengths[anchors[left + 1]]
    theta = np.clip((model.lengths - la) / np.maximum(lb - la, 1e-12), 0.0, 1.0)
    cross = inside[anchors[left]] != inside[anchors[left + 1]]
    theta = np.where(cross, np.where(inside, 0.0, 1.0), theta)
    return anchors, left.astype(np.intp), theta


def _pool(values: FloatArray, nodes: FloatArray, weights: FloatArray) -> FloatArray:
    """Split each row of ``weights`` between the two ``nodes`` around its value (linear in value:
    the weighted mean of ``values`` is kept); returns ``[len(nodes), ...]``."""
    pos = np.interp(values, nodes, np.arange(nodes.size))
    lo = np.minimum(np.floor(pos).astype(np.intp), nodes.size - 2)
    frac = pos - lo
    split = np.zeros((nodes.size, values.size))
    cols = np.arange(values.size)
    split[lo, cols] = 1.0 - frac
    split[lo + 1, cols] += frac
    return np.asarray(np.einsum("ns,sm->nm", split, weights), dtype=np.float64)


def _pairs(model: BatchedPrefill, state: ChainState) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(T, C, N, weight) of the (pooled state, arrival cell) pairs with non-negligible weight.

    The tagged request's outcome depends on a state only through T, C and the arrival law, so
    states without carry are pooled onto ``DURATION_NODES`` geometric duration nodes and the full
    (carry) states, which share T = F_full and the arrival law, onto ``CARRY_NODES`` carry nodes;
    each state's weight is split linearly between its two neighbouring nodes (E[T] and E[C] kept).
    Pairs below the lightest ``_TAIL_MASS`` of the total are dropped.
    """
    free = state.carry_tokens <= 0.0
    busy = state.busy_prob[:, None] * state.arrivals
    t_free = state.duration_s[free]
    t_nodes = np.geomspace(t_free.min(), max(t_free.max(), t_free.min() * 1.0001), DURATION_NODES)
    groups = [(t_nodes, np.zeros(DURATION_NODES), _pool(np.log(t_free), np.log(t_nodes), busy[free]))]
    if np.any(~free):
        c_full = state.carry_tokens[~free]
        c_nodes = np.linspace(c_full.min(), max(c_full.max(), c_full.min() + 1.0), CARRY_NODES)
        groups.append((np.full(CARRY_NODES, model.full_s), c_nodes, _pool(c_full, c_nodes, busy[~free])))
    dur = np.concatenate([g[0] for g in groups])
    carry = np.concatenate([g[1] for g in groups])
    weight = np.concatenate([g[2] for g in groups])
    order = np.sort(weight.ravel())
    light = int(np.searchsorted(np.cumsum(order), _TAIL_MASS, side="right"))
    floor = max(float(order[light - 1]) if light else 0.0, _PAIR_FLOOR)
    s_idx, m_idx = np.nonzero(weight > floor)
    out = (dur[s_idx], carry[s_idx], m_idx * state.step_tokens, weight[s_idx, m_idx])
    return tuple(np.asarray(x, dtype=np.float64) for x in out)  # type: ignore[return-value]


def _own_s(model: BatchedPrefill, lens: FloatArray, tokens: FloatArray) -> FloatArray:
    """F_own(l, X): the batch holding a prompt of l tokens among X tokens in all."""
    mates = np.maximum(tokens - lens, 0.0)
    sq = lens**2 + mates * np.minimum(model.kappa_tokens, mates)
    return model.batch_time(np.maximum(tokens, lens), sq)


def _segments(
    model: BatchedPrefill, state: ChainState, bins: IntArray
) -> tuple[FloatArray, FloatArray, FloatArray, IntArray]:
    """Flat segments of Z for prompt ``bins``: ``(lo, hi, weight, index into bins)``.

    The common case — the request fits the next batch and that batch stays within the budget —
    reads ``F_own(l, l + C + N) − F(l)`` from a per-rate table over the lattice of C + N; the
    capped and overflow cases are evaluated only where they have weight.
    """
    t, c, n, w = _pairs(model, state)
    k = bins.size
    lens, single = model.lengths[None, bins], model.single_s[None, bins]
    budget, step = model.budget_tokens, state.step_tokens
    room = budget - lens - c[:, None]
    nn = n[:, None]
    u_star = np.where(nn > 0, np.clip(room / np.where(nn > 0, nn, 1.0), 0.0, 1.0), (room >= 0).astype(np.float64))
    u_star = np.where(lens > budget, 0.0, u_star)
    total = (c + n)[:, None]
    grid = np.arange(int(np.ceil(float(total.max()) / step)) + 2) * step
    table = _own_s(model, lens.T, lens.T + grid[None, :]) - single.T  # [K, G]
    pos = total / step
    i = np.minimum(np.floor(pos).astype(np.intp), grid.size - 2)
    f = pos - i
    kk = np.arange(k)[None, :]
    y_fit = (1.0 - f) * table[kk, i] + f * table[kk, i + 1]
    capped = (lens + total > budget) & (u_star > 0.0)
    if np.any(capped):
        r, q = np.nonzero(capped)
        x = np.maximum(model.full_tokens, lens[0, q] + c[r] + 0.5 * u_star[r, q] * n[r])
        y_fit[r, q] = _own_s(model, lens[0, q], x) - single[0, q]
    cut = t[:, None] * (1.0 - u_star)
    segs = [
        (
            cut + np.maximum(y_fit, 0.0),
            t[:, None] + np.maximum(y_fit, 0.0),
            w[:, None] * u_star,
            np.broadcast_to(kk, u_star.shape),
        )
    ]
    over = (u_star < 1.0) & (w[:, None] * (1.0 - u_star) > _PAIR_FLOOR)
    if np.any(over):
        r, q = np.nonzero(over)
        y_over = _overflow(model, state.rate_per_s, c[r], n[r], lens[0, q], single[0, q], u_star[r, q], state.servers)
        segs.append((y_over, cut[r, q] + y_over, w[r] * (1.0 - u_star[r, q]), q))
    return tuple(
        np.concatenate([np.ravel(x[j]) for x in segs])  # type: ignore[return-value]
        for j in range(4)
    )


def _overflow(
    model: BatchedPrefill,
    rate: float,
    c: FloatArray,
    n: FloatArray,
    lens: FloatArray,
    single: FloatArray,
    u_star: FloatArray,
    servers: int,
) -> FloatArray:
    """``Z − R`` when the request misses the next batch (module docstring), u at the midpoint."""
    alone = lens > model.budget_tokens
    u_o = 0.5 * (1.0 + u_star)
    ahead = c + u_o * n
    extra, rem = _ahead_wait(model, ahead, lens, alone)
    extra = extra / servers  # the batches ahead go to every instance in turn
    behind = (1.0 - u_o) * n + rate * model.mean_tokens * extra
    x_over = np.minimum(rem + lens + behind, np.maximum(model.full_tokens, rem + lens))
    own = np.where(alone, single, _own_s(model, lens, x_over))
    return np.asarray(np.maximum(extra + own - single, 0.0), dtype=np.float64)


def _ahead_wait(
    model: BatchedPrefill, ahead: FloatArray, lens: FloatArray, alone: npt.NDArray[np.bool_]
) -> tuple[FloatArray, FloatArray]:
    """(wait for the batches ahead, tokens still ahead in the own batch) after an overflow."""
    b_full, f_full = model.full_tokens, model.full_s
    fits = np.maximum(np.ceil((ahead + lens - model.budget_tokens) / b_full), 0.0)
    shared = (fits * f_full, np.maximum(ahead - fits * b_full, 0.0))
    batches = np.ceil(ahead / b_full)
    last = ahead - np.maximum(batches - 1.0, 0.0) * b_full
    solo = np.maximum(batches - 1.0, 0.0) * f_full + np.where(ahead > 0, model.batch_s(np.maximum(last, 1.0)), 0.0)
    return np.where(alone, solo, shared[0]), np.where(alone, 0.0, shared[1])


def _deposit(
    lo: FloatArray, hi: FloatArray, w: FloatArray, bins: IntArray, k: int, idle: float
) -> tuple[float, FloatArray, FloatArray]:
    """Lattice cdf ``[K, TTFT_CELLS]`` of uniform segments plus the idle atom at 0, and means."""
    total = np.bincount(bins, w, k) + idle
    mean = np.bincount(bins, 0.5 * (lo + hi) * w, k) / total
    h = max(float(hi.max()) if hi.size else 0.0, 1e-9) / (TTFT_CELLS - 3)
    scale = w / total[bins]
    lo_c, hi_c = lo / h, hi / h
    width = hi_c - lo_c
    point = width < 1e-9
    ramp = np.where(point, 0.0, scale / np.where(point, 1.0, width))
    row = bins * (TTFT_CELLS + 2)
    size = k * (TTFT_CELLS + 2)
    second = np.zeros(size)
    for pos, sign in ((lo_c, 1.0), (hi_c, -1.0)):
        x = np.minimum(pos, TTFT_CELLS - 1.0)
        j = np.floor(x).astype(np.intp)
        frac = j + 1.0 - x
        second += np.bincount(row + j + 1, sign * ramp * frac, size)
        second += np.bincount(row + j + 2, sign * ramp * (1.0 - frac), size)
    first = np.asarray(
        np.bincount(row + np.minimum(np.ceil(lo_c), TTFT_CELLS - 1).astype(np.intp), np.where(point, scale, 0.0), size),
        dtype=np.float64,
    )
    first[np.arange(k) * (TTFT_CELLS + 2)] += idle / total
    cdf = (np.cumsum(np.cumsum(second.reshape(k, -1), axis=1), axis=1) + np.cumsum(first.reshape(k, -1), axis=1))[
        :, :TTFT_CELLS
    ]
    cdf = np.clip(np.maximum.accumulate(cdf, axis=1), 0.0, 1.0)
    cdf[:, -1] = 1.0
    return h, cdf, np.asarray(mean, dtype=np.float64)
