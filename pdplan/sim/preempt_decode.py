"""A disaggregated decode instance that grows on demand and preempts with recompute, as vLLM V1's does.

Written from vLLM's scheduler and its NixlConnector (vllm-project/vllm ``vllm/v1/core/sched/scheduler.py``
``Scheduler.schedule``, ``_preempt_request`` and ``_update_waiting_for_remote_kv`` @
00024d314514900f361ad072af6931e403b7f589; ``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py``
``NixlConnectorScheduler.get_num_new_matched_tokens`` and ``update_state_after_alloc`` @
002a1057e9ae674d7bdc9c4be95bc29d65d2e808), not from pdplan's closed form (:mod:`pdplan.serving.decode_recompute`),
which it checks. It is :class:`~pdplan.sim.decode.DecodeInstance` (continuous batching, FCFS admission at step
boundaries) with the pool holding each running request's growing context, ``min(l + j, w) + s`` after j steps, plus
the token its next step writes (vLLM allocates a step's slots before running it). At every boundary, after the
completions:

1. *Preemption*: while the next step does not fit the pool (the batch's context plus ``B·(1 + s)`` and the recomputes
   in progress, over M), the newest running request (the last to join the decode batch: ``self.running.pop()`` under
   the FCFS policy) leaves it with its context and steps left, and goes to the head of the waiting queue
   (``waiting.prepend_request``). A boundary that preempted admits nothing (``if not preempted_reqs``).
2. *Admission*, FCFS, while a seat is free: a request whose KV arrived needs its prompt's ``min(l, w) + s`` (the
   connector's ``get_num_new_matched_tokens``: "get all prompt blocks from remote"); a preempted one its context's
   ``min(c, w) + s``, of which its own blocks still in the free block queue are prefix-cache hits (vLLM V1's default;
   :class:`~pdplan.sim.recompute_hits.FreedQueue`, the colocated simulator's). The head that does not fit blocks the
   rest.
3. *Recompute*: the connector consumed the remote-prefill parameters at the first admission ("Only trigger 1 KV
   transfer per request"), so an admitted victim's missed tokens are prefilled here. While one is in progress every
   iteration is a mixed step, as PPD's appends (:mod:`pdplan.sim.decode_append`): the B decoding sequences advance a
   token and up to ``budget − B`` recompute tokens ride along, FCFS, the step lasting ``decode_step_s(B, K) +
   Σ chunk_s(c_i, before_i, B)`` (:class:`pdplan.sim.deployment.SimChunkPrice` of the decode hardware). A finished
   recompute rejoins the decode batch, newest, with the steps it had left; its token 1 is not emitted again.

Between boundaries a decode segment is cut at the first step that would not fit (the pool grows by one token a
growing sequence a step), so that boundary preempts. Left out, as in the colocated simulator: a victim among the
requests still recomputing (vLLM's ``running`` holds them too, newest), the token vLLM samples at a recompute's last
chunk (left to the next decode step), block rounding, and the prompt's blocks being allocated before the transfer
(the simulator admits a request once its KV is ready, as for every engine).

Example (M = 1,000, no state or window, budget 512): two running requests of 500 and 480 tokens hold 980 + 2 = 982
for the next step; a third of 30 waits (982 + 30 > 1,000). Nine steps later the two hold 998 + 2 > 1,000: the
newest (480 + 9 = 489 tokens) is preempted, the other runs alone (500 + 9 + 1 = 510), and the victim, readmitted
at the next boundary (510 + 489 ≤ 1,000), recomputes the tokens the step's allocation took from its freed blocks
(more hand-worked cases: tests/unit/test_sim_preempt_decode.py).
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from pdplan.sim.decode import DecodeSetup, MixedStepInstance
from pdplan.sim.recompute_hits import FreedQueue
from pdplan.sim.spec import DecodeRecompute


class PreemptDecodeInstance(MixedStepInstance):
    """A decode instance on vLLM's on-demand growth and preemption with recompute (module docstring)."""

    def __init__(self, setup: DecodeSetup, work: DecodeRecompute, window: float | None = None) -> None:
        super().__init__(setup, window)
        self.work = work
        self.running: dict[int, None] = {}  # decoding requests in join order (the last is preempted)
        self.resumed: dict[int, tuple[int, int]] = {}  # victim → (context to recompute, steps left)
        self.left: dict[int, int] = {}  # admitted victim → tokens still to recompute
        self.prefilling: deque[int] = deque()  # admitted victims, FCFS
        self.plan: list[tuple[int, int]] = []  # (victim, tokens) of the mixed step under way
        self.lru = FreedQueue(self.kv_cap) if work.hits else None
        self.preemptions = 0  # a count for checks and benchmarks

    def fire(self) -> list[int]:
        """Process the boundary at ``next_time`` (a mixed step's end or a decode segment's event)."""
        now, act = self.next_time, self.act
        if self.plan:
            self.seg.add(self.t, now, act.b, 1 if act.b else 0)
            self.lag.ended((now,))
            self._taken(act.b)
            act.s += 1
        elif act.b > 0:
            k = self.next_k + 1
            self.seg.add(self.t, now, act.b, k)
            self.lag.ended((self.t + self.bounds[:k]).tolist())
            self._taken(k * act.b)
            act.s += k
        self.t = now
        done = act.pop_finished()
        for req in done:
            self.tl.finish[req] = now
            del self.running[req]
            if self.lru is not None:
                self.lru.freed(self._held_tokens(self.prompt[req] + self.steps[req]))
        for req, tokens in self.plan:
            self.left[req] -= tokens
            if self.left[req] == 0:
                self._recomputed(req)
        self.plan = []
        self.load -= len(done)
        held = self._make_room() and (act.b > 0 or bool(self.prefilling))  # an emptied instance admits at once
        admitted = self._admit(now, held)
        self._plan(admitted)
        return done

    def _held_tokens(self, context: int) -> float:
        """The KV slots a sequence of ``context`` tokens holds: min(context, w) + s."""
        return min(context, self.window) + self.state

    def _taken(self, tokens: float) -> None:
        """Allocations from the free block queue (:mod:`pdplan.sim.recompute_hits`)."""
        if self.lru is not None:
            self.lru.taken(tokens)

    def _next_step(self) -> float:
        """The pool the next step needs: the batch's context, a token and s a sequence, the recomputes in progress."""
        return self.act.context() + self.act.b * (1.0 + self.state) + self.kv_used

    def _make_room(self) -> bool:
        """Preempt the newest running requests until the next step fits (module docstring, 1); whether any was."""
        act, preempted = self.act, False
        while act.b and self._next_step() > self.kv_cap:
            req, _ = self.running.popitem()
            context, left = act.remove(req)
            self.resumed[req] = (context, left)
            if self.lru is not None:
                self.lru.preempted(req, self._held_tokens(context))
            self.waiting.appendleft(req)
            self.preemptions += 1
            preempted = True
        return preempted

    def _admit(self, now: float, held: bool = False) -> list[int]:
        """FCFS admission (module docstring, 2); nothing where this boundary preempted (``held``)."""
        pending, waiting, act = self.pending, self.waiting, self.act
        while pending and pending[0][0] <= now:
            waiting.append(heapq.heappop(pending)[1])
        admitted: list[int] = []
        while not held and waiting and act.b + len(self.prefilling) < self.max_batch:
            req = waiting[0]
            resumed = self.resumed.get(req)
            need = self._held_tokens(self.prompt[req] if resumed is None else resumed[0])
            if self._next_step() + need > self.kv_cap:
                break
            waiting.popleft()
            if resumed is None:
                self._taken(need)
                act.add(req, self.prompt[req], self.steps[req])
                self.running[req] = None
                self.tl.admit[req] = now
                admitted.append(req)
                continue
            hit = 0.0 if self.lru is None else min(self.lru.hits(req), resumed[0] - 1.0)  # one token is computed
            self._taken(need - hit)
            self.kv_used += need
            self.left[req] = resumed[0] - max(int(hit), 0)
            self.prefilling.append(req)
        return admitted

    def _recomputed(self, req: int) -> None:
        """A victim's recompute is complete: it rejoins the decode batch, newest, with the steps it had left."""
        self.prefilling.remove(req)
        del self.left[req]
        context, left = self.resumed.pop(req)
        self.kv_used -= self._held_tokens(context)
        self.act.add(req, context, left)
        self.running[req] = None

    def _plan(self, admitted: list[int]) -> None:
        """A mixed step while a recompute has tokens left (module docstring, 3); else the base plan, cut at the
        first step that would not fit the pool."""
        if self.prefilling:
            self._plan_mixed(admitted)
            return
        super()._plan(admitted)
        act = self.act
        grows = act.b if act.window is None else len(act.growing)
        if act.b == 0 or grows == 0:
            return
        self._cut_at_room(self.kv_cap - self._next_step(), grows)

    def _plan_mixed(self, admitted: list[int]) -> None:
        """One mixed step: the decode batch and up to ``budget − B`` recompute tokens, FCFS."""
        room, plan = max(self.work.budget_tokens - self.act.b, 1), []  # a batch over the budget: a token still
        for req in self.prefilling:
            if room <= 0:
                break
            take = min(self.left[req], room)
            plan.append((req, take))
            room -= take
        tokens = np.array([float(c) for _, c in plan])
        before = np.array([float(self.resumed[r][0] - self.left[r]) for r, _ in plan])
        batch = np.array([float(self.act.b)])
        context = np.array([float(self.act.context()) if self.act.b else 0.0])
        step = float(np.asarray(self.act.step_fn(batch, context))[0])
        self.plan = plan
        self.next_time = self.t + step + float(np.sum(self.work.chunk_s(tokens, before, float(self.act.b))))
        if self.emits_first_token:
            for req in admitted:
                self.lag.sampled(req, self.next_time)
