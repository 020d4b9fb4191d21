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

**PPD's decode instances** (:func:`pdplan.serving.ppd_decode.kv_admission`, on the model
:func:`pdplan.serving.ppd_model.place_turns` builds) take the same queue, so the placed model's stability limit,
comfortable limit and TPOT follow the plain model's paths (:mod:`pdplan.serving.disaggregated`). Its cells are the
plain model's: a turn placed on decode is a request of the instance like any other, its prompt the whole prompt
(history plus append), its context growing from there, the newest admitted (the victim) holding ≈ E[L] + s. Its step
is the one the appends stretch, ``(t0, t1, t2)/(1 − ρ_a)`` (:mod:`pdplan.serving.ppd`). The appends take ρ_a of the
instance's time and the recompute λπr (π preemptions a request, r seconds each), so the mean step solves
``τ̄ = t0 + λτ̄·per + ρ_a·τ̄ + λπr·τ̄``, i.e. ``τ̄ = t0/(1 − ρ_a − λ(per + πr)) = t0'/(1 − λ(per' + πr'))`` with the
stretched ``t0' = t0/(1 − ρ_a)``, ``per' = per/(1 − ρ_a)`` and ``r' = r/(1 − ρ_a)``: r is stretched as the step is
(:func:`decode_admission`'s ``stretch``), and ``λ_pin = M/(t0' W + M(per' + f r'))`` is the plain pinned limit times
(1 − ρ_a), the time the appends leave. Example: ρ_a = 0.2, t0 = 10 ms, per = 1 ms, W = 100, M = 2,000, f = 0.5,
r = 1 ms: λ_pin = 0.8 · 500 = 400 /s (tests/unit/test_ppd_decode_admission.py). More generally every term of the
queue reads the rate only as λ times a stretched time (λτ̄, λ·t1', λ·t2' in the load feedback, λ·r'), so the PPD
instance at λ is the plain one at λ/(1 − ρ_a) with its times stretched: its comfortable limit too is the plain one
times 1 − ρ_a (equal to 1e-9 in that test's chat-ppd 2P1D plan). The histories the instance keeps
between a session's turns are freed blocks in vLLM's free block queue, their hashes kept, which any request may take
(*Preemption with recompute* in :mod:`pdplan.queueing.kv_admission`: a preempted request's blocks are hits only where
no other request took them in between), so they are free KV, not footprint.

Left out: the recompute's chunks are priced at the pinned batch, not at the batch of the steps that carry them; ρ_a is
the appends' load at the rate the hit rates hold at (the PPD model's one stretch), not at each rate; and a pinned
PPD instance takes the free blocks its held histories sit in (the least recently used first), so past the
comfortable limit the turns placed on decode find fewer histories than the placement's hit rates assume.
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
    res: ResolvedScenario[DisaggregatedHardware],
    cells: DecodeWorkload,
    decode: DecodePerf,
    cap: DecodeCapacity,
    stretch: float = 1.0,
) -> KvAdmission | RidingKvAdmission:
    """One disaggregated decode instance's KV admission queue: the pinned ``on_demand`` queue where the instances
    preempt (:func:`preempts`; r by :func:`recompute_s` at the pinned batch, times ``stretch``), else the queue on the
    footprint its server admits on (:func:`~pdplan.queueing.kv_admission.decode_server_admission`). ``stretch``: the
    factor 1/(1 − ρ_a) by which the appends PPD places on the instance stretch its steps (``decode.step`` is already
    the stretched one; module docstring, *PPD's decode instances*); 1 for plain disaggregation."""
    scheduling, m, state = res.engine.scheduling, decode.kv_capacity_tokens, decode.state_tokens_per_seq
    if not preempts(res):
        return decode_server_admission(cells, state, scheduling, decode.step, m, cap.kv_rate_per_s)
    held = decode_server_footprint(cells, state, scheduling)
    share, _, _ = recompute_tokens(cells, state)
    r = recompute_s(res.hardware.decode, cells, decode, pinned_batch(held, cells, m), res.chunk_tokens)
    return pinned_decode_admission(cells, held, decode.step, m, cap.kv_rate_per_s, share, r * stretch)
