"""One disaggregated decode instance: step-level continuous batching (docs/queueing.md §2, §5.4 item 2).

Model and policy:

* A request becomes *ready* when its KV has arrived (prefill done + transfer, see
  :class:`~pdplan.sim.spec.KvTransfer`). Ready requests wait in an FCFS queue (ordered by ready
  time).
* Admission happens only at a step boundary (or at once when the instance is idle): the queue head
  is admitted while ``B < max_batch`` and ``kv_used + l + n + s ≤ kv_capacity_tokens`` (s: the slots of a
  hybrid's fixed state; every layer windowed: min(l + n, w) + s, as it never holds more than the window w). A
  request reserves its final footprint ``l + n + s`` at admission and releases it at
  completion, so no preemption is ever needed; the queue is strictly FCFS (a head that does not fit blocks the
  requests behind it — head-of-line blocking, no skipping). That is TensorRT-LLM's rule; an engine whose decode
  server admits on its own rule runs its own instance: SGLang's ``num_reserved_decode_tokens``
  (:class:`~pdplan.sim.pd_decode_instance.PdDecodeInstance`, ``DecodePool.pd_admission``) and vLLM's growth on
  demand with preemption and recompute (:class:`~pdplan.sim.preempt_decode.PreemptDecodeInstance`,
  ``DecodePool.recompute``).

  *Why reservation for TensorRT-LLM.* Its disaggregated generation server runs the same capacity scheduler
  as a colocated one (``GuaranteedNoEvictScheduler``, its default ``GUARANTEED_NO_EVICT`` policy), which admits a
  request, a ``DISAGG_GENERATION_INIT`` one included, only while the blocks of its whole remaining sequence fit
  beside the running requests' (NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp``,
  ``GuaranteedNoEvictScheduler::impl``): the reservation here. Until 2026-12-07 vLLM's decode instances reserved
  too (their recompute was not priced on a decode instance).
* Each step lasts ``decode_step_s(B, K)`` with K the current total context (``l_i + j_i``); every
  active sequence gains one token. A sequence admitted at the boundary of step s finishes at the end
  of step ``s + n − 1``; under convention A its first token is sampled at the end of step s and, with an overlap
  scheduler of k extra steps (``DecodeSetup.overlap_steps``), reaches the client at the end of step s + k
  (:mod:`pdplan.sim.overlap_lag`; at once where the instance goes idle first).
* Step times between events are planned in one vectorised call (:class:`~pdplan.sim.batch.ActiveSet`);
  an event is the next completion, or the first boundary at or after the next ready time when a seat
  may be free. Ties: a request ready exactly at a boundary is admitted at that boundary.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from pdplan.sim.batch import ActiveSet, Segments, Timeline
from pdplan.sim.overlap_lag import OverlapLag
from pdplan.sim.spec import StepTimeFn
from pdplan.types import FloatArray

_EMPTY: FloatArray = np.zeros(0, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class DecodeSetup:
    """What every decode instance of a run is built from (the engine's pool and its per-request records)."""

    step_fn: StepTimeFn
    max_batch: int
    kv_capacity_tokens: float
    prompt: list[int]
    steps: list[int]
    timeline: Timeline
    segments: Segments
    emits_first_token: bool
    state_tokens: float = 0.0
    overlap_steps: int = 0
    """Iterations token 1 waits behind the step that sampled it (the engine's overlap scheduler,
    :mod:`pdplan.sim.overlap_lag`)."""


class DecodeInstance:
    """State of one decode instance; driven by the engine via ``submit`` and ``fire``."""

    def __init__(self, setup: DecodeSetup, window: float | None = None) -> None:
        self.act = ActiveSet(setup.step_fn, window)
        self.max_batch = setup.max_batch
        self.kv_cap = setup.kv_capacity_tokens
        self.state = setup.state_tokens  # fixed-state slots per sequence (DecodePool.state_tokens_per_seq)
        self.window = math.inf if window is None else window  # DecodePool.window_tokens
        self.kv_used = 0.0
        self.prompt = setup.prompt
        self.steps = setup.steps
        self.tl = setup.timeline
        self.seg = setup.segments
        self.emits_first_token = setup.emits_first_token
        self.lag = OverlapLag(setup.overlap_steps, setup.timeline)
        self.t = 0.0  # time of the last processed boundary
        self.pending: list[tuple[float, int]] = []  # heap (ready time, request): KV not yet here
        self.waiting: deque[int] = deque()  # ready, not admitted (FCFS)
        self.bounds = _EMPTY  # end times of the planned steps, relative to self.t
        self.next_k = -1  # index in bounds of the next event (-1: idle)
        self.next_time = math.inf
        self.load = 0  # routed here and not finished (routing key)

    def submit(self, req: int, ready_s: float) -> None:
        """Route request ``req`` here; its KV is ready at ``ready_s`` (≥ the current time)."""
        heapq.heappush(self.pending, (ready_s, req))
        self.load += 1
        if self.act.b == 0:
            self.next_time = min(self.next_time, ready_s)
        elif ready_s < self.next_time and not self.waiting and self.act.b < self.max_batch:
            k = int(np.searchsorted(self.bounds, ready_s - self.t))
            if k < self.next_k:
                self.next_k = k
                self.next_time = self.t + float(self.bounds[k])

    def fire(self) -> list[int]:
        """Process the boundary at ``next_time``; return the requests that finished there."""
        now = self.next_time
        act = self.act
        if act.b > 0:
            k = self.next_k + 1
            self.seg.add(self.t, now, act.b, k)
            self.lag.ended((self.t + self.bounds[:k]).tolist())
            act.s += k
        self.t = now
        done = act.pop_finished()
        finish = self.tl.finish
        for req in done:
            finish[req] = now
        self._released(done)
        self.load -= len(done)
        admitted = self._admit(now)
        self._plan(admitted)
        return done

    def _released(self, done: list[int]) -> None:
        """The finished requests ``done`` give back the KV they reserved."""
        for req in done:
            self.kv_used -= self._footprint(req)

    def _footprint(self, req: int) -> float:
        """The KV slots request ``req`` reserves: min(l + n, w) + s (module docstring)."""
        return min(self.prompt[req] + self.steps[req], self.window) + self.state

    def _admit(self, now: float) -> list[int]:
        pending, waiting = self.pending, self.waiting
        while pending and pending[0][0] <= now:
            waiting.append(heapq.heappop(pending)[1])
        admitted: list[int] = []
        act = self.act
        while waiting and act.b < self.max_batch:
            req = waiting[0]
            need = self._footprint(req)
            if self.kv_used + need > self.kv_cap:
                break
            waiting.popleft()
            self.kv_used += need
            act.add(req, self.prompt[req], self.steps[req])
            self.tl.admit[req] = now
            admitted.append(req)
        return admitted

    def _plan(self, admitted: list[int]) -> None:
        if self.act.b == 0:
            self.lag.idle(self.t)
            self.bounds = _EMPTY
            self.next_k = -1
            self.next_time = self.pending[0][0] if self.pending else math.inf
            return
        bounds = self.act.segment()
        if self.emits_first_token and admitted:
            first = self.t + float(bounds[0])
            for req in admitted:
                self.lag.sampled(req, first)
        k = bounds.size - 1
        if self.pending and not self.waiting and self.act.b < self.max_batch:
            k = min(k, int(np.searchsorted(bounds, self.pending[0][0] - self.t)))
        self.bounds = bounds
        self.next_k = k
        self.next_time = self.t + float(bounds[k])

    def _cut_at_room(self, room_tokens: float, grows: int) -> None:
        """End the planned decode segment at its last step that fits: with ``room_tokens`` KV slots left after the
        next step and ``grows`` sequences taking one more slot a step, steps k = 0..⌊room/grows⌋ fit (none past the
        pool: the boundary after them retracts or preempts, as the engine does). Used by the instances whose pool
        holds the growing context."""
        last = max(int(room_tokens // grows), 0)
        if last < self.next_k:
            self.next_k = last
            self.next_time = self.t + float(self.bounds[last])


class MixedStepInstance(DecodeInstance):
    """A decode instance whose steps may be mixed (a prefill riding the decode step): :attr:`plan` holds the
    (request, tokens) of the mixed step under way, empty between; a request whose KV is ready during one waits for
    its end (:class:`~pdplan.sim.decode_append.AppendDecodeInstance`, PPD's appends;
    :class:`~pdplan.sim.preempt_decode.PreemptDecodeInstance`, vLLM's recomputes)."""

    plan: list[tuple[int, int]]

    def submit(self, req: int, ready_s: float) -> None:
        """As :meth:`DecodeInstance.submit`; during a mixed step the request waits for its end."""
        if self.plan:
            heapq.heappush(self.pending, (ready_s, req))
            self.load += 1
            return
        super().submit(req, ready_s)
