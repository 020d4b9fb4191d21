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
with the §2.4 feedback factor F), so ``β = (M_kv − K̄)/sd K``, exactly the margin the P99 rule holds at z₉₉: at the
comfortable limit ``P_w = 0.011``. The wait of those who wait is exponential with M/M/c's rate ``cμ − λ`` (μ = 1/
(E[n] τ̄)), i.e. mean ``W τ̄/(M_kv − K̄)``, times the Allen–Cunneen factor ``(1 + c_s²)/2`` (c_s² of a request's
held work n(L + s) + n(n − 1)/2, the KV·time it occupies: Allen 1990, *Probability, Statistics and Queueing Theory*,
§6.4). Waiting requests hold no KV and run no step, so τ̄ and the TPOT model are unchanged. Measured against the
simulator in docs/queueing.md §7.

Engines: the simulator and TensorRT-LLM's ``GUARANTEED_NO_EVICT`` admit a request only when its final footprint fits;
vLLM admits on its prompt's blocks and preempts (recompute) when blocks run out, SGLang retracts
(docs/queueing.md §7). All three hold the fluid limit above; the footprint used is the growing context of §2.2
(vLLM/SGLang's occupancy), and the recompute work of a preemption is not priced.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr

from pdplan.queueing.decode import DecodeWorkload, LinearStepTime, decode_fixed_point, load_noise
from pdplan.queueing.link_delay import BinDelay, tail_bands
from pdplan.types import FloatArray

ADMISSION_POINTS = 8
"""Quantile points (plus the atom at 0) of the admission wait mixed into TTFT or TPOT (:func:`tail_bands`)."""


def kv_mean_rate(cells: DecodeWorkload, held: DecodeWorkload, step: LinearStepTime, kv_capacity_tokens: float) -> float:
    """Per-instance rate at which the mean KV occupancy ``λ τ̄ W`` reaches ``M_kv`` (module docstring; ``per`` from
    the ``cells``' context, W from their footprint ``held``)."""
    per = step.t1_s_per_seq * cells.mean_steps + step.t2_s_per_token * cells.mean_work
    return kv_capacity_tokens / (step.t0_s * held.mean_work + kv_capacity_tokens * per)


def work_scv(held: DecodeWorkload) -> float:
    """Squared coefficient of variation of a request's held KV work ``n(L + s) + n(n − 1)/2`` (token·steps)."""
    n, lin = held.decode_steps, held.input_tokens
    w = n * lin + n * (n - 1.0) / 2.0
    mean = float(held.prob @ w)
    return float(held.prob @ (w - mean) ** 2) / mean**2


@dataclass(frozen=True, slots=True)
class KvAdmission:
    """One decode instance's KV admission queue: the workload ``cells`` (decode steps), its footprint ``held`` (with
    the fixed state), the step law, the capacity, and the comfortable (P99) and fluid (mean) per-instance rates."""

    cells: DecodeWorkload
    held: DecodeWorkload
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
        k_mean = lt * self.held.mean_work
        sd = np.sqrt(lt * self.held.context_square_sum * factor)
        free = self.kv_capacity_tokens - k_mean
        beta = free / sd
        # β Φ(β)/φ(β) = β √(2π) exp(β²/2 + log Φ(β)): in logs, no overflow of exp(β²/2) before the ratio is formed
        ratio = beta * np.sqrt(2.0 * np.pi) * np.exp(np.minimum(beta**2 / 2.0 + log_ndtr(beta), 700.0))
        prob[beyond] = 1.0 / (1.0 + ratio)
        cond[beyond] = (1.0 + work_scv(self.held)) / 2.0 * self.held.mean_work * fixed.tau_mean_s / free
        return prob, cond

    def delay(self, rates_per_s: FloatArray, points: int = ADMISSION_POINTS) -> BinDelay:
        """The wait as a :class:`BinDelay` (one bin for all): an atom ``1 − P_w`` at 0 and ``points`` band quantiles
        of the exponential ``E[W | W > 0]``."""
        prob, cond = self.wait(rates_per_s)
        mids, widths = tail_bands(points)
        pts = np.concatenate((np.zeros((prob.size, 1)), -cond[:, None] * np.log1p(-mids[None, :])), axis=1)
        wts = np.concatenate(((1.0 - prob)[:, None], prob[:, None] * widths[None, :]), axis=1)
        return BinDelay(pts[:, None, :], wts[:, None, :])


def add_delays(first: BinDelay, second: BinDelay) -> BinDelay:
    """The sum of two independent per-bin delays (every pair of points, weights multiplied); a bin axis of length 1
    broadcasts over the other's bins."""
    r = first.points_s.shape[0]
    bins = max(first.points_s.shape[1], second.points_s.shape[1])
    pts = first.points_s[:, :, :, None] + second.points_s[:, :, None, :]
    wts = first.weights[:, :, :, None] * second.weights[:, :, None, :]
    shape = (r, bins, -1)
    return BinDelay(
        np.broadcast_to(pts, (r, bins, *pts.shape[2:])).reshape(shape),
        np.broadcast_to(wts, (r, bins, *wts.shape[2:])).reshape(shape),
    )
