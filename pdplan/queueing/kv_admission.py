"""Decode KV admission: the fluid KV limit and the wait for free KV past the comfortable (P99) limit.

A decode instance admits a request only while its KV fits (docs/queueing.md §2.3: "else preemption/recompute (vLLM)
or admission queueing"; §1.5: "add the decode admission wait"); pdplan's simulator (:mod:`pdplan.sim.decode`) queues
it FCFS for KV at the step boundary. The instance stays stable up to the **mean (fluid) KV limit** of §2.3,
``K̄(λ) = λ τ̄(λ) E[held work] = M_kv`` (Nie, Si, Zhou 2026, arXiv 2605.04595): for the linear step
``τ̄ = t0/(1 − λ·per)``, ``per = t1 E[n] + t2 E[work]``, that is ``λ_kv = M/(t0 W + M·per)`` (W = E[held work], the
context-token·steps a request holds, :func:`pdplan.queueing.decode.kv_footprint`). The **comfortable limit** is the
P99 one of :func:`pdplan.queueing.decode.decode_capacity` (``K̄ + z₉₉·sd K = M_kv``); below it fewer than 1 % of
arrivals find the KV full and the wait is neglected, as before.

Between the two the wait is a **diffusion (Halfin–Whitt) approximation of a many-server queue on KV seats**: seats
``c = M_kv / r̄`` with r̄ = W/E[n] the mean context of an in-flight sequence, offered seats ``a = K̄/r̄`` (= N, the
mean sequences in flight). Halfin and Whitt (1981, Oper. Res. 29(3)) give for M/M/c with ``β = (c − a)/√a`` the
probability of waiting ``P_w ≈ [1 + β Φ(β)/φ(β)]⁻¹``; here ``√a`` (the M/G/∞ sd of the seats in use) is replaced by
the sd of the KV occupancy in seats, ``sd K / r̄`` with ``Var K = λ τ̄ E[Σ_{j<n}(L+j)²]·F`` (the §2.3 shot noise
with the §2.4 feedback factor F; reserved footprints: ``E[n(L + s + n)²]``), so ``β = (M_kv − K̄)/sd K``, exactly
the margin the P99 rule holds at z₉₉: at the comfortable limit ``P_w = 0.011``. The wait of those who wait is
exponential with M/M/c's rate ``cμ − λ`` (μ = 1/(E[n] τ̄)), i.e. mean ``W τ̄/(M_kv − K̄)``, times the Allen–Cunneen
factor ``(1 + c_s²)/2`` (c_s² of a request's held token·steps, the KV·time it occupies; the M/G/c correction of
:func:`pdplan.queueing.mgc.allen_cunneen_wait_s`). Waiting requests hold no KV and run no step, so τ̄ and the TPOT
model are unchanged. Measured against the simulator in docs/queueing.md §2.6.

Engines (docs/queueing.md §2.6): vLLM admits on its prompt's blocks and preempts (recompute) when blocks run out,
SGLang retracts; both hold the growing context of §2.2, ``L + s + j`` at step j, and the recompute work of a preemption
is not priced. TensorRT-LLM's default ``GUARANTEED_NO_EVICT`` (and pdplan's simulator) admit a request only when its
final footprint fits, so it holds ``L + s + n`` for all n steps (:data:`RESERVING_ENGINES`): W = E[n(L + s + n)] and
the variance sum E[n(L + s + n)²]. Where that reserved mean limit lies below the comfortable (growing-context P99)
one, the comfortable limit stays the stability limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.numerics.normal import log_ndtr
from pdplan.queueing.decode import (
    DecodeWorkload,
    LinearStepTime,
    decode_fixed_point,
    held_context_sums,
    load_noise,
)
from pdplan.queueing.link_delay import BinDelay, tail_bands
from pdplan.types import FloatArray

ADMISSION_POINTS = 8
"""Quantile points (plus the atom at 0) of the admission wait mixed into TTFT or TPOT (:func:`tail_bands`)."""


RESERVING_ENGINES = frozenset({"trtllm"})
"""Engines whose default admission reserves a request's whole footprint L + n (TensorRT-LLM ``GUARANTEED_NO_EVICT``,
the default ``capacity_scheduler_policy``: "guarantee that a started request is never paused", TensorRT-LLM
performance tuning guide, "Capacity Scheduler Policy"); the others hold their growing context (module docstring)."""


@dataclass(frozen=True, slots=True)
class KvFootprint:
    """What a request holds in the KV pool over its life: ``work`` = E[KV token·steps], ``square_sum`` = E[Σ over its
    steps of the tokens held²] (the M/G/∞ variance of the occupancy, §2.3), ``scv`` = the squared coefficient of
    variation of its token·steps."""

    work: float
    square_sum: float
    scv: float


def kv_held(cells: DecodeWorkload, state_tokens_per_seq: float, *, reserve: bool) -> KvFootprint:
    """The footprint of :class:`KvFootprint`: growing, ``L + s + j`` at step j (§2.2, vLLM/SGLang); reserved,
    ``L + s + n`` at every step (TensorRT-LLM ``GUARANTEED_NO_EVICT``). With the ``cells``' window w (every layer
    windowed) a sequence holds min(L + j, w) + s, resp. min(L + n, w) + s (:func:`held_context_sums`)."""
    n, p = cells.decode_steps, cells.prob
    base = cells.input_tokens + state_tokens_per_seq
    if cells.window_tokens is not None:
        top = cells.window_tokens + state_tokens_per_seq  # min(L + j, w) + s = min(L + s + j, w + s)
        if reserve:
            w = n * np.minimum(base + n, top)
            square = n * np.minimum(base + n, top) ** 2
        else:
            w, square = held_context_sums(base, n, top)
        mean = float(p @ w)
        return KvFootprint(mean, float(p @ square), float(p @ (w - mean) ** 2) / mean**2)
    if reserve:
        w = n * (base + n)
        square = n * (base + n) ** 2
    else:
        w = n * base + n * (n - 1.0) / 2.0
        square = n * base**2 + base * n * (n - 1.0) + (n - 1.0) * n * (2.0 * n - 1.0) / 6.0
    mean = float(p @ w)
    return KvFootprint(mean, float(p @ square), float(p @ (w - mean) ** 2) / mean**2)


def kv_mean_rate(cells: DecodeWorkload, held: KvFootprint, step: LinearStepTime, kv_capacity_tokens: float) -> float:
    """Per-instance rate at which the mean KV occupancy ``λ τ̄ W`` reaches ``M_kv`` (module docstring; ``per`` from
    the ``cells``' context, W = ``held.work``)."""
    per = step.t1_s_per_seq * cells.mean_steps + step.t2_s_per_token * cells.mean_work
    return kv_capacity_tokens / (step.t0_s * held.work + kv_capacity_tokens * per)


@dataclass(frozen=True, slots=True)
class KvAdmission:
    """One decode instance's KV admission queue: the workload ``cells`` (decode steps), its footprint ``held``, the
    step law, the capacity, and the comfortable (P99) and fluid (mean) per-instance rates."""

    cells: DecodeWorkload
    held: KvFootprint
    step: LinearStepTime
    kv_capacity_tokens: float
    comfort_rate_per_s: float
    mean_rate_per_s: float

    def wait(self, rates_per_s: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(P_w, E[W | W > 0])`` per per-instance rate: zeros at or below the comfortable limit (module docstring)."""
        rates = np.atleast_1d(np.asarray(rates_per_s, dtype=np.float64))
        prob, cond = np.zeros(rates.size), np.zeros(rates.size)
        beyond = np.flatnonzero((rates > self.comfort_rate_per_s) & (rates < self.mean_rate_per_s))
        if beyond.size == 0:
            return prob, cond
        fixed = decode_fixed_point(rates[beyond], self.cells, self.step)
        _, factor = load_noise(fixed, self.cells)
        lt = fixed.rate_per_s * fixed.tau_mean_s
        sd = np.sqrt(lt * self.held.square_sum * factor)
        free = self.kv_capacity_tokens - lt * self.held.work
        beta = free / sd
        # β Φ(β)/φ(β) = β √(2π) exp(β²/2 + log Φ(β)): in logs, no overflow of exp(β²/2) before the ratio is formed
        ratio = beta * np.sqrt(2.0 * np.pi) * np.exp(np.minimum(beta**2 / 2.0 + log_ndtr(beta), 700.0))
        prob[beyond] = 1.0 / (1.0 + ratio)
        cond[beyond] = (1.0 + self.held.scv) / 2.0 * self.held.work * fixed.tau_mean_s / free
        return prob, cond

    def delay(self, rates_per_s: FloatArray, points: int = ADMISSION_POINTS) -> BinDelay:
        """The wait as a :class:`BinDelay` (one bin for all): an atom ``1 − P_w`` at 0 and ``points`` band quantiles
        of the exponential ``E[W | W > 0]``."""
        prob, cond = self.wait(rates_per_s)
        mids, widths = tail_bands(points)
        pts = np.concatenate((np.zeros((prob.size, 1)), -cond[:, None] * np.log1p(-mids[None, :])), axis=1)
        wts = np.concatenate(((1.0 - prob)[:, None], prob[:, None] * widths[None, :]), axis=1)
        return BinDelay(pts[:, None, :], wts[:, None, :])


def add_delays(first: BinDelay, second: BinDelay, points: int) -> BinDelay:
    """The sum of two independent per-bin delays, as an atom at 0 plus ``points`` band quantiles of its positive part
    (:func:`~pdplan.queueing.link_delay.tail_bands`, as the link delays are discretised); a bin axis of length 1
    broadcasts over the other's bins. Every pair of points is summed with its weights multiplied, then the pairs are
    sorted and each band's level read off their cumulative weight (the smallest sum reaching it)."""
    r = first.points_s.shape[0]
    bins = max(first.points_s.shape[1], second.points_s.shape[1])
    pairs = (r, bins, first.points_s.shape[2] * second.points_s.shape[2])
    pts = np.broadcast_to(
        first.points_s[:, :, :, None] + second.points_s[:, :, None, :],
        (r, bins, first.points_s.shape[2], second.points_s.shape[2]),
    ).reshape(pairs)
    wts = np.broadcast_to(
        first.weights[:, :, :, None] * second.weights[:, :, None, :],
        (r, bins, first.weights.shape[2], second.weights.shape[2]),
    ).reshape(pairs)
    order = np.argsort(pts, axis=2, kind="stable")
    pts = np.take_along_axis(pts, order, axis=2)
    wts = np.take_along_axis(wts, order, axis=2)
    atom = np.sum(np.where(pts <= 0.0, wts, 0.0), axis=2)
    cum = np.cumsum(wts, axis=2)
    mids, widths = tail_bands(points)
    levels = atom[:, :, None] + (1.0 - atom[:, :, None]) * mids[None, None, :]
    idx = np.minimum(np.sum(cum[:, :, None, :] < levels[:, :, :, None], axis=3), pairs[2] - 1)
    out_pts = np.concatenate((np.zeros((r, bins, 1)), np.take_along_axis(pts, idx, axis=2)), axis=2)
    out_wts = np.concatenate((atom[:, :, None], (1.0 - atom[:, :, None]) * widths[None, None, :]), axis=2)
    return BinDelay(out_pts, out_wts)
