"""Batched prefill on one instance: dynamic batching under a token budget (docs/queueing.md §1.4).

Model (the simulator's, :mod:`pdplan.sim.prefill`): Poisson arrivals at λ, prompt lengths l ~ p_k.
An idle instance starts a batch with the first arrival at once; when a batch ends, the instance
takes the FCFS head requests while their token sum fits the budget B (always at least one: a
longer prompt runs alone) and all of them finish together after the batch time F(Σl, Σl²) (the
roofline, :class:`pdplan.serving.roles.PrefillBatchTime`). Light load gives batches of one; under
load a batch holds whatever arrived during the previous one.

Why not M/G/1 on amortised work (docs/queueing.md §1.4's first suggestion): with batch time
``a + β·Σl`` and no cap, the mean-field batch length is ``a/(1 − λβE[l])`` and the amortised
per-request work ``βl + a/E[batch]`` makes λ·E[S] = 1 at *every* load — the server is always busy
(batches stretch to absorb the load), so Pollaczek–Khinchine does not apply. We solve the bulk
queue instead (the M/G^[1,B]/1 dynamic-batching queue of Yang, Jiao & Xu 2024, arXiv 2407.05347,
with a token budget and a length-dependent batch time), as an embedded Markov chain at batch
starts, numerically:

* **States.** ``single k``: a batch holding one prompt of bin k (started from idle, or after a
  batch during which exactly one request arrived), duration F(l_k, l_k²) exactly. ``U = j·h``:
  a batch started with U queued tokens on a lattice of step h (j ≥ 1). If U ≤ B it takes all,
  duration F(U, U·min(κ, U/2)) with κ = E[l²]/E[l] (Σl² of a batch of U tokens at its mean); if
  U > B it is *full*: it takes B_full tokens in F_full seconds and carries U − B_full over.
* **Full batches** (:func:`full_batch`): the head is the request that did not fit the previous
  batch, length-biased (∝ l·p_l, the renewal inspection paradox); if it exceeds B it runs alone,
  else fresh prompts follow while they fit, the last partial sum ≤ B − head having mass
  ``U(s)·P(l > B − head − s)`` (U the renewal mass function). B_full = E[Σl], F_full = E[F].
* **Transitions.** The tokens arriving during a batch of duration T are compound Poisson,
  ``CP(λT)``, on the lattice by FFT: ``irfft(exp(λT(φ̂ − 1)))`` with φ̂ the prompt lattice pmf's
  transform (mass beyond the lattice lumped into its last cell). Without carry: 0 or 1 arrival
  (probability e^{−λT}(1 + λT)) → ``single k`` w.p. p_k (after an idle period if none); ≥ 2
  arrivals → ``U``. With carry C: ``U' = C + CP(λT_full)``. The stationary law π of the embedded
  chain solves ``π(P − I) = 0, Σπ = 1`` (dense solve, ≲ 300 states).
* **Stability / capacity:** the carry is a random walk with drift ``λE[l]F_full − B_full``:
  stable iff ``λ < λ_cap = B_full/(E[l]·F_full)`` (Li, Dai & Peng 2025, arXiv 2504.07347: tokens
  per batch over batch time).

Time-stationary view (renewal–reward, PASTA): state s occupies ``π_s T_s`` and the idle period
after it ``π_s [C_s = 0] e^{−λT_s}/λ``; normalised, these are the probabilities that an arrival
finds the instance idle or in a batch of state s. The TTFT lattice built from them is in
:mod:`pdplan.queueing.batched_ttft`.

Lattice: M = ``CELLS`` cells; h = max(B/128, span/M) with the span covering max(B, l_max) and
``TAIL_SPANS`` mean carry excesses ``λT_full E[l²]/(2(B_full − λE[l]T_full))`` (the exponential
tail rate of a random walk, 2·drift/variance); so h grows only near capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.queueing.distributions import check_pmf
from pdplan.types import FloatArray

BatchTimeFn = Callable[[FloatArray, FloatArray], FloatArray]
"""``F(Σl [..], Σl² [..]) -> seconds [..]``: the duration of one prefill batch (vectorised)."""
CELLS = 256
TAIL_SPANS = 20.0
_RENEWAL_CELLS = 256
_HEAD_ITERATIONS = 64


@dataclass(frozen=True, slots=True)
class BatchedPrefill:
    """Rate-free inputs of the chain: prompt bins, budget, batch time and the full-batch means."""

    lengths: FloatArray
    prob: FloatArray
    budget_tokens: float
    batch_time: BatchTimeFn
    single_s: FloatArray
    kappa_tokens: float
    full_tokens: float
    full_s: float

    @property
    def mean_tokens(self) -> float:
        return float(self.prob @ self.lengths)

    @property
    def capacity_rps(self) -> float:
        """λ_cap = B_full/(E[l]·F_full): the largest stable arrival rate (module docstring)."""
        return self.full_tokens / (self.mean_tokens * self.full_s)

    def batch_s(self, tokens: FloatArray) -> FloatArray:
        """Duration of a multi-prompt batch of ``tokens`` tokens at its mean Σl² (module docs)."""
        tok = np.maximum(tokens, 1.0)
        return self.batch_time(tok, tok * np.minimum(self.kappa_tokens, 0.5 * tok))


def batched_prefill(
    lengths: FloatArray, prob: FloatArray, budget_tokens: float, batch_time: BatchTimeFn
) -> BatchedPrefill:
    """Validate the inputs and compute κ, the single-prompt times and the full batch."""
    lens, p = check_pmf(lengths, prob, "lengths")
    if not budget_tokens >= 1.0:
        raise ValueError(f"budget_tokens must be >= 1, got {budget_tokens}")
    kappa = float(p @ lens**2) / float(p @ lens)
    single = np.asarray(batch_time(lens, lens**2), dtype=np.float64)
    base = BatchedPrefill(lens, p, float(budget_tokens), batch_time, single, kappa, 1.0, 1.0)
    tokens, time_s = full_batch(base)
    return BatchedPrefill(lens, p, float(budget_tokens), batch_time, single, kappa, tokens, time_s)


def lattice_pmf(lengths: FloatArray, prob: FloatArray, step: float, cells: int) -> FloatArray:
    """Prompt pmf on the lattice ``j·step`` (linear split between neighbours: mean kept)."""
    x = np.minimum(lengths / step, cells - 1.0)
    lo = np.floor(x).astype(np.intp)
    hi = np.minimum(lo + 1, cells - 1)
    frac = x - lo
    out = np.bincount(lo, weights=prob * (1.0 - frac), minlength=cells)
    out += np.bincount(hi, weights=prob * frac, minlength=cells)
    return np.asarray(out[:cells], dtype=np.float64)


def full_batch(model: BatchedPrefill) -> tuple[float, float]:
    """(B_full, F_full): mean tokens and duration of a batch taken from a long queue.

    On a lattice of ``B/_RENEWAL_CELLS`` tokens. A full batch starts with its head, the request
    that did not fit the previous batch; the fresh prompts that follow form a renewal sequence
    whose last partial sum s ≤ room = B − head has mass ``U(s)·P(l > room − s)`` (they sum to 1
    over s ≤ room: the renewal identity), ``U = δ0 + pmf * U`` solved as a lower-triangular
    Toeplitz system. Their Σl² given s is ``V(s)/U(s)`` with ``V = pmf * V + (l²·pmf) * U`` (the
    prompts' own l², not their cells'), so the attention work is exact, not the κ approximation.
    The next head is the first prompt longer than the room left (``pmf(x)·[x > room − s]``, or
    any prompt after a head too long for the budget, which runs alone): the heads form a Markov
    chain whose stationary law weights the batches (length-biased, ∝ l·p_l, when B ≫ l).
    """
    from scipy.linalg import solve_triangular  # lazy: only batched prefill needs it (~0.1 s to import)

    budget = model.budget_tokens
    step = max(budget / _RENEWAL_CELLS, 1.0)
    n = int(np.floor(budget / step)) + 1
    small = model.lengths <= budget
    lens, p = model.lengths[small], model.prob[small]
    pmf = lattice_pmf(lens, p, step, n)  # cell 0 holds prompts under one cell
    idx = np.arange(n)
    lag = np.subtract.outer(idx, idx).clip(0)
    toeplitz = np.eye(n) - np.tril(pmf[lag])
    renewal = solve_triangular(toeplitz, np.eye(n)[:, 0], lower=True)
    squares = np.tril(lattice_pmf(lens, p * lens**2, step, n)[lag]) @ renewal
    fresh_sq = solve_triangular(toeplitz, squares, lower=True) / np.maximum(renewal, 1e-300)
    surv = np.maximum(1.0 - np.cumsum(pmf), 1e-300)  # P(l > y cells), prompts over B included
    room = (n - 1) - idx[:, None]  # row: head cell; column: s cells of fresh prompts
    inside = idx[None, :] <= room
    gap = np.clip(room - idx[None, :], 0, n - 1)
    weight = np.where(inside, renewal[None, :] * surv[gap], 0.0)
    weight /= np.maximum(weight.sum(axis=1, keepdims=True), 1e-300)
    head = _head_law(weight, np.where(inside, weight / surv[gap], 0.0), pmf, model.prob[~small], room[:, 0])
    head_sq = lattice_pmf(lens, p * lens**3, step, n) / np.maximum(lattice_pmf(lens, p * lens, step, n), 1e-300)
    tokens = (idx[:, None] + idx[None, :]) * step
    time_s = model.batch_time(np.maximum(tokens, 1.0), np.maximum(head_sq[:, None] + fresh_sq[None, :], 1.0))
    small_w, big_w = head[:n], head[n:]
    b_full = float(small_w @ (weight * tokens).sum(axis=1) + big_w @ model.lengths[~small])
    f_full = float(small_w @ (weight * time_s).sum(axis=1) + big_w @ model.single_s[~small])
    return b_full, f_full


def _head_law(
    weight: FloatArray, ratio: FloatArray, pmf: FloatArray, big: FloatArray, room: npt.NDArray[np.intp]
) -> FloatArray:
    """Stationary law of full-batch heads (lattice cells, then prompts over the budget).

    From head cell i the next head x is the first prompt with x > room_i − s: probability
    ``pmf(x)·Σ_{s > room_i − x} weight[i, s]/P(l > room_i − s)`` (a reverse cumulative sum over
    s); from a head over the budget it is any prompt. Power iteration (the chain forgets its
    start within a few batches).
    """
    n = pmf.size
    tail = np.concatenate((np.cumsum(ratio[:, ::-1], axis=1)[:, ::-1], np.zeros((n, 1))), axis=1)
    start = np.clip(room[:, None] - np.arange(n)[None, :] + 1, 0, n)
    trans = np.zeros((n + big.size, n + big.size))
    trans[:n, :n] = pmf[None, :] * np.take_along_axis(tail, start, axis=1)
    trans[:n, n:] = tail[:, :1] * big[None, :]
    trans[n:, :n] = pmf[None, :]
    trans[n:, n:] = big[None, :]
    law = np.concatenate((pmf, big))
    for _ in range(_HEAD_ITERATIONS):
        law = law @ trans
    return np.asarray(law / law.sum(), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class ChainState:
    """The stationary embedded chain at one arrival rate (``S = K + CELLS`` states).

    States ``0..K−1`` are the single-prompt batches, ``K + j`` the lattice state U = j·h.
    ``arrivals[s]`` is the lattice pmf of the tokens arriving during a batch of state s;
    ``busy_prob[s]`` the probability that an arrival finds a batch of state s in progress and
    ``idle_prob`` that it finds the instance idle (renewal–reward, PASTA).
    """

    rate_per_s: float
    step_tokens: float
    duration_s: FloatArray
    carry_tokens: FloatArray
    arrivals: FloatArray
    busy_prob: FloatArray
    idle_prob: float
    servers: int = 1

    @property
    def busy_fraction(self) -> float:
        """Time fraction the instance is busy (what a simulator measures as utilisation)."""
        return 1.0 - self.idle_prob


def lattice_step(model: BatchedPrefill, rate: float, servers: int = 1) -> float:
    """Token lattice step at ``rate`` (module docstring); ValueError at or above capacity."""
    if rate >= servers * model.capacity_rps:
        raise ValueError(
            f"batched prefill: unstable at rate {rate:.6g}/s (capacity {servers * model.capacity_rps:.6g}/s)"
        )
    second = float(model.prob @ model.lengths**2)
    full_s = model.full_s / servers
    drift = model.full_tokens - rate * model.mean_tokens * full_s
    excess = rate * full_s * second / (2.0 * drift)
    span = 1.05 * max(model.budget_tokens, float(model.lengths.max())) + TAIL_SPANS * excess
    return max(model.budget_tokens / 128.0, span / CELLS, 1.0)


def _compound_poisson(mean_counts: FloatArray, pmf: FloatArray) -> FloatArray:
    """``[S, M]`` lattice pmfs of compound Poisson sums (means ``mean_counts``) by one FFT."""
    cells = pmf.size
    phi = np.fft.rfft(pmf, n=2 * cells)
    out = np.fft.irfft(np.exp(mean_counts[:, None] * (phi[None, :] - 1.0)), n=2 * cells, axis=1)
    out = np.maximum(out[:, :cells], 0.0)
    out[:, -1] += np.maximum(1.0 - out.sum(axis=1), 0.0)  # beyond the lattice: last cell
    return out


def _shifted_rows(base: FloatArray, shift_cells: FloatArray) -> FloatArray:
    """``base`` shifted right by fractional ``shift_cells`` per row, overflow in the last cell."""
    cells = base.size
    lo = np.floor(shift_cells).astype(np.intp)
    frac = shift_cells - lo
    idx = np.arange(cells)[None, :] - lo[:, None]
    pad = np.concatenate(([0.0], base))
    a = pad[np.clip(idx, -1, cells - 1) + 1]
    b = pad[np.clip(idx - 1, -1, cells - 1) + 1]
    rows = (1.0 - frac[:, None]) * a + frac[:, None] * b
    rows[:, -1] += np.maximum(1.0 - rows.sum(axis=1), 0.0)
    return np.asarray(rows, dtype=np.float64)


def chain_state(model: BatchedPrefill, rate: float, servers: int = 1) -> ChainState:
    """Stationary law of the embedded chain at ``rate`` (module docstring).

    ``servers`` = c > 1: the central queue of c instances (least-work routing) as one server
    whose batches last T/c (the M/G/c ≈ M/G/1-with-S/c scaling of docs/queueing.md §1.3 applied to
    batch durations): batches start c times as often and collect λT/c arrivals each.
    """
    k = model.lengths.size
    step = lattice_step(model, rate, servers)
    u = np.arange(CELLS) * step
    full = u > model.budget_tokens
    small = model.batch_s(np.maximum(u, 0.5 * step))  # U = 0: a batch under half a cell
    dur = np.concatenate((model.single_s, np.where(full, model.full_s, small))) / servers
    carry = np.concatenate((np.zeros(k), np.where(full, u - model.full_tokens, 0.0)))
    pmf = lattice_pmf(model.lengths, model.prob, step, CELLS)
    mu = rate * dur
    uniq, inverse = np.unique(mu, return_inverse=True)  # full batches share one duration
    cp = _compound_poisson(uniq, pmf)[inverse]
    trans = np.zeros((k + CELLS, k + CELLS))
    free = carry <= 0.0
    none_or_one = np.exp(-mu) * (1.0 + mu)
    trans[:, :k] = np.where(free, none_or_one, 0.0)[:, None] * model.prob[None, :]
    many = cp - np.exp(-mu)[:, None] * np.eye(1, CELLS)[0] - (mu * np.exp(-mu))[:, None] * pmf
    many = np.maximum(many, 0.0)
    many *= ((1.0 - none_or_one) / np.maximum(many.sum(axis=1), 1e-300))[:, None]
    trans[free, k:] = many[free]
    if np.any(~free):
        trans[~free, k:] = _shifted_rows(cp[~free][0], carry[~free] / step)
    pi = _stationary(trans)
    busy = pi * dur
    idle = np.where(free, pi * np.exp(-mu) / rate, 0.0)
    total = float(busy.sum() + idle.sum())
    return ChainState(rate, step, dur, carry, cp, busy / total, float(idle.sum()) / total, servers)


def _stationary(trans: FloatArray) -> FloatArray:
    """π with ``π P = π``, ``Σπ = 1`` (one dense LAPACK solve; the last balance equation is
    replaced by the normalisation)."""
    n = trans.shape[0]
    a = trans.T - np.eye(n)
    a[-1, :] = 1.0
    rhs = np.zeros(n)
    rhs[-1] = 1.0
    pi = np.maximum(np.linalg.solve(a, rhs), 0.0)
    return np.asarray(pi / pi.sum(), dtype=np.float64)
