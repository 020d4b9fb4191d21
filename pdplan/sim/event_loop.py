"""Event loop of the simulator and its public entry points (open and closed loop).

One loop drives everything. External events (arrivals, prefill completions, prefill-batch ends) sit
in a heap; each step-level instance (decode or colocated) exposes the time of its own next event and
plans the steps in between itself. The loop always processes the earliest event; on a tie the
external event goes first (so a request whose KV is ready exactly at a step boundary is admitted at
that boundary). Decode routing is decided at prefill completion, before the KV transfer.

* :func:`simulate` — open loop: given arrival times (e.g. :func:`~pdplan.sim.spec.poisson_arrivals`
  or a trace), sorted, one per request.
* :func:`simulate_closed_loop` — C clients; each sends its next request (next request id) when its
  previous one finishes, plus ``think_time_s`` (0 by default); all C start at t = 0. The achieved
  throughput is :attr:`SimResult.throughput_rps` / ``output_tokens_per_s``.

Disaggregated decode routing (:attr:`~pdplan.sim.spec.DecodePool.routing`), decided when a prefill
ends: ``"least-work"`` = the decode instance with the fewest requests routed to it and not yet
finished (in transfer, waiting or decoding; ties go to the lowest index: JSQ by count);
``"random"`` = a uniform instance drawn up front per request (after the prefill draws);
``"round-robin"`` = the next instance in prefill-completion order; ``"power-of-two"`` = of two distinct instances
drawn up front per request (after the prefill draws), the one with fewer such requests (the first on a tie). The KV
transfer then waits for
the modelled links (:class:`~pdplan.sim.spec.KvTransfer`: the decode instance's inbound and/or the
serving prefill instance's outbound NICs, FIFO in prefill-completion order).

Colocated routing: ``"random"`` (pre-drawn, uniform) or ``"least-work"``: fewest outstanding
prefill tokens, then fewest seats in use, then lowest index. Pinned ``routes`` (either pool) replace the policy.

* :func:`simulate_events` — open loop where some arrivals are known up front and the others are released by
  completions (a session's next turn), with a listener (:class:`~pdplan.sim.spec.RequestEvents`) told of every
  prefill end and every finish; the result is in arrival order. A prefill pool with ``start`` runs
  :class:`~pdplan.sim.prefill.DispatchedPrefill`; its prompt's end is told to the listener before the instance
  starts its next prompt, so that prompt sees the blocks just cached. A disaggregated deployment with a
  ``placement`` (PPD, :class:`TurnPlacement`) builds its decode instances, asks it at each arrival
  whether the prompt runs on a decode instance instead (it is then submitted there, with no prefill and no transfer),
  and asks it for the decode instance of a prompt whose prefill ends (session-affine routing). With a ``prefetch``
  (:data:`PrefetchFn`), a prompt bound for a dispatched prefill pool with pinned routes first does that work (a
  storage read into a host buffer, :mod:`pdplan.sim.storage_paths`) and joins its instance's queue when it is done.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from functools import partial
from itertools import count
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from pdplan.errors import SpecError
from pdplan.sim.batch import Segments, Timeline
from pdplan.sim.colocated_instance import ColocatedInstance, PrefilledFn
from pdplan.sim.decode import DecodeInstance, DecodeSetup
from pdplan.sim.metrics import SimResult, build_result
from pdplan.sim.overlap_lag import overlap_iterations
from pdplan.sim.pd_decode_instance import PdDecodeInstance
from pdplan.sim.preempt_decode import PreemptDecodeInstance
from pdplan.sim.prefill import (
    BatchedPrefill,
    DispatchedPrefill,
    UnbatchedPrefill,
    count_pick,
    open_loop_done_s,
    static_routes,
)
from pdplan.sim.spec import (
    Colocated,
    DecodePool,
    Deployment,
    Disaggregated,
    PrefillStart,
    RequestEvents,
    Requests,
    as_times,
    decode_steps,
)
from pdplan.sim.validate import check_colocated, check_disaggregated, check_routes
from pdplan.types import FloatArray
from pdplan.types import Int64Array as IntArray

_ARRIVAL, _PREFILL_DONE, _BATCH_DONE, _DISPATCH_DONE, _FETCHED = 0, 1, 2, 3, 4

PrefetchFn = Callable[[int, int, float], float]
"""``prefetch(request, prefill_instance, now_s) -> ready_s``: a dispatched prompt's work before it may queue on its
(pinned) prefill instance, e.g. reading its cached KV into a host buffer (:mod:`pdplan.sim.storage_paths`)."""


class TurnPlacement(Protocol):
    """Where each turn of a session runs its prefill (PPD: on the prefill pool, or as an append-prefill on the decode
    instance holding its history; :class:`pdplan.sim.turn_placement.TurnPlacer`): the hooks of the disaggregated
    engine (module docstring)."""

    def decode_instance(self, setup: DecodeSetup) -> DecodeInstance:
        """Build one decode instance (:class:`~pdplan.sim.decode.DecodeInstance`'s setup)."""

    def attach(self, route_decode: Callable[[int], int], prefill: DispatchedPrefill | None) -> None:
        """The engine's decode routing policy and its prefill pool, once the instances are built."""

    def place(self, request: int, now_s: float) -> int:
        """At ``request``'s arrival: the decode instance now running its prefill (submitted there), or −1 for the
        prefill pool."""

    def route(self, request: int, policy: Callable[[int], int]) -> int:
        """At the end of ``request``'s prefill: its decode instance (``policy``: the pool's routing)."""


class _Server(Protocol):
    next_time: float

    def fire(self) -> list[int]: ...


class _Engine:
    """Heap of external events + step-level servers; subclasses handle the external events."""

    def __init__(self, req: Requests, events: RequestEvents | None = None) -> None:
        self.req = req
        self.events = events
        self.tl = Timeline(req.count)
        self.ext: list[tuple[float, int, int, int]] = []
        self.order = count()
        self.servers: Sequence[_Server] = []
        self.touched: list[int] = []  # servers whose next event changed in ``handle``
        self.clients_next = req.count  # closed loop: next request id to issue
        self.think_s = 0.0

    def push(self, time_s: float, kind: int, payload: int) -> None:
        """Schedule an external event."""
        heapq.heappush(self.ext, (time_s, next(self.order), kind, payload))

    def start_closed_loop(self, concurrency: int, think_time_s: float) -> None:
        """Issue requests 0 … C−1 at t = 0; later ones are issued on completions."""
        first = min(concurrency, self.req.count)
        for req in range(first):
            self.push(0.0, _ARRIVAL, req)
        self.clients_next = first
        self.think_s = think_time_s

    def finished(self, req: int, now_s: float) -> None:
        """Request ``req`` finished at ``now_s``: the listener may release a request; a closed-loop client (if any is
        still sending) issues the next."""
        if self.events is not None:
            released = self.events.finished(req, now_s)
            if released is not None:
                self.push(released[1], _ARRIVAL, released[0])
        if self.clients_next < self.req.count:
            self.push(now_s + self.think_s, _ARRIVAL, self.clients_next)
            self.clients_next += 1

    def run(self) -> None:
        """Process events in time order until none is left."""
        ext, servers, touched = self.ext, self.servers, self.touched
        times = [s.next_time for s in servers]  # cache, refreshed for every server we touch
        while True:
            t_srv = min(times)
            if ext and ext[0][0] <= t_srv:
                time_s, _, kind, payload = heapq.heappop(ext)
                self.handle(time_s, kind, payload)
                for i in touched:
                    times[i] = servers[i].next_time
                touched.clear()
            elif t_srv < math.inf:
                i = times.index(t_srv)
                for req in servers[i].fire():
                    self.finished(req, t_srv)
                times[i] = servers[i].next_time
            else:
                return

    def handle(self, time_s: float, kind: int, payload: int) -> None:
        """Process one external event (implemented by subclasses)."""
        raise NotImplementedError


def _plain_decode_instance(d: DecodePool) -> Callable[[DecodeSetup], DecodeInstance]:
    """The decode instance of the pool's engine: SGLang's PD decode rule (:class:`PdDecodeInstance`), vLLM's growth
    with preemption and recompute (:class:`PreemptDecodeInstance`), or the reservation of the final footprint."""
    if d.pd_admission is not None:
        return partial(PdDecodeInstance, rule=d.pd_admission, window=d.window_tokens)
    if d.recompute is not None:
        return partial(PreemptDecodeInstance, work=d.recompute, window=d.window_tokens)
    return partial(DecodeInstance, window=d.window_tokens)


class _DisaggEngine(_Engine):
    def __init__(
        self,
        dep: Disaggregated,
        req: Requests,
        rng: np.random.Generator,
        events: RequestEvents | None = None,
        placement: TurnPlacement | None = None,
    ) -> None:
        super().__init__(req, events)
        check_disaggregated(dep, req)
        self.dep = dep
        self.steps = decode_steps(req, dep.convention)
        self.convention_b = dep.convention == "B"
        n = req.count
        d = dep.decode
        self.routes = static_routes(dep.prefill.routing, n, dep.prefill.instances, rng)
        self.decode_routes = rng.integers(d.instances, size=n).tolist() if d.routing == "random" else None
        self.decode_rr = 0 if d.routing == "round-robin" else -1
        p2c = d.routing == "power-of-two"
        self.decode_pairs = static_routes("power-of-two", n, d.instances, rng).tolist() if p2c else None
        self.prefill_inst = self.routes.tolist()
        self.prefill_seg, self.decode_seg = Segments(), Segments()
        self.service = (
            None if dep.prefill.service_s is None else as_times(dep.prefill.service_s, n, "prefill.service_s")
        )
        transfer = dep.transfer
        self.transfer = [0.0] * n if transfer is None else as_times(transfer.time_s, n, "transfer.time_s").tolist()
        self.link_busy = _busy(None if transfer is None else transfer.link_busy_s, n, "link_busy_s")
        self.plink_busy = _busy(None if transfer is None else transfer.prefill_link_busy_s, n, "prefill_link_busy_s")
        self.lead = _busy(None if transfer is None else transfer.stream_lead_s, n, "stream_lead_s", signed=True)
        self.stream = _busy(None if transfer is None else transfer.stream_s, n, "stream_s")
        self.link_free = [0.0] * d.instances
        self.plink_free = [0.0] * dep.prefill.instances
        prompt, steps = req.input_tokens.tolist(), self.steps.tolist()
        self.steps_list = steps
        self.placement = placement
        # a placement's instances (append-prefills, pdplan.sim.turn_placement) count every token of a sequence; the
        # window cap (DecodePool.window_tokens) reaches only the plain instance: an upper bound for windowed models
        # PPD's instances run their engine's decode rule too (pdplan.sim.append_growth.append_instance)
        make = _plain_decode_instance(d) if placement is None else placement.decode_instance
        setup = DecodeSetup(
            d.step_time_s,
            d.max_batch,
            d.kv_capacity_tokens,
            prompt,
            steps,
            self.tl,
            self.decode_seg,
            not self.convention_b,
            d.state_tokens_per_seq,
            overlap_iterations(d.overlap_steps),
        )
        self.servers = self.decoders = [make(setup) for _ in range(d.instances)]
        self.unbatched = (
            None if self.service is None else UnbatchedPrefill(dep.prefill, self.service, self.routes, self.prefill_seg)
        )
        self.batched = (
            None
            if dep.prefill.batch_time_s is None
            else BatchedPrefill(
                dep.prefill, req, self.routes, self.prefill_seg, lambda t, inst: self.push(t, _BATCH_DONE, inst)
            )
        )
        self.dispatched = None if dep.prefill.start is None else self._dispatched(dep, n)
        self.prefetch: PrefetchFn | None = None
        if self.placement is not None:
            self.placement.attach(self.route_decode, self.dispatched)

    def _dispatched(self, dep: Disaggregated, n: int) -> DispatchedPrefill:
        """The dispatched pool: pinned routes, else the pre-drawn random routes, else round-robin / central /
        count-based (power-of-two with its pre-drawn pairs)."""
        pinned = check_routes(dep.prefill.routes, n, dep.prefill.instances, "prefill.routes")
        if pinned is None and dep.prefill.routing == "random":
            pinned = self.routes.tolist()
        pool = DispatchedPrefill(
            dep.prefill, pinned, self.prefill_seg, lambda t, inst: self.push(t, _DISPATCH_DONE, inst)
        )
        if pinned is None and dep.prefill.routing == "power-of-two":
            pool.draws = self.routes.tolist()  # the pairs drawn per request (pdplan.sim.prefill.static_routes)
        return pool

    def load_open_loop(self, arrival_s: FloatArray) -> None:
        """Open loop: prefill in bulk when unbatched (vectorised), else queue the arrivals."""
        self.tl.arrival = arrival_s.tolist()
        if self.service is None:
            self.ext = [(a, i, _ARRIVAL, i) for i, a in enumerate(arrival_s.tolist())]
            self.order = count(arrival_s.size)
            return
        done, inst = open_loop_done_s(arrival_s, self.service, self.routes, self.dep.prefill, self.prefill_seg)
        self.prefill_inst = inst.tolist()
        self.tl.prefill_done = done.tolist()
        if self.convention_b:
            self.tl.first_token = done.tolist()
        self.tl.finish = np.where(self.steps == 0, done, np.nan).tolist()
        todo = np.flatnonzero(self.steps > 0)
        todo = todo[np.argsort(done[todo], kind="stable")]
        times = done[todo].tolist()
        self.ext = [(t, k, _PREFILL_DONE, i) for k, (t, i) in enumerate(zip(times, todo.tolist(), strict=True))]
        self.order = count(todo.size)

    def handle(self, time_s: float, kind: int, payload: int) -> None:
        if kind == _PREFILL_DONE:
            self.prefill_done(payload, time_s)
        elif kind == _DISPATCH_DONE:
            self.dispatch_done(payload, time_s)
        elif kind == _FETCHED:
            assert self.dispatched is not None
            self.dispatched.submit(payload, time_s)
        elif kind == _ARRIVAL:
            self.tl.arrival[payload] = time_s
            on_decode = -1 if self.placement is None else self.placement.place(payload, time_s)
            if on_decode >= 0:
                self.touched.append(on_decode)
            elif self.unbatched is not None:
                self.push(self.unbatched.submit(payload, time_s), _PREFILL_DONE, payload)
                self.prefill_inst[payload] = self.unbatched.instance_of[payload]
            elif self.dispatched is not None and self.prefetch is not None:
                routes = self.dispatched.routes
                assert routes is not None
                self.push(self.prefetch(payload, routes[payload], time_s), _FETCHED, payload)
            elif self.dispatched is not None:
                self.dispatched.submit(payload, time_s)
            else:
                assert self.batched is not None
                self.batched.submit(payload, time_s)
        else:
            assert self.batched is not None
            for req in self.batched.batch_done(payload, time_s):
                self.prefill_inst[req] = payload
                self.prefill_done(req, time_s)

    def dispatch_done(self, inst: int, now_s: float) -> None:
        """The dispatched prompt on prefill instance ``inst`` ends: tell the listener, start the instance's next
        prompt, route this one on. A layer or chunk stream cannot start before its own prefill did."""
        assert self.dispatched is not None
        req = self.dispatched.running[inst]
        self.prefill_inst[req] = inst
        if self.lead is not None:
            self.lead[req] = min(self.lead[req], self.dispatched.service_of[req])
        if self.events is not None:
            self.events.prefill_done(req, inst, now_s)
        self.dispatched.release(inst, now_s)
        self.prefill_done(req, now_s)

    def prefill_done(self, req: int, now_s: float) -> None:
        """Prefill of ``req`` ends: finish it (no decode steps) or route it to a decode instance."""
        tl = self.tl
        tl.prefill_done[req] = now_s
        if self.convention_b:
            tl.first_token[req] = now_s
        if self.steps_list[req] == 0:
            tl.finish[req] = now_s
            self.finished(req, now_s)
            return
        inst = self.route_decode(req) if self.placement is None else self.placement.route(req, self.route_decode)
        self.decoders[inst].submit(req, self.kv_ready(req, inst, now_s))
        self.touched.append(inst)

    def kv_ready(self, req: int, inst: int, now_s: float) -> float:
        """When the KV of ``req`` is on decode instance ``inst`` (:class:`~pdplan.sim.spec.KvTransfer`).

        The stream starts at ``max(done − lead, links free)``, holds each modelled link for its
        busy time, and the KV is ready at ``max(done + time, start + stream)``.
        """
        link, plink = self.link_busy, self.plink_busy
        if link is None and plink is None:
            return now_s + self.transfer[req]
        pre = self.prefill_inst[req]
        start = now_s - (0.0 if self.lead is None else self.lead[req])
        if link is not None:
            start = max(start, self.link_free[inst])
        if plink is not None:
            start = max(start, self.plink_free[pre])
        if link is not None:
            self.link_free[inst] = start + link[req]
        if plink is not None:
            self.plink_free[pre] = start + plink[req]
        stream = self.transfer[req] if self.stream is None else self.stream[req]
        return max(now_s + self.transfer[req], start + stream)

    def route_decode(self, req: int) -> int:
        """The decode instance for ``req`` by the pool's routing (module docstring)."""
        decoders = self.decoders
        if len(decoders) == 1:
            return 0
        if self.decode_routes is not None:
            return int(self.decode_routes[req])
        if self.decode_rr >= 0:
            inst = self.decode_rr % len(decoders)
            self.decode_rr += 1
            return inst
        loads = [d.load for d in decoders]
        if self.decode_pairs is not None:  # power-of-two: the fewer of the two drawn, the first on a tie
            return count_pick("power-of-two", loads, self.decode_pairs[req])
        return loads.index(min(loads))  # ties: lowest index

    def result(self, warmup_fraction: float, order: IntArray | None = None) -> SimResult:
        pools = [
            ("prefill", self.dep.prefill.instances, self.prefill_seg),
            ("decode", self.dep.decode.instances, self.decode_seg),
        ]
        return _result(self.req, self.tl, pools, warmup_fraction, order)


class _ColocEngine(_Engine):
    def __init__(
        self, dep: Colocated, req: Requests, rng: np.random.Generator, events: RequestEvents | None = None
    ) -> None:
        super().__init__(req, events)
        check_colocated(dep, req)
        self.dep = dep
        n = req.count
        self.routes = check_routes(dep.routes, n, dep.instances, "routes")
        if self.routes is None and dep.routing == "random":
            self.routes = rng.integers(dep.instances, size=n).tolist()
        service = (
            [0.0] * n
            if dep.prefill_service_s is None
            else as_times(dep.prefill_service_s, n, "prefill_service_s").tolist()
        )
        prompt = req.input_tokens.tolist()
        steps = decode_steps(req, "B").tolist()
        left = list(prompt)
        self.seg = Segments()
        self.servers = self.instances = [
            ColocatedInstance(dep, prompt, steps, service, left, self.tl, self.seg, *self._callbacks(i))
            for i in range(dep.instances)
        ]

    def _callbacks(self, inst: int) -> tuple[Callable[[int, float], PrefillStart] | None, PrefilledFn | None]:
        """Instance ``inst``'s bound ``start`` and prefill-end callbacks (None where not given)."""
        start, events = self.dep.start, self.events
        bound = None if start is None else (lambda req, now: start(req, inst, now))
        told = None if events is None else (lambda req, now: events.prefill_done(req, inst, now))
        return bound, told

    def load_open_loop(self, arrival_s: FloatArray) -> None:
        """Open loop: all arrivals are known external events."""
        self.tl.arrival = arrival_s.tolist()
        self.ext = [(a, i, _ARRIVAL, i) for i, a in enumerate(arrival_s.tolist())]
        self.order = count(arrival_s.size)

    def handle(self, time_s: float, kind: int, payload: int) -> None:
        self.tl.arrival[payload] = time_s
        insts = self.instances
        if self.routes is not None:
            inst = self.routes[payload]
        else:
            loads = [s.load() for s in insts]
            inst = loads.index(min(loads))  # ties: lowest index
        insts[inst].submit(payload, time_s)
        self.touched.append(inst)

    def result(self, warmup_fraction: float, order: IntArray | None = None) -> SimResult:
        pools = [("colocated", self.dep.instances, self.seg)]
        return _result(self.req, self.tl, pools, warmup_fraction, order)


def _result(
    req: Requests, tl: Timeline, pools: list[tuple[str, int, Segments]], warmup: float, order: IntArray | None
) -> SimResult:
    """The result over all requests in id order, or over requests ``order`` in that order."""
    if order is None:
        return build_result(req, tl, pools, warmup)
    idx = order.tolist()
    kept = Timeline(len(idx))
    for name in Timeline.__slots__:
        values = getattr(tl, name)
        setattr(kept, name, [values[i] for i in idx])
    return build_result(Requests(req.input_tokens[order], req.output_tokens[order]), kept, pools, warmup)


def _busy(values: ArrayLike | None, n: int, name: str, signed: bool = False) -> list[float] | None:
    """Per-request link times as a list (``signed``: may be negative), or None when not given."""
    if values is None:
        return None
    arr = np.asarray(values, dtype=np.float64)
    if not signed:
        arr = as_times(arr, n, name)
    elif arr.shape != (n,) or not bool(np.all(np.isfinite(arr))):
        raise SpecError(f"{name} must be {n} finite values")
    out: list[float] = arr.tolist()
    return out


def _engine(
    deployment: Deployment,
    requests: Requests,
    rng: np.random.Generator,
    events: RequestEvents | None = None,
    placement: TurnPlacement | None = None,
) -> _DisaggEngine | _ColocEngine:
    if isinstance(deployment, Disaggregated):
        return _DisaggEngine(deployment, requests, rng, events, placement)
    if isinstance(deployment, Colocated):
        return _ColocEngine(deployment, requests, rng, events)
    raise SpecError(f"deployment must be Disaggregated or Colocated, got {type(deployment)}")


def simulate(
    arrival_s: ArrayLike,
    requests: Requests,
    deployment: Deployment,
    rng: np.random.Generator,
    *,
    warmup_fraction: float = 0.1,
) -> SimResult:
    """Open-loop simulation of N requests arriving at ``arrival_s`` (sorted, seconds).

    ``rng`` is used only for random routing draws; the same seed gives identical results.
    """
    arrival = as_times(arrival_s, requests.count, "arrival_s")
    if np.any(np.diff(arrival) < 0):
        raise SpecError("arrival_s must be sorted (non-decreasing)")
    engine = _engine(deployment, requests, rng)
    engine.load_open_loop(arrival)
    engine.run()
    return engine.result(warmup_fraction)


def simulate_closed_loop(
    concurrency: int,
    requests: Requests,
    deployment: Deployment,
    rng: np.random.Generator,
    *,
    think_time_s: float = 0.0,
    warmup_fraction: float = 0.1,
) -> SimResult:
    """Closed-loop simulation: ``concurrency`` clients issue the N requests in id order.

    Each client sends its next request ``think_time_s`` after its previous one finished; the run ends
    when all N have finished. Throughput is measured over the window of :mod:`pdplan.sim.metrics`.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise SpecError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if not (math.isfinite(think_time_s) and think_time_s >= 0):
        raise SpecError(f"think_time_s must be finite and >= 0, got {think_time_s}")
    engine = _engine(deployment, requests, rng)
    engine.start_closed_loop(concurrency, think_time_s)
    engine.run()
    return engine.result(warmup_fraction)


def simulate_events(
    arrival_s: ArrayLike,
    requests: Requests,
    deployment: Deployment,
    rng: np.random.Generator,
    events: RequestEvents,
    *,
    warmup_fraction: float = 0.1,
    count_until_s: float = math.inf,
    placement: TurnPlacement | None = None,
    prefetch: PrefetchFn | None = None,
) -> tuple[SimResult, IntArray]:
    """Open loop with released requests (module docstring): ``arrival_s`` [N] holds the known arrival times and NaN
    for the requests ``events.finished`` releases. Every request is simulated; the result holds those arriving by
    ``count_until_s`` (later ones are the run's drain), in arrival order (ties by id), the first
    ``warmup_fraction`` of them not counted; ``placement``: a disaggregated deployment's per-turn placement (module
    docstring); ``prefetch``: what a prompt does between its arrival at a dispatched prefill pool with pinned routes
    and its joining its instance's queue (:data:`PrefetchFn`). Returns the result and the request ids in its
    order."""
    arrival = np.asarray(arrival_s, dtype=np.float64)
    if arrival.shape != (requests.count,):
        raise SpecError(f"arrival_s must have shape ({requests.count},), got {arrival.shape}")
    known = np.flatnonzero(~np.isnan(arrival))
    if known.size == 0 or bool(np.any(arrival[known] < 0)) or not bool(np.all(np.isfinite(arrival[known]))):
        raise SpecError("arrival_s needs at least one known arrival; known arrivals must be finite and >= 0")
    engine = _engine(deployment, requests, rng, events, placement)
    if prefetch is not None:
        if not isinstance(engine, _DisaggEngine) or engine.dispatched is None or engine.dispatched.routes is None:
            raise SpecError("prefetch needs a disaggregated prefill pool dispatched over pinned routes")
        engine.prefetch = prefetch
    engine.ext = [(float(arrival[i]), k, _ARRIVAL, int(i)) for k, i in enumerate(known.tolist())]
    heapq.heapify(engine.ext)
    engine.order = count(known.size)
    engine.run()
    issued = np.asarray(engine.tl.arrival, dtype=np.float64)
    if bool(np.isnan(issued).any()):
        raise SpecError(f"{int(np.isnan(issued).sum())} requests were never released (events.finished)")
    order = np.lexsort((np.arange(issued.size), issued))
    order = order[issued[order] <= count_until_s]
    if order.size == 0:
        raise SpecError(f"no request arrives by count_until_s = {count_until_s} s")
    return engine.result(warmup_fraction, order.astype(np.int64)), order.astype(np.int64)
