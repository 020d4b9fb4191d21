"""SGLang's disaggregated decode admission, as the simulator's decode instances run it
(:class:`pdplan.sim.pd_decode_instance.PdDecodeInstance`, and PPD's, :class:`pdplan.sim.append_growth.PdAppendInstance`,
both through :class:`PdRule`).

Written from SGLang's decode server (sgl-project/sglang ``python/sglang/srt/disaggregation/decode.py``, stored copy
at commit 0035ca42c2d6, ``DecodePreallocQueue``), not from pdplan's closed form
(:func:`pdplan.queueing.kv_admission.decode_server_footprint`), which it checks. With R =
``num_reserved_decode_tokens`` (``SGLANG_NUM_RESERVED_DECODE_TOKENS``, 512 by default) and c =
``CLIP_MAX_NEW_TOKEN`` (``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``, 4096):

* **Allocatable tokens** (``_allocatable_token_budgets``): the free KV less ``max(R × (running + transferring +
  waiting requests), need_space_for_single_req)`` and less, for every retracted request, what its resumption needs
  (``_prealloc_required_tokens``: its context plus R). ``need_space_for_single_req`` is the largest
  ``len(origin_input_ids) + min(max_new_tokens, c)`` over the running requests less the tokens they hold
  (``retractable_tokens``, Σ input + output): room for any one of them to finish were the others retracted.
* **Admission** (``pop_preallocated``, FCFS, stop at the first that does not fit): a transferred request is taken
  while ``max(prompt + R, prompt + min(max_new_tokens, c) − retractable_tokens)`` fits the allocatable tokens, which
  are recomputed after each with one more request counted. Retracted requests are resumed first
  (``resume_retracted_reqs``: context + R against the allocatable tokens without the retracted ones' share).
* **Retraction** (``Scheduler.update_running_batch``, ``ScheduleBatch.retract_decode``): when the next decode step
  finds no free slot for every running request (``check_decode_mem``), requests are retracted one by one, the fewest
  output tokens first (ties: the longest prompt), until the step fits, always keeping one. On a decode server a
  retracted request's KV is offloaded to host memory and the request joins the prealloc queue's
  ``retracted_queue`` (``_add_request_to_queue(req, is_retracted=True)``); ``resume_retracted_reqs`` loads it back
  (``load_kv_cache``), so it resumes with the context it had, nothing recomputed.
* **The copy's time** (:attr:`PdDecodeAdmission.host_copy_s_per_token`): ``Req.offload_kv_cache`` and
  ``load_kv_cache`` (``python/sglang/srt/managers/schedule_batch.py``) call the pool's ``get_cpu_copy`` /
  ``load_cpu_copy``, which copy every layer's K and V of the request's tokens between ``torch.cuda.synchronize()``
  calls (``python/sglang/srt/mem_cache/memory_pool.py``, ``MHATokenToKVPool``, stored copy at commit 000ccdba94d4),
  on the scheduler's thread: no step runs while they copy. So the boundary that retracts is late by Σ over the
  retracted requests of their context × the seconds a KV token takes over the host link, and the boundary that
  resumes by Σ over the resumed ones likewise (:meth:`PdRule.copy_s`); every running request waits, the next step
  starting that much later. (SGLang copies ``seqlen − 1`` tokens, the last sampled token's KV not yet written; the
  simulator prices the context it holds, one token more.)

In the simulator's terms a request of prompt l and n decode steps has ``max_new_tokens`` n (its remaining output on
arrival) and, after j steps, holds l + j tokens (+ s fixed-state slots; windowed: min(l + j, w) + s). Left out: the
fixed state's copy (a hybrid model's recurrent state, priced at nothing), the host link's per-message latency and any
sharing of the host's PCIe root among a node's GPUs (each GPU copies its share over its own link), page rounding
(one token a page, SGLang's default), the prebuilt-extend pass that moves a transferred request into the running
batch (it joins at the boundary that admits it) and the preallocation itself happening *before* the KV transfer
(the simulator admits a request once its KV is ready, as for every engine).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from pdplan.errors import SpecError


class RunningBatch(Protocol):
    """What :class:`PdRule` reads of a decode instance's running batch (:class:`pdplan.sim.batch.ActiveSet`, which
    is not imported here: :mod:`pdplan.sim.spec` imports this module and ``batch`` imports ``spec``)."""

    b: int
    """Running requests."""
    s: int
    """Decode steps taken so far."""
    finish: list[tuple[int, int, int]]
    """(finish step, request, l − s at admission) of each running request."""


@dataclass(frozen=True, slots=True)
class PdDecodeAdmission:
    """SGLang's PD decode admission parameters (module docstring): R and the clip c; from the engine profile's
    ``pd_decode_reserved_tokens`` and ``kv_reserve_ratio.clip_tokens`` (:func:`pdplan.sim.deployment.pd_admission`)."""

    reserved_tokens: int
    """R, ``num_reserved_decode_tokens``: counted for every request the server holds."""
    clip_tokens: int
    """c, ``CLIP_MAX_NEW_TOKEN``: the clip on ``max_new_tokens`` in the one-request room check."""
    host_copy_s_per_token: float = 0.0
    """Seconds one context token's KV takes to copy to host memory, or back, on the decode instance (module
    docstring: each GPU's share of the token's KV over its host link,
    :func:`pdplan.sim.deployment.host_copy_s_per_token`); 0: the copy not priced."""

    def __post_init__(self) -> None:
        if not self.host_copy_s_per_token >= 0.0:
            raise SpecError(f"PD decode admission needs host_copy_s_per_token >= 0, got {self.host_copy_s_per_token}")
        if self.reserved_tokens < 0 or self.clip_tokens < 1:
            raise SpecError(f"PD decode admission needs reserved_tokens >= 0 and clip_tokens >= 1, got {self}")


class PdRule:
    """The rule's arithmetic over one decode instance's running batch (module docstring), which the plain PD decode
    instance (:class:`pdplan.sim.pd_decode_instance.PdDecodeInstance`) and PPD's append instance under SGLang
    (:class:`pdplan.sim.append_growth.PdAppendInstance`) both run: the need of a request in the pool, the one-request
    room, the admission need of a newcomer and the retraction victim. ``prompt`` and ``steps`` are the run's
    per-request prompt tokens l and decode steps n (``max_new_tokens``); ``state`` the fixed-state slots s and
    ``window`` w (inf: none) of a sequence."""

    __slots__ = ("clip", "copy_s_per_token", "prompt", "reserved", "state", "steps", "top", "window")

    def __init__(
        self, rule: PdDecodeAdmission, prompt: list[int], steps: list[int], state: float, window: float
    ) -> None:
        self.reserved = float(rule.reserved_tokens)
        self.clip = rule.clip_tokens
        self.copy_s_per_token = rule.host_copy_s_per_token
        self.prompt, self.steps, self.state, self.window = prompt, steps, state, window
        # the largest l + min(n, c) of any request: bounds the one-request room, which is computed only past it
        self.top = max((p + min(n, self.clip) for p, n in zip(prompt, steps, strict=True)), default=0)

    def need(self, context: int) -> float:
        """The KV a request of ``context`` tokens takes in the pool, with R: min(context, w) + s + R."""
        return min(context, self.window) + self.state + self.reserved

    def copy_s(self, context: int) -> float:
        """Seconds the offload (or the reload) of a request of ``context`` tokens stalls the instance: its KV tokens,
        min(context, w), × :attr:`PdDecodeAdmission.host_copy_s_per_token` (module docstring)."""
        return min(context, self.window) * self.copy_s_per_token

    def newcomer(self, req: int, retractable: float) -> float:
        """What a transferred request needs of the allocatable tokens: ``max(l + s + R, l + min(n, c) − K₀)``
        (``retractable``: K₀, the running requests' context before this boundary's admissions)."""
        prompt = self.prompt[req]
        return max(self.need(prompt), prompt + min(self.steps[req], self.clip) - retractable)

    def single(self, act: RunningBatch, retractable: float, held_requests: int) -> float:
        """``need_space_for_single_req``: the largest l + min(n, c) over the running requests less the tokens they
        hold (``retractable``); 0 with none running, −inf where it cannot exceed R × ``held_requests``
        (``top``), so that ``max(R·held, single)`` is R·held whatever the running requests."""
        if act.b == 0:
            return 0.0
        if self.top - retractable <= self.reserved * held_requests:
            return -math.inf
        prompt, steps, clip = self.prompt, self.steps, self.clip
        return max(prompt[req] + min(steps[req], clip) for _, req, _ in act.finish) - retractable

    def victim(self, act: RunningBatch) -> int:
        """The retraction victim: fewest output tokens (context − prompt), ties the longest prompt, then the latest
        request (``retract_decode`` sorts the batch by (output, −prompt) descending and pops from its end)."""
        s, prompt = act.s, self.prompt
        entries = ((offset + s - prompt[req], -prompt[req], -req) for _, req, offset in act.finish)
        return -min(entries)[2]
