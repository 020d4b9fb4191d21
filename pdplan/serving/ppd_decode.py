"""The decode side of a PPD model (docs/prefix_cache.md §11; :mod:`pdplan.serving.ppd_model` places the turns):
the decode fixed point at the hit rates' rate on a given step (the plain step, or the step stretched by the appends'
load, :mod:`pdplan.serving.ppd`), and the instance's capacity and KV admission queue recomputed on the stretched step,
as :mod:`pdplan.serving.disaggregated` builds them for plain disaggregation."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdplan.queueing import DecodeCapacity, decode_fixed_point
from pdplan.queueing.decode import LinearStepTime
from pdplan.queueing.kv_admission import KvAdmission, kv_held, kv_mean_rate
from pdplan.queueing.linear_capacity import fast_decode_capacity
from pdplan.serving.limits import DECODE_U_MAX
from pdplan.serving.roles import DecodePerf


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


def scaled(step: LinearStepTime, rho: float) -> LinearStepTime:
    """The step stretched by ``1/(1 − ρ_a)`` (ρ_a capped at ``DECODE_U_MAX``; :mod:`pdplan.serving.ppd`)."""
    factor = 1.0 / (1.0 - min(max(rho, 0.0), DECODE_U_MAX))
    return LinearStepTime(step.t0_s * factor, step.t1_s_per_seq * factor, step.t2_s_per_token * factor)


def decode_side(model: Any, step: LinearStepTime) -> tuple[DecodePerf, DecodeCapacity]:
    """The decode instance's perf and capacity on the stretched step."""
    decode = dataclasses.replace(model.decode, step=step)
    capacity = fast_decode_capacity(
        model.cells,
        step,
        kv_capacity_tokens=decode.kv_capacity_tokens,
        max_num_seqs=decode.max_num_seqs,
        utilisation_max=DECODE_U_MAX,
        state_tokens_per_seq=decode.state_tokens_per_seq,
    )
    return decode, capacity


def kv_admission(model: Any, decode: DecodePerf, cap: DecodeCapacity) -> KvAdmission:
    """One decode instance's KV admission queue on the stretched step (as :mod:`pdplan.serving.disaggregated`)."""
    reserve = model.res.engine.scheduling.kv_admission == "reserve"
    held = kv_held(model.cells, decode.state_tokens_per_seq, reserve=reserve)
    mean = kv_mean_rate(model.cells, held, decode.step, decode.kv_capacity_tokens)
    return KvAdmission(
        model.cells, held, decode.step, decode.kv_capacity_tokens, cap.kv_rate_per_s, max(mean, cap.kv_rate_per_s)
    )
