"""A disaggregated decode instance that admits and retracts as SGLang's decode server does
(:mod:`pdplan.sim.pd_decode_rule` gives the rule and its source).

It is :class:`~pdplan.sim.decode.DecodeInstance` (continuous batching, FCFS admission at step boundaries) with the
pool holding each running request's growing context, ``min(l + j, w) + s`` after j steps, instead of its reserved
final footprint. At every boundary, after the completions:

1. *Retraction*: while the next step does not fit the pool (the batch's context plus one token and s a sequence,
   ``K + B·(1 + s) > M``) and more than one request runs, the request with the fewest output tokens (context less
   prompt; ties the longest prompt, then the latest request) leaves the batch with its context and steps left and
   joins the retracted queue (FCFS).
2. *Resumption*: the retracted requests, in order, while a seat is free and their context + s + R fits
   ``M − held − max(R·B, single)`` (held: the pool's tokens, B: the running requests, single: the one-request room
   of the rule), each taking its need off that budget.
3. *Admission*: the ready requests, FCFS, while a seat is free and ``max(l + s + R, l + min(n, c) − K₀)`` fits
   ``M − held − max(R·B, single) − Σ over the retracted (context + s + R)``, held and B recomputed after each (K₀,
   the running requests' context before this boundary's admissions, is SGLang's ``retractable_tokens``; single is
   taken over those same requests).

4. *The copy* (:meth:`~pdplan.sim.pd_decode_rule.PdRule.copy_s`): the retracted requests' KV goes to host memory and
   the resumed ones' comes back while nothing runs, so the boundary's next step starts Σ over both of
   ``min(context, w) × host_copy_s_per_token`` later (the planned steps start from ``t`` pushed past the boundary by
   that much; a request whose KV is ready meanwhile waits for the first step's end).

Between boundaries a segment of steps is planned as in the base class, cut at the first step that would not fit
(the pool grows by one token per growing sequence a step), so that boundary retracts. Two departures keep the
simulation going where SGLang would stall: a retracted request whose context + s + R exceeds the whole pool is resumed
on an empty instance, and with R = 0 (no room kept for growth) a boundary's admissions may overfill the next step by
their own tokens, retracted one step later.

Example (M = 3,000, R = 512, no state or window): two running requests holding 1,000 and 600 tokens leave
3,000 − 1,600 − 2 × 512 = 376 allocatable tokens, so no prompt is admitted (l + 512 > 376), where a reserving
instance admits any request whose l + n fits beside the two's final footprints (more hand-worked cases:
tests/unit/test_sim_pd_decode.py).
"""

from __future__ import annotations

import heapq
from collections import deque

from pdplan.sim.decode import DecodeInstance, DecodeSetup
from pdplan.sim.pd_decode_rule import PdDecodeAdmission, PdRule


class PdDecodeInstance(DecodeInstance):
    """A decode instance on SGLang's PD decode rule (module docstring)."""

    def __init__(self, setup: DecodeSetup, rule: PdDecodeAdmission, window: float | None = None) -> None:
        super().__init__(setup, window)
        self.rule = PdRule(rule, setup.prompt, setup.steps, self.state, self.window)
        self.reserved = self.rule.reserved
        self.retracted: deque[int] = deque()
        self.resume: dict[int, tuple[int, int]] = {}  # retracted request → (its context, steps left)
        self.retractions = 0  # requests retracted so far (a count for checks and benchmarks)
        self.copy_s = 0.0  # this boundary's host copy: the next step starts that much later (module docstring, 4)

    def _held(self) -> float:
        """Tokens the running requests hold: their (windowed) context and fixed state."""
        return float(self.act.context()) + self.act.b * self.state

    def _released(self, done: list[int]) -> None:
        """The finished requests' KV is free already (the pool holds only the running context); retract for the
        next step (module docstring, 1)."""
        act = self.act
        while act.b > 1 and act.context() + act.b * (1.0 + self.state) > self.kv_cap:
            req = self.rule.victim(act)
            context, left = act.remove(req)
            self.copy_s += self.rule.copy_s(context)
            self.resume[req] = (context, left)
            self.retracted.append(req)
            self.retractions += 1

    def _admit(self, now: float) -> list[int]:
        pending, waiting, act = self.pending, self.waiting, self.act
        while pending and pending[0][0] <= now:
            waiting.append(heapq.heappop(pending)[1])
        retractable, rule = float(act.context()), self.rule
        single = rule.single(act, retractable, act.b)
        budget = self.kv_cap - self._held() - max(self.reserved * act.b, single)
        while self.retracted and act.b < self.max_batch:  # resume_retracted_reqs (count_retracted=False)
            req = self.retracted[0]
            context, left = self.resume[req]
            if rule.need(context) > budget and act.b > 0:  # an empty instance takes it whatever (docstring)
                break
            self.retracted.popleft()
            del self.resume[req]
            act.add(req, context, left)
            self.copy_s += rule.copy_s(context)
            budget -= rule.need(context)
        owed = sum(rule.need(self.resume[req][0]) for req in self.retracted)
        admitted: list[int] = []
        while waiting and act.b < self.max_batch:  # pop_preallocated (count_retracted=True)
            req = waiting[0]
            budget = self.kv_cap - self._held() - max(self.reserved * act.b, single) - owed
            if rule.newcomer(req, retractable) > budget:
                break
            waiting.popleft()
            act.add(req, self.prompt[req], self.steps[req])
            self.tl.admit[req] = now
            admitted.append(req)
        return admitted

    def _plan(self, admitted: list[int]) -> None:
        """The base plan from the end of the boundary's host copy, cut at the first step that would not fit the pool
        (module docstring)."""
        self.t += self.copy_s
        self.copy_s = 0.0
        super()._plan(admitted)
        act = self.act
        if act.b == 0:
            return
        grows = act.b if act.window is None else len(act.growing)
        if grows == 0:
            return
        # steps k fit while K + g·k + B(1 + s) ≤ M (R = 0: see docstring)
        self._cut_at_room(self.kv_cap - (act.context() + act.b * (1.0 + self.state)), grows)
