"""One colocated instance: prefill and decode share the GPU (docs/queueing.md §3).

Common model: arriving requests join an FCFS prefill queue. A request is *admitted* (takes a seat out
of ``max_batch`` and KV, below) when its prefill starts; the queue head blocks the rest while it does not fit. The
iteration that completes a prompt samples token 1, out at its end (TTFT) or, with an overlap scheduler of k extra
steps (``Colocated.overlap_steps``), at the end of the k-th iteration after it, whatever those iterations carry
(:mod:`pdplan.sim.overlap_lag`); the sequence joins the decode batch for the next iteration; it then needs n decode
steps (n = output − 1), each giving every decoding sequence one token (context ``l + j`` at its j-th step).

The KV follows the engine (``Colocated.reserve_kv``; docs/queueing.md §2.6):

* *reserved* (TensorRT-LLM ``GUARANTEED_NO_EVICT``): admission takes the final footprint ``min(l + n, w) + s``,
  released at completion; nothing is ever preempted.
* *growing* (vLLM V1; chunked only): admission takes the prompt's ``min(l, w) + s`` and needs room beside
  the decode batch's next step; a decoding sequence holds its context plus the token it writes, ``l + j + 1 + s``
  during its j-th step (vLLM ``allocate_slots`` before each step). When the next step would not fit, the most
  recently admitted decode is preempted (vLLM ``self.running.pop()``): its KV is freed, it goes back to the head of
  the waiting requests, and when admitted again its whole context ``l + j`` is recomputed as a prompt (chunks,
  priced by ``chunk_time_s``; with ``Colocated.recompute_hits``, vLLM V1's prefix caching, less the prefix of it the
  pool's allocations left in the free block queue: :mod:`pdplan.sim.recompute_hits`) before it decodes its n − j
  remaining steps; its first token is not emitted again (vLLM's recompute also samples a token, here left to the next
  decode step). No waiting request is admitted at a
  boundary that preempted (vLLM V1 schedules waiting requests only when none was preempted). Decode-only segments
  end at the step the pool would overflow.
* *ratio* (SGLang, ``Colocated.ratio_admission``; chunked only): the pool holds the growing context as above, but a
  waiting request is admitted only while its prompt plus its clipped output fits beside the running requests' context
  and ``new_token_ratio`` times their clipped remaining output (and the prompts and outputs of those still in
  prefill); when the next step does not fit, the least-decoded request (ties: the longest prompt) is retracted to the
  queue's *tail* and recomputed when admitted again, and the ratio decays per decode step, jumps at a retraction and
  resets when idle (:mod:`pdplan.sim.ratio_admission`, from SGLang's ``PrefillAdder`` and ``retract_decode``).

``"prefill-first"`` (vanilla vLLM without chunking): at every iteration boundary, if an admissible
prefill is waiting, the next iteration is that one prompt alone, lasting ``prefill_service_s[i]``,
and all decodes stall; otherwise the iteration is a decode step ``decode_step_s(B, K)``. Decodes
therefore starve while prefills queue (§3 "every prefill stalls all decodes for S(l)").

``"chunked"`` (Sarathi-Serve stall-free batching): every iteration runs all B decoding sequences
plus up to ``C − B`` prefill tokens (C = ``token_budget``) taken FCFS from the queue head — a prompt
may be split over several iterations and one iteration may carry pieces of several prompts.
Iteration time = ``decode_step_s(B, K) + Σ_pieces chunk_time_s(tokens, context_before_piece)``;
``decode_step_s`` is evaluated with B = 0 when only prefill runs, so its fixed part (t0) is paid by
every iteration, as in §3's ``τ = t0 + t1B + t2K + t_p c_k + …``.

Decode-only stretches are planned as vectorised segments (:class:`~pdplan.sim.batch.ActiveSet`);
iterations carrying prefill work are simulated one by one.

With a ``start`` callback (a prefix cache, :mod:`pdplan.sim.reuse`) a request's prefill cost is asked when it is
admitted, the iteration that starts it: prefill-first serves the answer's ``service_s``; chunked takes its
``cached_tokens`` as already computed (its chunks start after them, their attention over them) and adds its
``load_s`` to that iteration (the engine waits for the load). ``prefilled`` hears each prompt's end.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import numpy as np

from pdplan.errors import SpecError
from pdplan.sim.batch import ActiveSet, Segments, Timeline
from pdplan.sim.overlap_lag import OverlapLag, overlap_iterations
from pdplan.sim.ratio_admission import RatioBook
from pdplan.sim.recompute_hits import FreedQueue
from pdplan.sim.spec import ChunkTimeFn, Colocated, PrefillStart
from pdplan.types import FloatArray

PrefilledFn = Callable[[int, float], None]
"""``prefilled(request, now_s)``: the request's prompt is complete on this instance."""

_EMPTY: FloatArray = np.zeros(0, dtype=np.float64)
_IDLE, _DECODE, _PREFILL, _MIXED = 0, 1, 2, 3


class ColocatedInstance:
    """State of one colocated instance; driven by the engine via ``submit`` and ``fire``."""

    def __init__(
        self,
        spec: Colocated,
        prompt: list[int],
        steps: list[int],
        service: list[float],
        left: list[int],
        timeline: Timeline,
        segments: Segments,
        start: Callable[[int, float], PrefillStart] | None = None,
        prefilled: PrefilledFn | None = None,
    ) -> None:
        self.act = ActiveSet(spec.step_time_s, spec.window_tokens)
        self.start, self.prefilled = start, prefilled
        self.load_s = 0.0  # cache loads the next iteration waits for
        self.chunked = spec.scheduler == "chunked"
        self.chunk_fn: ChunkTimeFn | None = spec.chunk_time_s
        self.budget = spec.token_budget
        self.mixed = spec.mixed
        self.max_batch = spec.max_batch
        self.kv_cap = spec.kv_capacity_tokens
        self.state = spec.state_tokens_per_seq  # fixed-state slots per sequence
        self.window = math.inf if spec.window_tokens is None else spec.window_tokens  # min(l + n, w) held at most
        self.prompt, self.steps, self.service, self.left = prompt, steps, service, left
        self.tl, self.seg = timeline, segments
        self.lag = OverlapLag(overlap_iterations(spec.overlap_steps), timeline)
        self.kv_used = 0.0  # reserved: every admitted request's footprint; growing: the prompts still prefilling
        self.reserve = spec.reserve_kv
        self.running: dict[int, None] = {}  # growing: decoding sequences in admission order (the last is preempted)
        self.resumed: dict[int, tuple[int, int]] = {}  # growing: preempted request → (context to recompute, steps left)
        self.hold = False  # growing: this boundary preempted, admit no waiting request
        self.preemptions = 0
        self.book = None if spec.ratio_admission is None else RatioBook(spec.ratio_admission)
        hits = spec.recompute_hits and not self.reserve and self.book is None
        self.lru = FreedQueue(self.kv_cap) if hits else None  # vLLM with prefix caching: what a victim finds again
        self.counted: dict[int, int] = {}  # ratio: each request in prefill → the output its admission counted
        self.pending_out = 0  # ratio: Σ counted
        self.prefilling = 0  # seats held by admitted sequences still in prefill
        self.queue: deque[int] = deque()
        self.admitted = 0  # queue-head requests holding a seat
        self.backlog = 0  # prompt tokens not yet prefilled (routing key)
        self.t = 0.0
        self.kind = _IDLE
        self.plan: list[tuple[int, int]] = []  # (request, prefill tokens) of the next iteration
        self.bounds = _EMPTY
        self.next_k = -1
        self.next_time = math.inf

    def load(self) -> int:
        """Routing key for least-work: outstanding prefill tokens, then seats in use."""
        return (self.backlog << 32) + self.act.b + self.prefilling

    def submit(self, req: int, now_s: float) -> None:
        """A request arrives at ``now_s`` (≥ the time of the last processed boundary)."""
        self.queue.append(req)
        self.backlog += self.prompt[req]
        if self.kind == _IDLE:
            self.next_time = min(self.next_time, now_s)
        elif self.kind == _DECODE and now_s < self.next_time and len(self.queue) == 1:
            k = int(np.searchsorted(self.bounds, now_s - self.t))
            if k < self.next_k:
                self.next_k = k
                self.next_time = self.t + float(self.bounds[k])

    def fire(self) -> list[int]:
        """Process the iteration boundary at ``next_time``; return the requests finished there."""
        now = self.next_time
        act = self.act
        done: list[int] = []
        if self.kind == _DECODE:
            k = self.next_k + 1
            self.seg.add(self.t, now, act.b, k)
            self.lag.ended((self.t + self.bounds[:k]).tolist())
            self._taken(k * act.b)  # one token per sequence per step
            act.s += k
            if self.book is not None:
                self.book.decoded(k)
        elif self.kind == _PREFILL:
            self.seg.add(self.t, now, act.b, 0)  # decodes stalled: resident, no step
            self.lag.ended((now,))
        elif self.kind == _MIXED:
            self.seg.add(self.t, now, act.b, 1 if act.b else 0)
            self.lag.ended((now,))
            act.s += 1
            self._taken(act.b)
            if self.book is not None and act.b:
                self.book.decoded(1)
        self.t = now
        for req in act.pop_finished():
            self._finish(req, now, done)
        for req, tokens in self.plan:
            self.left[req] -= tokens
            self.backlog -= tokens
            if self.left[req] == 0:
                self._prefilled(req, now, done)
        self.plan = []
        if not self.reserve:
            self.hold = self._make_room()
        if self.chunked:
            self._plan_chunked()
        else:
            self._plan_prefill_first()
        if self.kind == _IDLE:  # nothing launched behind a token sampled here: it is out now
            self.lag.idle(now)
        return done

    def _taken(self, tokens: float) -> None:
        """Allocations from the free block queue (vLLM with prefix caching; :mod:`pdplan.sim.recompute_hits`)."""
        if self.lru is not None:
            self.lru.taken(tokens)

    def _finish(self, req: int, now: float, done: list[int]) -> None:
        self.tl.finish[req] = now
        if self.reserve:
            self.kv_used -= self._need(req)
        elif req in self.running:  # its KV was the decode batch's (or released at its prefill's end)
            del self.running[req]
            if self.lru is not None:
                self.lru.freed(min(self.prompt[req] + self.steps[req], self.window) + self.state)
            if self.book is not None:
                self.book.leave(req)
        done.append(req)

    def _need(self, req: int) -> float:
        """KV slots ``req`` takes at admission (module docstring): reserved min(l + n, w) + s; growing min(c, w) + s,
        c its prompt or, preempted, the context it recomputes."""
        if self.reserve:
            return min(self.prompt[req] + self.steps[req], self.window) + self.state
        resumed = self.resumed.get(req)
        return min(self.prompt[req] if resumed is None else resumed[0], self.window) + self.state

    def _decode_need(self) -> float:
        """Growing: the KV the decode batch holds during its next step, each sequence's context, the token it writes
        and its fixed state."""
        return self.act.context() + self.act.b * (1.0 + self.state)

    def _make_room(self) -> bool:
        """Growing: preempt the latest admitted decodes (vLLM) or retract the least-decoded ones (SGLang) until the
        next step fits (module docstring); whether any was."""
        preempted = False
        while self.act.b and self.kv_used + self._decode_need() > self.kv_cap:
            if self.book is None:
                req, _ = self.running.popitem()
            else:
                req = self._least_decoded()
                del self.running[req]
                self.book.leave(req)
            context, steps_left = self.act.remove(req)
            self.resumed[req] = (context, steps_left)
            if self.lru is not None:
                self.lru.preempted(req, min(context, self.window) + self.state)
            self.left[req] = context
            self.backlog += context
            if self.book is None:
                self.queue.insert(self.admitted, req)  # ahead of every waiting request, behind the prefilling ones
            else:
                self.queue.append(req)  # SGLang _add_request_to_queue: behind every waiting request
            self.preemptions += 1
            preempted = True
        if preempted and self.book is not None:
            self._retracted_ratio()
        return preempted

    def _least_decoded(self) -> int:
        """SGLang's retraction victim: the fewest output tokens (n + 1 − steps left), ties the longest prompt, and
        among equals the latest in the batch (a stable descending sort popped from its end)."""
        assert self.book is not None
        ends, s, steps, prompt = self.book.ends, self.act.s, self.steps, self.prompt
        return min(reversed(self.running), key=lambda r: (steps[r] - (ends[r] - s), -prompt[r]))

    def _retracted_ratio(self) -> None:
        """The ratio a retraction sets over the requests still running (:meth:`RatioBook.retracted`)."""
        assert self.book is not None
        if not self.running:
            raise SpecError("a retraction emptied the decode batch: the prompts in prefill leave no room for one")
        ends, s = self.book.ends, self.act.s
        output = sum(self.steps[r] + 1 - (ends[r] - s) for r in self.running)
        max_new = sum(self.steps[r] + 1 for r in self.running)
        self.book.retracted(output, max_new, len(self.running))

    def _prefilled(self, req: int, now: float, done: list[int]) -> None:
        """Prompt complete at ``now``: token 1 is out; join the decode batch (or finish). Growing: its prompt's KV
        becomes the decode batch's; a preempted request's recompute rejoins the batch with the steps it had left."""
        self.queue.popleft()
        self.admitted -= 1
        self.prefilling -= 1
        if not self.reserve:
            self.kv_used -= self._need(req)
            self.pending_out -= self.counted.pop(req, 0)
            resumed = self.resumed.pop(req, None)
            if resumed is not None:
                self._join(req, resumed[0], resumed[1])
                return
        self.lag.sampled(req, now)
        if self.prefilled is not None:
            self.prefilled(req, now)
        if self.steps[req] > 0:
            self.tl.admit[req] = now
            if self.reserve:
                self.act.add(req, self.prompt[req], self.steps[req])
            else:
                self._join(req, self.prompt[req], self.steps[req])
        else:
            self._finish(req, now, done)

    def _join(self, req: int, context: int, steps: int) -> None:
        """Growing: ``req`` joins the decode batch with ``context`` tokens and ``steps`` steps to go."""
        if self.book is not None:
            self.book.join(req, self.act.s, steps)
        self.act.add(req, context, steps)
        self.running[req] = None

    def _reserve(self, req: int) -> bool:
        need = self._need(req)
        held = self.kv_used if self.reserve else self.kv_used + self._decode_need()
        if self.act.b + self.prefilling >= self.max_batch:
            return False
        if self.book is None:
            if held + need > self.kv_cap:
                return False
        elif not self._ratio_fits(req, held + need):
            return False
        self.kv_used += need
        self.prefilling += 1
        self.admitted += 1
        if req in self.resumed:  # a recompute: its own blocks left in the free queue are hits (recompute_hits)
            if self.lru is not None:
                hit = min(self.lru.hits(req), self.left[req] - 1.0)  # at least one token is computed (vLLM)
                self.lru.taken(need - hit)
                cached = max(int(hit), 0)
                self.left[req] -= cached
                self.backlog -= cached
            return True
        if self.lru is not None:
            self.lru.taken(need)
        if self.start is not None:
            begun = self.start(req, self.t)
            self.left[req] -= begun.cached_tokens
            self.backlog -= begun.cached_tokens
            self.service[req] = begun.service_s
            self.load_s += begun.load_s
        return True

    def _ratio_fits(self, req: int, held: float) -> bool:
        """SGLang's ``add_one_req`` check (module docstring): ``held`` (the pool with ``req``'s prompt) plus the
        output counted for ``req`` (min(n + 1, c) new, min(steps left, c) retracted), for the requests in prefill and
        the running requests' ratio share must stay below the pool; on success ``req``'s count is kept."""
        assert self.book is not None
        resumed = self.resumed.get(req)
        out = min(self.steps[req] + 1 if resumed is None else resumed[1], self.book.rule.clip_tokens)
        if held + out + self.pending_out + self.book.reserve_tokens(self.act.s) >= self.kv_cap:
            return False
        self.counted[req] = out
        self.pending_out += out
        return True

    def _plan_prefill_first(self) -> None:
        queue = self.queue
        if queue and (self.admitted or self._reserve(queue[0])):
            req = queue[0]
            self.plan = [(req, self.left[req])]
            self.kind = _PREFILL
            self.next_time = self.t + self.service[req]  # a start callback's service holds its loads
            self.load_s = 0.0
        else:
            self._plan_decode()

    def _plan_chunked(self) -> None:
        budget = self.budget - self.act.b if self.mixed else self.budget
        queue, i = self.queue, 0
        plan: list[tuple[int, int]] = []
        while budget > 0 and i < len(queue):
            req = queue[i]
            if i >= self.admitted and (self.hold or not self._reserve(req)):
                break
            take = min(self.left[req], budget)
            plan.append((req, take))
            budget -= take
            i += 1
        if not plan:
            self._plan_decode()
            return
        assert self.chunk_fn is not None
        tokens = np.array([p[1] for p in plan], dtype=np.float64)
        before = np.array([self._prompt(r) - self.left[r] for r, _ in plan], dtype=np.float64)
        riding = float(self.act.b) if self.mixed else 0.0  # unmixed: a prefill-only step, the decodes wait
        batch = np.array([riding])
        context = np.array([float(self.act.context()) if riding else 0.0])
        step = float(np.asarray(self.act.step_fn(batch, context))[0])
        chunk = float(np.sum(self.chunk_fn(tokens, before, riding)))
        self.plan = plan
        self.kind = _MIXED if self.mixed else _PREFILL
        self.next_time = self.t + step + chunk + self.load_s
        self.load_s = 0.0

    def _prompt(self, req: int) -> int:
        """The tokens ``req``'s prefill computes in all: its prompt, or preempted, the context it recomputes."""
        resumed = self.resumed.get(req)
        return self.prompt[req] if resumed is None else resumed[0]

    def _plan_decode(self) -> None:
        if self.act.b == 0:
            if self.book is not None:
                if self.queue and not self.admitted:
                    raise SpecError("an idle instance cannot admit its queue's head: its prompt and output fill the KV")
                self.book.idle()
            self.kind, self.bounds, self.next_k = _IDLE, _EMPTY, -1
            self.next_time = math.inf
            return
        self.kind = _DECODE
        self.bounds = self.act.segment()
        if not self.reserve:  # end the segment where the next step would not fit; steps 0 … ⌊free/B⌋ do
            free = self.kv_cap - self.kv_used - self._decode_need()
            self.bounds = self.bounds[: int(free // self.act.b) + 1]
        self.next_k = self.bounds.size - 1
        self.next_time = self.t + float(self.bounds[-1])
