"""The decode side of a PPD model (docs/prefix_cache.md §11; :mod:`pdplan.serving.ppd_model` places the turns):
the decode fixed point at the hit rates' rate on a given step (the plain step, or the step stretched by the appends'
load, :mod:`pdplan.serving.ppd`), and the instance's capacity and KV admission queue recomputed on the stretched step,
as :mod:`pdplan.serving.disaggregated` builds them for plain disaggregation; and the spread the appends give each
request's mean token interval (:class:`AppendNoise`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdplan.queueing import DecodeCapacity, decode_fixed_point
from pdplan.queueing.decode import LinearStepTime
from pdplan.queueing.distributions import GammaMixture
from pdplan.queueing.kv_admission import KvAdmission, RidingKvAdmission, pd_decode_reserved_tokens
from pdplan.queueing.linear_capacity import fast_decode_capacity
from pdplan.serving.decode_recompute import decode_admission
from pdplan.serving.limits import DECODE_U_MAX
from pdplan.serving.roles import DecodePerf
from pdplan.types import FloatArray


@dataclass(frozen=True, slots=True)
class DecodeAt:
    """The decode side at the hit rates' rate: step, mean batch per rank, step boundary's busy share, free KV."""

    tau_s: float
    batch: float
    busy: float
    free_tokens: float


def decode_at(model: Any, rate_rps: float, step: LinearStepTime, capacity: DecodeCapacity | None = None) -> DecodeAt:
    """The decode fixed point on ``step`` at ``rate_rps``; past that step's stable range, at 0.99 of the capacity on
    it (``capacity``: the one :func:`decode_side` found on ``step``; None: on the model's own plain step). The clamp
    reads the capacity of the step priced: a step stretched by the appends' load has a lower capacity than the plain
    one, and its fixed point at the plain capacity has no solution (an unbounded step, the decode rows' offsets then
    ``0·∞``: the agent-dualpath example with ``turn_placement: ppd``, issue #24)."""
    y, dp = model.y, model.res.hardware.decode.dp
    if capacity is None:
        if step != model.decode.step:
            _, capacity = decode_side(model, step)
        else:
            capacity = model.capacity
    rate = min(rate_rps, 0.99 * y * capacity.utilisation_rate_per_s)
    try:
        fixed = decode_fixed_point(np.array([rate / y]), model.cells, step)
    except ValueError:
        return DecodeAt(math.inf, 1.0, 1.0, 0.0)
    resident = float(fixed.mean_context_tokens[0] + model.decode.state_tokens_per_seq * fixed.mean_seqs[0])
    free = max(model.decode.kv_capacity_tokens - resident, 0.0) / dp
    seqs = float(fixed.mean_seqs[0])
    return DecodeAt(float(fixed.tau_mean_s[0]), seqs / dp, float(-math.expm1(-seqs)), free)


def stretch(rho: float) -> float:
    """``1/(1 − ρ_a)``, the factor the appends' load ρ_a stretches a decode step by (ρ_a capped at ``DECODE_U_MAX``;
    :mod:`pdplan.serving.ppd`). Example: ρ_a = 0.2: 1.25."""
    return 1.0 / (1.0 - min(max(rho, 0.0), DECODE_U_MAX))


def scaled(step: LinearStepTime, rho: float) -> LinearStepTime:
    """The step stretched by :func:`stretch` of ρ_a."""
    factor = stretch(rho)
    return LinearStepTime(step.t0_s * factor, step.t1_s_per_seq * factor, step.t2_s_per_token * factor)


def decode_side(model: Any, step: LinearStepTime) -> tuple[DecodePerf, DecodeCapacity]:
    """The decode instance's perf and capacity on the stretched step, its KV bound on the footprint its server admits
    on (as :mod:`pdplan.serving.disaggregated`: SGLang's PD decode server counts each request's context plus R,
    :func:`~pdplan.queueing.kv_admission.pd_decode_reserved_tokens`; :func:`kv_admission`)."""
    decode = dataclasses.replace(model.decode, step=step)
    capacity = fast_decode_capacity(
        model.cells,
        step,
        kv_capacity_tokens=decode.kv_capacity_tokens,
        max_num_seqs=decode.max_num_seqs,
        utilisation_max=DECODE_U_MAX,
        state_tokens_per_seq=decode.state_tokens_per_seq,
        reserved_tokens_per_seq=pd_decode_reserved_tokens(model.res.engine.scheduling),
    )
    return decode, capacity


def kv_admission(model: Any, decode: DecodePerf, cap: DecodeCapacity, rho: float) -> KvAdmission | RidingKvAdmission:
    """One decode instance's KV admission queue on the stretched step, the plain disaggregated decode's
    (:func:`pdplan.serving.decode_recompute.decode_admission`) at the appends' load ``rho`` (ρ_a): the queue on the
    footprint its decode server admits on, and vLLM's pinned queue with its preemptions' recompute, whose seconds the
    appends stretch as they stretch the step (:func:`stretch`; :mod:`pdplan.serving.decode_recompute`, *PPD's decode
    instances*). A turn placed on decode is a request of that server like any other: its cell's prompt is the whole
    prompt (history h plus append m), its context grows from there, and SGLang's rule counts it at that context plus
    R (``num_reserved_decode_tokens``) while it runs, as ``_allocatable_tokens`` counts every running, transferring
    or waiting request. The histories the instance keeps between a session's turns are not requests: they sit in the
    free KV as evictable prefix-cache blocks (:mod:`pdplan.serving.ppd`), which ``_allocatable_tokens`` counts as
    free (the decode radix cache's ``evictable_size``) and charges no R, and which vLLM keeps in its free block queue
    with their hashes, for any request to take (:mod:`pdplan.queueing.kv_admission`, *Preemption with recompute*),
    so they do not enter the footprint; a held history is counted, with its R, only from the moment its next turn
    is admitted on it."""
    return decode_admission(model.res, model.cells, decode, cap, stretch(rho))


@dataclass(frozen=True, slots=True)
class AppendNoise:
    """The spread the appends give a request's TPOT on the stretched step (issue #24).

    The stretched step ``τ' = τ_p/(1 − ρ_a)`` puts every request's mean token interval at τ': the appends' work
    spread evenly over the steps. A request's n steps carry the work of the appends that arrive during its stay
    instead, a Poisson number of them (:mod:`pdplan.sim.decode_append`: a mixed step lasts the plain step plus its
    appends' work, which every co-running sequence waits for). Its interval sum is ``n·τ_p + A``, A the appends'
    work in its steps: appends arrive at rate λ_a per instance over the stay, and each one's work w stretches the
    stay by w, during which Poisson(λ_a·w) more arrive and ride in it. So A is a compound Poisson sum over the
    ``λ_a·n·τ_p`` appends arriving in the stay's plain part of *clusters*, an append and the appends its work lets in
    (a Galton–Watson tree whose offspring is Poisson(λ_a·w)). A cluster's work Y = w + Σ_{j ≤ N(w)} Y_j, N(w) ~
    Poisson(λ_a·w), has ``E[Y] = E[w]/(1 − ρ_a)`` and, from ``E[Y²] = E[w²] + 2λ_a·E[w²]·E[Y] + λ_a·E[w]·E[Y²] +
    λ_a²·E[w²]·E[Y]²``, ``E[Y²] = E[w²]·(1 + λ_a·E[Y])²/(1 − ρ_a) = E[w²]/(1 − ρ_a)³`` (ρ_a = λ_a·E[w]). Then
    ``E[A] = λ_a·n·τ_p·E[Y] = n·ρ_a·τ'`` (the stretched step's mean, unchanged) and

        Var A = λ_a·n·τ_p·E[Y²] = λ_a·n·τ'·E[w²]/(1 − ρ_a)²,    Var X̄(n) += λ_a·τ'·E[w²] / ((1 − ρ_a)²·n)

    added to each cell's load variance of :func:`pdplan.queueing.tpot_distribution` (the appends' arrivals are
    independent of the batch's own fluctuations). With the agent example at 18.1 req/s (λ_a ≈ 4.5/s, τ' ≈ 28 ms,
    w ≈ 70 ms, ρ_a ≈ 0.31, n = 175): a standard deviation of ~2.8 ms on the 28 ms mean interval. Left out: the
    load's imbalance over the instances under session-affine routing (each instance's λ_a and batch differ)."""

    appends_per_request: float
    """λ_a over the model's rate: the share of requests placed on decode over the decode instances (``s_D/y``)."""
    work_sq_s2: float
    """E[w²] over the placed appends."""
    rho: float
    """ρ_a, the model's (the step is stretched by it at every rate; capped at ``DECODE_U_MAX``)."""

    def var_s2(self, rates_rps: FloatArray, tau_s: FloatArray, steps: FloatArray) -> FloatArray:
        """``[R, M]`` the added variance of X̄(n) at the model's rates ``[R]``, mean steps τ' ``[R]`` and cells' steps
        ``[M]`` (class docstring)."""
        rho = min(max(self.rho, 0.0), DECODE_U_MAX)
        lam = self.appends_per_request * np.asarray(rates_rps, dtype=np.float64)
        per_step = lam * np.asarray(tau_s, dtype=np.float64) * self.work_sq_s2 / (1.0 - rho) ** 2
        n = np.maximum(np.asarray(steps, dtype=np.float64), 1.0)
        return np.asarray(per_step[:, None] / n[None, :], dtype=np.float64)

    def tpot(self, law: GammaMixture, rates_rps: FloatArray, tau_s: FloatArray, steps: FloatArray) -> GammaMixture:
        """``law`` with :meth:`var_s2` added to its load variance."""
        return dataclasses.replace(law, load_var_s2=law.load_var_s2 + self.var_s2(rates_rps, tau_s, steps))
