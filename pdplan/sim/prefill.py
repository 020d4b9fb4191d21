"""Prefill pool: x FCFS instances behind a router (docs/queueing.md §1.2–§1.4).

Routing policies (decided when a request arrives, in arrival order):

* ``"random"``: uniform instance, drawn up front from the seeded generator (one draw per request
  id, so closed-loop runs are reproducible); each instance is then an independent FCFS queue.
* ``"round-robin"``: request k (k-th arrival) goes to instance ``k mod x``.
* ``"least-work"``: the instance with the least unfinished work (idle instances are equivalent). For one prompt
  at a time this is exactly a central FCFS queue feeding x servers (M/G/c, §1.3): each request
  starts when the pooled queue would start it. With batching it *is* implemented as a central
  FCFS queue served by whichever instance frees first.
* ``"least-loaded"`` (Dynamo's ``--router-mode least-loaded``, :mod:`pdplan.queueing.jsq`): the instance with the
  fewest outstanding requests (queued there or in prefill) at the arrival, the lowest index on a tie; each instance
  is then its own FCFS queue.
* ``"power-of-two"`` (Dynamo's ``power-of-two``, SGLang's ``power_of_two`` counted as in-flight requests): two
  distinct instances drawn up front per request (the first uniform, the second uniform among the others, as Dynamo's
  ``p2c_select_from``; :func:`static_routes` codes the pair as ``first·x + second``), the one with fewer outstanding
  requests at the arrival, the first on a tie.

One prompt at a time (``service_s`` given): completion ``d_k = max(d_{k−1}, a_k) + S_k`` per
instance (Lindley). For random / round-robin in open loop it is vectorised as
``d = C + cummax(a − C + S)`` with ``C = cumsum(S)``; least-work and closed loop use an O(log x)
heap per request; least-loaded and power-of-two count each instance's unfinished requests at each arrival (O(x)).

Batched prefill (``batch_time_s`` given, §1.4 dynamic batching): an instance that becomes idle
takes the FCFS head requests while their token sum fits ``max_batch_tokens`` (always at least one;
an idle instance starts at once on arrival, so light load gives batches of one) and all of them
finish together after ``batch_time_s(Σl, Σl²)``.

Dispatched prefill (``start`` given, :class:`DispatchedPrefill`): one prompt at a time, event-driven, the service
asked of ``start(request, instance, now)`` when the prompt starts on its instance (a prefix cache's hit is known only
there and then). The same queues as above: per-instance FCFS queues for random, round-robin, least-loaded,
power-of-two and pinned ``routes``;
for least-work one central FCFS queue, its head started on the idle instance that has been idle longest (lowest
index on a tie), which is the M/G/c queue of :class:`UnbatchedPrefill`.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from pdplan.errors import SpecError
from pdplan.sim.batch import Segments
from pdplan.sim.spec import PREFILL_ROUTINGS, PrefillPool, Requests
from pdplan.types import FloatArray
from pdplan.types import Int64Array as IntArray


def lindley_done_s(arrival_s: FloatArray, service_s: FloatArray) -> FloatArray:
    """FCFS single-server completion times for sorted arrivals (vectorised Lindley recursion).

    Example: arrivals [0, 1], services [2, 2] → completions [2, 4] (the second waits 1 s).
    """
    cum = np.cumsum(service_s)
    return np.asarray(cum + np.maximum.accumulate(arrival_s - cum + service_s), dtype=np.float64)


COUNT_ROUTINGS = ("least-loaded", "power-of-two")
"""Policies that route by the count of each instance's unfinished requests at the arrival (module docstring)."""


def static_routes(routing: str, n: int, instances: int, rng: np.random.Generator) -> IntArray:
    """Instance per request id for random (pre-drawn) or round-robin routing; power-of-two: the two instances drawn
    per request, coded ``first·x + second`` (:func:`count_pick`); zeros otherwise."""
    if routing not in PREFILL_ROUTINGS:
        raise SpecError(f"routing must be one of {', '.join(PREFILL_ROUTINGS)}, got {routing!r}")
    if routing == "random":
        return rng.integers(instances, size=n).astype(np.int64)
    if routing == "round-robin":
        return np.arange(n, dtype=np.int64) % instances
    if routing == "power-of-two" and instances > 1:
        first = rng.integers(instances, size=n)
        second = (first + 1 + rng.integers(instances - 1, size=n)) % instances  # uniform among the others
        return (first * instances + second).astype(np.int64)
    return np.zeros(n, dtype=np.int64)


def count_pick(routing: str, counts: list[int], draw: int) -> int:
    """The instance a count-based router picks (module docstring): least-loaded the fewest unfinished requests (the
    lowest index on a tie); power-of-two the fewer of the two drawn (``draw = first·x + second``; the first on a tie).

    Example: counts [2, 0, 1]: least-loaded → 1; power-of-two with draw 2·3 + 0 (instances 2 and 0) → 2."""
    if routing == "least-loaded":
        return counts.index(min(counts))
    first, second = divmod(draw, len(counts))
    return first if counts[first] <= counts[second] else second


def open_loop_done_s(
    arrival_s: FloatArray,
    service_s: FloatArray,
    routes: IntArray,
    pool: PrefillPool,
    segments: Segments,
) -> tuple[FloatArray, IntArray]:
    """Completion times and serving instance of one-at-a-time prefill for sorted arrivals."""
    if pool.routing == "least-work" or pool.routing in COUNT_ROUTINGS:
        online = UnbatchedPrefill(pool, service_s, routes, segments)
        done = np.array([online.submit(i, float(a)) for i, a in enumerate(arrival_s)])
        return done, np.asarray(online.instance_of, dtype=np.int64)
    done = np.empty_like(arrival_s)
    for inst in range(pool.instances):
        idx = np.flatnonzero(routes == inst)
        done[idx] = lindley_done_s(arrival_s[idx], service_s[idx])
    segments.extend(done - service_s, done)
    return done, routes


class UnbatchedPrefill:
    """One-prompt-at-a-time prefill, decided online at arrival (completion known at once)."""

    def __init__(self, pool: PrefillPool, service_s: FloatArray, routes: IntArray, segments: Segments) -> None:
        self.least_work = pool.routing == "least-work"
        self.round_robin = pool.routing == "round-robin"
        self.counted = pool.routing if pool.routing in COUNT_ROUTINGS else None
        self.free = [(0.0, i) for i in range(pool.instances)]  # heap for least-work
        self.free_at = [0.0] * pool.instances
        self.ends: list[deque[float]] = [deque() for _ in range(pool.instances)]  # unfinished requests' ends
        self.service: list[float] = service_s.tolist()
        self.routes = routes.tolist()
        self.instances = pool.instances
        self.arrivals = 0
        self.seg = segments
        self.instance_of = [0] * len(self.service)  # prefill instance that served each request

    def submit(self, req: int, now_s: float) -> float:
        """Route and enqueue request ``req`` arriving at ``now_s``; return its completion time."""
        service: float = self.service[req]
        if self.least_work:
            free, inst = heapq.heappop(self.free)
            start = max(free, now_s)
            heapq.heappush(self.free, (start + service, inst))
        else:
            if self.counted is not None:
                for ends in self.ends:  # FCFS per instance: its ends come in order
                    while ends and ends[0] <= now_s:
                        ends.popleft()
                inst = count_pick(self.counted, [len(e) for e in self.ends], self.routes[req])
            else:
                inst = self.arrivals % self.instances if self.round_robin else self.routes[req]
            start = max(self.free_at[inst], now_s)
            self.free_at[inst] = start + service
            self.ends[inst].append(start + service)
        self.arrivals += 1
        self.instance_of[req] = inst
        self.seg.add(start, start + service, 1, 1)
        return start + service


PushFn = Callable[[float, int], None]
"""``push(time_s, instance)``: schedule the end of a prefill batch on an instance."""


class BatchedPrefill:
    """Batched prefill, event-driven: ``submit`` on arrival, ``batch_done`` when a batch ends."""

    def __init__(self, pool: PrefillPool, req: Requests, routes: IntArray, segments: Segments, push: PushFn) -> None:
        assert pool.batch_time_s is not None
        self.batch_time_s = pool.batch_time_s
        self.budget = pool.max_batch_tokens
        self.central = pool.routing == "least-work"
        self.round_robin = pool.routing == "round-robin"
        self.counted = pool.routing if pool.routing in COUNT_ROUTINGS else None
        self.instances = pool.instances
        queues = 1 if self.central else pool.instances
        self.queues: list[deque[int]] = [deque() for _ in range(queues)]
        self.running: list[list[int] | None] = [None] * pool.instances
        self.started = [0.0] * pool.instances
        self.prompt = req.input_tokens.tolist()
        self.routes = routes.tolist()
        self.arrivals = 0
        self.seg = segments
        self.push = push

    def submit(self, req: int, now_s: float) -> None:
        """Enqueue an arriving request; start a batch at once if its server is idle."""
        if self.central:
            self.queues[0].append(req)
            idle = [i for i in range(self.instances) if self.running[i] is None]
            if idle:
                self._start(idle[0], now_s)
        else:
            if self.counted is not None:  # unfinished: queued there plus the batch it runs
                counts = [len(q) + len(r or ()) for q, r in zip(self.queues, self.running, strict=True)]
                inst = count_pick(self.counted, counts, self.routes[req])
            else:
                inst = self.arrivals % self.instances if self.round_robin else self.routes[req]
            self.queues[inst].append(req)
            if self.running[inst] is None:
                self._start(inst, now_s)
        self.arrivals += 1

    def batch_done(self, inst: int, now_s: float) -> list[int]:
        """End the batch running on ``inst``; start the next one; return the finished requests."""
        done = self.running[inst]
        assert done is not None
        self.seg.add(self.started[inst], now_s, len(done), 1)
        self.running[inst] = None
        if self.queues[0 if self.central else inst]:
            self._start(inst, now_s)
        return done

    def _start(self, inst: int, now_s: float) -> None:
        queue = self.queues[0 if self.central else inst]
        batch = [queue.popleft()]
        total = self.prompt[batch[0]]
        while queue and total + self.prompt[queue[0]] <= self.budget:
            total += self.prompt[queue[0]]
            batch.append(queue.popleft())
        sum_sq = float(sum(self.prompt[r] ** 2 for r in batch))
        duration = float(self.batch_time_s(float(total), sum_sq))
        if not duration > 0:
            raise SpecError(f"prefill_batch_time_s must be > 0, got {duration}")
        self.running[inst] = batch
        self.started[inst] = now_s
        self.push(now_s + duration, inst)


class DispatchedPrefill:
    """One-prompt-at-a-time prefill whose service is known only when a prompt starts (module docstring); driven by
    the engine: ``submit`` on arrival, ``release`` when the prompt on an instance is done."""

    def __init__(self, pool: PrefillPool, routes: list[int] | None, segments: Segments, push: PushFn) -> None:
        assert pool.start is not None
        self.start = pool.start
        self.central = routes is None and pool.routing == "least-work"
        self.round_robin = routes is None and pool.routing == "round-robin"
        self.counted = pool.routing if routes is None and pool.routing in COUNT_ROUTINGS else None
        self.draws: list[int] = []  # power-of-two's drawn pairs, set by the engine (static_routes)
        self.routes = routes
        self.instances = pool.instances
        self.queues: list[deque[int]] = [deque() for _ in range(1 if self.central else pool.instances)]
        self.busy = [False] * pool.instances
        self.running = [-1] * pool.instances  # the request each instance is prefilling
        self.idle_since = [0.0] * pool.instances
        self.arrivals = 0
        self.instance_of: dict[int, int] = {}
        self.service_of: dict[int, float] = {}
        self.seg = segments
        self.push = push

    def submit(self, req: int, now_s: float) -> None:
        """Queue an arriving request; start it at once if its instance (or, central, any instance) is idle."""
        if self.central:
            self.queues[0].append(req)
            idle = [(self.idle_since[i], i) for i in range(self.instances) if not self.busy[i]]
            if idle:
                self._start(min(idle)[1], now_s)
        else:
            inst = self.pick(req)
            self.queues[inst].append(req)
            if not self.busy[inst]:
                self._start(inst, now_s)
        self.arrivals += 1

    def pick(self, req: int) -> int:
        """The instance an arriving ``req`` joins now (not the central queue): pinned, round-robin's next, or the
        count-based router's pick over each instance's queued and running prompts."""
        if self.routes is not None:
            return self.routes[req]
        if self.round_robin:
            return self.arrivals % self.instances
        if self.counted is not None:
            counts = [len(q) + int(b) for q, b in zip(self.queues, self.busy, strict=True)]
            if self.counted == "power-of-two" and not self.draws:
                raise SpecError("power-of-two routing needs its drawn pairs (static_routes) set on the pool's draws")
            return count_pick(self.counted, counts, self.draws[req] if self.draws else 0)
        raise AssertionError("per-instance queues need routes, round-robin or a count-based router")

    def release(self, inst: int, now_s: float) -> None:
        """The prompt on ``inst`` is done: start the next one of its queue (central: of the shared queue)."""
        self.busy[inst] = False
        self.idle_since[inst] = now_s
        if self.queues[0 if self.central else inst]:
            self._start(inst, now_s)

    def _start(self, inst: int, now_s: float) -> None:
        req = self.queues[0 if self.central else inst].popleft()
        service = float(self.start(req, inst, now_s).service_s)
        if not (service >= 0.0 and service < math.inf):
            raise SpecError(f"prefill start must give a finite service >= 0 s, got {service} for request {req}")
        self.busy[inst] = True
        self.running[inst] = req
        self.instance_of[req] = inst
        self.service_of[req] = service
        self.seg.add(now_s, now_s + service, 1, 1)
        self.push(now_s + service, inst)
