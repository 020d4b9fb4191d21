"""A disaggregated decode instance's KV admission queue, with vLLM's preemption and recompute priced (issue #23 item 5).

Every engine's disaggregated decode instance queues for KV past its comfortable (P99) limit on the footprint its
server admits on (:func:`pdplan.queueing.kv_admission.decode_server_admission`). vLLM's (``kv_admission:
on_demand``, without a ``pd_decode_reserved_tokens``) admits a transferred request on its prompt's blocks, grows on
demand and, when a running request's next block cannot be allocated, preempts the newest running request, which is
recomputed *on the decode instance* by a local prefill (the source, quoted, in :mod:`pdplan.queueing.kv_admission`,
*A disaggregated decode instance*). So its queue is the colocated ``on_demand`` one
(:func:`~pdplan.queueing.kv_admission.pinned_decode_admission`: the pinned limit with f·r of recompute per request,
the Halfin–Whitt wait at the step that recompute stretches, the recompute's stretch of τ̄) with no riding prefill of
its own, and one piece this module prices:

r, the seconds one preemption's recompute adds to the decode steps that carry it. The recompute computes c̄ =
min(E[L] + s, E[n]) tokens over the E[L] − c̄ of the victim's context its prefix cache still holds
(:func:`~pdplan.queueing.kv_admission.recompute_tokens`), in chunks of the engine's token budget riding the decode
steps of a pinned pool, N̄ = M_kv·E[n]/W sequences (:func:`~pdplan.queueing.kv_admission.pinned_batch`): exactly the
price of a PPD append-prefill on a decode instance (:func:`pdplan.serving.append_price.append_work_s`:
``G(N̄ + c) − G(N̄)`` per chunk of c tokens plus the chunk's causal attention over the keys before it, on the decode
role's own tables), which is used as it is (one source of truth). N̄ does not depend on the rate, so neither does r.

Left out: PPD's decode instances keep the plain queue (:mod:`pdplan.serving.ppd_decode`), and the recompute's chunks
are priced at the pinned batch, not at the batch of the steps that carry them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pdplan.queueing.kv_admission import (
    KvAdmission,
    RidingKvAdmission,
    decode_server_admission,
    decode_server_footprint,
    pd_decode_reserved_tokens,
    pinned_batch,
    pinned_decode_admission,
    recompute_tokens,
)
from pdplan.serving.append_price import append_work_s

if TYPE_CHECKING:
    from pdplan.queueing import DecodeCapacity, DecodeWorkload
    from pdplan.serving.resolve import DisaggregatedHardware, ResolvedScenario
    from pdplan.serving.role_hardware import RoleHardware
    from pdplan.serving.roles import DecodePerf


def preempts(res: ResolvedScenario[DisaggregatedHardware]) -> bool:
    """Whether the decode instances preempt and recompute (module docstring): ``on_demand`` without a decode server
    rule of its own (``pd_decode_reserved_tokens``)."""
    scheduling = res.engine.scheduling
    return scheduling.kv_admission == "on_demand" and pd_decode_reserved_tokens(scheduling) == 0.0


def recompute_s(
    hw: RoleHardware, cells: DecodeWorkload, decode: DecodePerf, batch: float, budget_tokens: float
) -> float:
    """r: the seconds one preemption's recompute adds to the decode steps carrying it on a decode instance of
    ``hw`` running ``batch`` sequences (module docstring): :func:`pdplan.serving.append_price.append_work_s` of c̄ new
    tokens over max(E[L] − c̄, 0) cached ones, in chunks of ``budget_tokens``."""

    _, lost, _ = recompute_tokens(cells, decode.state_tokens_per_seq)
    cached = max(float(cells.prob @ cells.input_tokens) - lost, 0.0)
    work, _ = append_work_s(hw, batch, np.array([lost]), np.array([cached]), budget_tokens)
    return float(work[0])


def decode_admission(
    res: ResolvedScenario[DisaggregatedHardware], cells: DecodeWorkload, decode: DecodePerf, cap: DecodeCapacity
) -> KvAdmission | RidingKvAdmission:
    """One disaggregated decode instance's KV admission queue: the pinned ``on_demand`` queue where the instances
    preempt (:func:`preempts`; r by :func:`recompute_s` at the pinned batch), else the queue on the footprint its
    server admits on (:func:`~pdplan.queueing.kv_admission.decode_server_admission`)."""
    scheduling, m, state = res.engine.scheduling, decode.kv_capacity_tokens, decode.state_tokens_per_seq
    if not preempts(res):
        return decode_server_admission(cells, state, scheduling, decode.step, m, cap.kv_rate_per_s)
    held = decode_server_footprint(cells, state, scheduling)
    share, _, _ = recompute_tokens(cells, state)
    r = recompute_s(res.hardware.decode, cells, decode, pinned_batch(held, cells, m), res.chunk_tokens)
    return pinned_decode_admission(cells, held, decode.step, m, cap.kv_rate_per_s, share, r)
