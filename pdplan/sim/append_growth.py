"""PPD's decode instance (:mod:`pdplan.sim.decode_append`) under the KV admission of its engine's decode server.

:class:`~pdplan.sim.decode_append.AppendDecodeInstance` reserves a sequence's final footprint ``l + n + s`` at
admission: TensorRT-LLM's ``GuaranteedNoEvictScheduler`` (:mod:`pdplan.sim.decode`), kept for it. SGLang's and vLLM's
decode servers hold each running request's growing context instead, and the engines' own rules, which the plain
disaggregated pool runs (:class:`~pdplan.sim.pd_decode_instance.PdDecodeInstance`,
:class:`~pdplan.sim.preempt_decode.PreemptDecodeInstance`), run here through the same rule objects, with the
appends and the session KV of the PPD instance. Common to both (:class:`GrowingAppendInstance`):

* **The pool** holds the running sequences' context and s fixed-state slots each (``K + B·s``), and each admitted
  append (and each recompute, below) its whole prompt (context) + s from its admission until it joins the decode
  batch: its hit taken from the cache and the pieces it computes (vLLM allocates a chunk's slots as it schedules it;
  holding them all at admission is the upper bound).
* **The session KV is free KV** (SGLang's ``_allocatable_tokens`` adds the radix cache's evictable size to the free
  size; vLLM's free block queue holds the cached blocks): the histories count nothing at admission, and each rank's
  cache (:class:`~pdplan.sim.decode_cache.DecodeKvCache`) is the KV its held tokens leave, resized at every boundary
  (the batch grows a token a sequence a step, so a history is evicted at the boundary after the step that needed its
  room; a turn placed between two boundaries reads the cache of the last one). Per rank: the rank's running
  sequences and admitted appends (rank ``session mod D``) against the instance's capacity / D.
* **Segments** are cut at the first step that would not fit (the next step's context, a token and s a sequence, and
  the appends held, over M), so that boundary retracts or preempts.

**SGLang** (:class:`PdAppendInstance`, :class:`~pdplan.sim.pd_decode_rule.PdRule`, read from
``python/sglang/srt/disaggregation/decode.py`` @0035ca42c2d6): at each boundary, while the next step does not fit
and more than one sequence decodes, the fewest-output sequence is retracted (its blocks leave HBM: SGLang offloads a
retracted request's KV to host memory); then the retracted are resumed first, FCFS, context + s + R against
``M − held − max(R·H, single)`` (H: the sequences decoding and the appends held), and then the waiting requests, a
transferred prompt and an append alike (PPD's append is a prompt the decode server takes), each needing
``max(l + s + R, l + min(n, c) − K₀)`` of ``M − held − max(R·H, single) − Σ retracted (context + s + R)``.
A resumed request joins the batch at the boundary that resumes it with the context it had. The offload and the
reload over the host link stall the instance as on the plain pool (:mod:`pdplan.sim.pd_decode_rule`): the step (or
mixed step) after a boundary that retracts or resumes starts Σ over those requests of context ×
``host_copy_s_per_token`` later.

**vLLM** (:class:`PreemptAppendInstance`, as :class:`~pdplan.sim.preempt_decode.PreemptDecodeInstance`): at each
boundary, while the next step does not fit, the newest decoding sequence (the last to join the batch) is preempted to
the head of the waiting queue, and a boundary that preempted admits nothing (while anything still runs). Its blocks
go to the free block queue, its tail first (``reversed(req_blocks)``), so they are its rank's cache's most recent
blocks, the prefix last, and when it is admitted again (its context + s against the free KV, as every waiting
request's prompt + s) the prefix still cached is a hit, at least one token computed, and the rest is recomputed here
in mixed steps beside the appends (priced as they are, FCFS in the same queue); it then rejoins the batch, newest,
with the steps it had left, its token 1 not emitted again. Without prefix caching (``DecodeRecompute.hits`` false)
it recomputes its whole context. Left out, as on the plain pool: an append or a recompute as the victim (vLLM's
``running`` holds them too).
"""

from __future__ import annotations

import heapq
from collections import deque

from pdplan.sim.decode import DecodeSetup
from pdplan.sim.decode_append import AppendDecodeInstance, AppendWork
from pdplan.sim.pd_decode_rule import PdRule
from pdplan.sim.spec import DecodePool


class GrowingAppendInstance(AppendDecodeInstance):
    """A PPD decode instance whose pool holds the growing context (module docstring); the engines' rules are its
    subclasses' :meth:`_make_room` and :meth:`_admit_held`."""

    def __init__(self, setup: DecodeSetup, work: AppendWork) -> None:
        super().__init__(setup, work)
        ranks = len(self.caches)
        self.run_a = [0] * ranks  # per rank: Σ (context at joining − step counter then) of its decoding sequences
        self.run_b = [0] * ranks  # per rank: its decoding sequences
        self.fixed = [0.0] * ranks  # per rank: what its admitted appends and recomputes hold (prompt + s)
        self.offset: dict[int, int] = {}  # decoding sequence -> its context at joining − the step counter then
        self.running: dict[int, None] = {}  # decoding sequences in join order (the last is vLLM's victim)
        self.resumed: dict[int, tuple[int, int]] = {}  # retracted or preempted -> (its context, steps left)

    # ---- the pool ----

    def held_tokens(self, rank: int | None = None) -> float:
        """KV slots held now (on ``rank``): the decoding sequences' context and state, the admitted appends'."""
        if rank is None:
            return float(self.act.context()) + self.act.b * self.state + sum(self.fixed)
        return self.run_a[rank] + self.run_b[rank] * (self.act.s + self.state) + self.fixed[rank]

    def next_step_tokens(self) -> float:
        """What the next step needs of the pool: the held tokens and a token for every decoding sequence."""
        return self.held_tokens() + self.act.b

    def free_tokens(self, rank: int) -> float:
        """The KV slots ``rank`` leaves to its session KV: its capacity less what it holds (module docstring)."""
        if len(self.caches) == 1:
            return self.kv_cap - self.held_tokens()
        return max(self.kv_cap / len(self.caches) - self.held_tokens(rank), 0.0)

    def _join(self, req: int, context: int, steps: int) -> None:
        self.act.add(req, context, steps)
        offset = context - self.act.s
        self.offset[req] = offset
        rank = self.rank_of(req)
        self.run_a[rank] += offset
        self.run_b[rank] += 1
        self.running[req] = None

    def _leave(self, req: int) -> int:
        """Decoding ``req`` leaves the pool's count (finished or taken out); its rank."""
        rank = self.rank_of(req)
        self.run_a[rank] -= self.offset.pop(req)
        self.run_b[rank] -= 1
        del self.running[req]
        return rank

    def _take_out(self, req: int) -> tuple[int, int]:
        """Take decoding ``req`` out of the batch (retracted or preempted): ``(its context, steps left)``, kept for
        its resumption; it no longer holds the blocks it took."""
        context, left = self.act.remove(req)
        rank = self._leave(req)
        self.resumed[req] = (context, left)
        self.caches[rank].release(self.taken.pop(req))
        return context, left

    # ---- the boundary ----

    def _release(self, req: int, now: float) -> None:
        """A sequence finished: it leaves the pool, and its whole blocks stay as session KV."""
        self.tl.finish[req] = now
        rank = self._leave(req) if req in self.offset else self.rank_of(req)
        work, cache = self.work, self.caches[rank]
        cache.release(self.taken.pop(req))
        cache.keep(work.blocks(req, work.sequence_blocks[req]), self.free_tokens(rank))

    def _prefilled(self, req: int, now: float, done: list[int]) -> None:
        """An append's prompt or a recompute is complete: its KV is the decode batch's now."""
        resumed = self.resumed.pop(req, None)
        rank = self.rank_of(req)
        if resumed is None:
            self.fixed[rank] -= self.prompt[req] + self.state
            super()._prefilled(req, now, done)
            return
        self.fixed[rank] -= resumed[0] + self.state
        self.prefilling.remove(req)
        del self.left[req]
        self._join(req, *resumed)

    def _admit(self, now: float) -> list[int]:
        """The engine's room for the next step, the caches resized to the free KV, then its admission."""
        pending, waiting = self.pending, self.waiting
        while pending and pending[0][0] <= now:
            waiting.append(heapq.heappop(pending)[1])
        took_out = self._make_room()
        for rank, cache in enumerate(self.caches):
            cache.resize(self.free_tokens(rank))
        return self._admit_held(now, took_out)

    def _make_room(self) -> bool:
        raise NotImplementedError

    def _admit_held(self, now: float, took_out: bool) -> list[int]:
        raise NotImplementedError

    def _start(self, req: int, now: float, admitted: list[int]) -> None:
        """As the reserving instance's; an append holds its prompt + s until it joins the batch."""
        if req in self.appends:
            self.fixed[self.rank_of(req)] += self.prompt[req] + self.state
        super()._start(req, now, admitted)

    def _plan(self, admitted: list[int]) -> None:
        """The base plan; a decode segment cut at the first step that would not fit the pool (module docstring)."""
        super()._plan(admitted)
        act = self.act
        if self.plan or act.b == 0:
            return
        self._cut_at_room(self.kv_cap - self.next_step_tokens(), act.b)


class PdAppendInstance(GrowingAppendInstance):
    """PPD's decode instance on SGLang's PD decode rule (module docstring, SGLang)."""

    def __init__(self, setup: DecodeSetup, work: AppendWork, rule: PdRule) -> None:
        super().__init__(setup, work)
        self.rule = rule
        self.retracted: deque[int] = deque()
        self.retractions = 0  # requests retracted so far (a count for checks and benchmarks)
        self.copy_s = 0.0  # this boundary's host copy: the next step starts that much later (module docstring)

    def _make_room(self) -> bool:
        """Retract the fewest-output decoding sequence while the next step does not fit, keeping one."""
        act, retracted = self.act, False
        while act.b > 1 and self.next_step_tokens() > self.kv_cap:
            req = self.rule.victim(act)
            context, _ = self._take_out(req)
            self.copy_s += self.rule.copy_s(context)
            self.retracted.append(req)
            self.retractions += 1
            retracted = True
        return retracted

    def _budget(self, single: float) -> float:
        """``M − held − max(R·H, single)`` (module docstring, SGLang)."""
        held = self.act.b + len(self.prefilling)
        return self.kv_cap - self.held_tokens() - max(self.rule.reserved * held, single)

    def _admit_held(self, now: float, took_out: bool) -> list[int]:
        act, rule, work = self.act, self.rule, self.work
        retractable = float(act.context())
        single = rule.single(act, retractable, act.b + len(self.prefilling))
        budget = self._budget(single)
        while self.retracted and self.seats_in_use() < self.max_batch:  # resume_retracted_reqs
            req = self.retracted[0]
            context, left = self.resumed[req]
            if rule.need(context) > budget and self.seats_in_use() > 0:  # an empty instance takes it whatever
                break
            self.retracted.popleft()
            del self.resumed[req]
            self.taken[req] = work.blocks(req, context // work.block_tokens)  # its KV loaded back
            self.cache_of(req).take(self.taken[req])
            self._join(req, context, left)
            self.copy_s += rule.copy_s(context)
            budget -= rule.need(context)
        owed = sum(rule.need(self.resumed[req][0]) for req in self.retracted)
        admitted: list[int] = []
        waiting = self.waiting
        while waiting and self.seats_in_use() < self.max_batch:  # pop_preallocated
            req = waiting[0]
            if rule.newcomer(req, retractable) > self._budget(single) - owed:
                break
            waiting.popleft()
            self._start(req, now, admitted)
        return admitted

    def _plan(self, admitted: list[int]) -> None:
        """The plan from the end of the boundary's host copy (module docstring, SGLang)."""
        self.t += self.copy_s
        self.copy_s = 0.0
        super()._plan(admitted)


class PreemptAppendInstance(GrowingAppendInstance):
    """PPD's decode instance on vLLM's growth with preemption and local recompute (module docstring, vLLM)."""

    def __init__(self, setup: DecodeSetup, work: AppendWork, hits: bool) -> None:
        super().__init__(setup, work)
        self.hits = hits
        self.preemptions = 0  # a count for checks and benchmarks

    def _make_room(self) -> bool:
        """Preempt the newest decoding sequence while the next step does not fit; its blocks to the free queue."""
        act, work, preempted = self.act, self.work, False
        while act.b and self.next_step_tokens() > self.kv_cap:
            req = next(reversed(self.running))
            context, _ = self._take_out(req)
            rank = self.rank_of(req)
            blocks = work.blocks(req, context // work.block_tokens)
            self.caches[rank].keep(blocks[::-1], self.free_tokens(rank))  # the tail freed first
            self.waiting.appendleft(req)
            self.preemptions += 1
            preempted = True
        return preempted

    def _admit_held(self, now: float, took_out: bool) -> list[int]:
        admitted: list[int] = []
        if took_out and (self.act.b > 0 or self.prefilling):  # a boundary that preempted admits nothing
            return admitted
        waiting, state = self.waiting, self.state
        while waiting and self.seats_in_use() < self.max_batch:
            req = waiting[0]
            resumed = self.resumed.get(req)
            need = (self.prompt[req] if resumed is None else resumed[0]) + state
            if self.next_step_tokens() + need > self.kv_cap:
                break
            waiting.popleft()
            if resumed is None:
                self._start(req, now, admitted)
            else:
                self._recompute(req, resumed[0])
        return admitted

    def _recompute(self, req: int, context: int) -> None:
        """Readmitted victim ``req`` takes the prefix of its context still cached (at least a token computed) and
        recomputes the rest in mixed steps."""
        work, rank = self.work, self.rank_of(req)
        cache = self.caches[rank]
        hit = 0
        if self.hits:
            hit = min(
                cache.held_prefix(work.blocks(req, context // work.block_tokens)), (context - 1) // work.block_tokens
            )
        self.taken[req] = work.blocks(req, hit)
        cache.take(self.taken[req])
        self.fixed[rank] += context + self.state
        self.left[req] = context - hit * work.block_tokens
        self.prefilling.append(req)
        cache.resize(self.free_tokens(rank))

    def _computed(self, req: int) -> int:
        resumed = self.resumed.get(req)
        return (self.prompt[req] if resumed is None else resumed[0]) - self.left[req]


def append_instance(setup: DecodeSetup, work: AppendWork, pool: DecodePool) -> AppendDecodeInstance:
    """PPD's decode instance of ``pool``'s engine: SGLang's PD rule, vLLM's preemption with recompute, or the
    reservation (TensorRT-LLM; module docstring)."""
    if pool.pd_admission is not None:
        rule = PdRule(pool.pd_admission, setup.prompt, setup.steps, setup.state_tokens, float("inf"))
        return PdAppendInstance(setup, work, rule)
    if pool.recompute is not None:
        return PreemptAppendInstance(setup, work, pool.recompute.hits)
    return AppendDecodeInstance(setup, work)
