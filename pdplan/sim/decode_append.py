"""A disaggregated decode instance that also runs append-prefills (PPD, arXiv 2603.13358) and keeps sessions' KV.

It is :class:`~pdplan.sim.decode.DecodeInstance` (continuous batching, FCFS admission at step boundaries, a sequence
reserving ``l + n + s`` KV slots at admission: TensorRT-LLM's rule; SGLang's and vLLM's decode servers grow on demand
and run their own rules, :mod:`pdplan.sim.append_growth`, whose instances derive from this one) with two additions
that :mod:`pdplan.sim.turn_placement` uses:

* **Session KV** (:class:`~pdplan.sim.decode_cache.DecodeKvCache`): a finished sequence's whole blocks stay in the
  free KV until running sequences or newer histories need the room.
* **Append-prefills.** A turn placed here (:meth:`AppendDecodeInstance.submit_append`) arrives with no KV transfer
  and waits in the same FCFS queue as the sequences whose KV came over the link. When it is admitted (a seat and its
  reservation, as any sequence) it takes the longest prefix of its prompt that the cache holds *then* (a history
  evicted while it waited is recomputed: the engine would recompute it too) and has the rest of its prompt to
  compute. While any admitted append has tokens left, every iteration is one *mixed step*: all B decoding sequences
  advance one token and up to ``budget − B`` prompt tokens of the admitted appends ride along, FCFS (decode-first
  chunked prefill, vLLM's scheduler with ``max_num_batched_tokens`` = budget). A mixed step lasts
  ``decode_step_s(B, K) + Σ chunk_s(c_i, before_i)``: the colocated simulator's price of an iteration with prefill
  pieces (:class:`pdplan.sim.deployment.SimChunkPrice`, the roofline tables of this instance's hardware; the decode
  step with B = 0 when only the append runs, so its fixed part is paid), which every co-running sequence waits
  for: the interference on their TPOT. The step that completes an append's prompt samples its token 1, which is out
  at its end or, under the engine's overlap scheduler, k iterations later (:mod:`pdplan.sim.overlap_lag`, as every
  instance's first tokens); it then joins the decode batch for its remaining ``output − 1`` steps. Sequences
  admitted at the boundary of a mixed step take their first step in it (convention A: token 1 sampled at its end).

**Attention-DP ranks** (``AppendWork.ranks``, an instance of D > 1 ranks; :mod:`pdplan.sim.append_ranks`): an
append runs on the rank that holds its session, the FCFS fill is per rank with the rank's own budget (less its
⌈B/D⌉ decoding sequences), and a mixed step lasts the decode step plus the slowest rank's pieces and the experts over
every rank's tokens. Each rank keeps its own sessions' KV (SGLang's ``--enable-dp-attention``: one scheduler, KV pool
and radix cache per rank, ``DataParallelController.launch_dp_attention_schedulers`` in
``python/sglang/srt/managers/data_parallel_controller.py``, sgl-project/sglang 000a3db; vLLM: each DP rank an engine
core with its own scheduler and ``KVCacheManager``): one :class:`~pdplan.sim.decode_cache.DecodeKvCache` per rank, of
the instance's capacity / D less what the rank's admitted sequences (their sessions' rank) reserve, so a rank's
histories compete for its own room alone (until 2026-12-07 one cache per instance, every rank's histories in one
LRU). Admission stays the instance's (its KV and seats over every rank, as the balanced step law runs B/D a rank), so
a rank's sequences may reserve past its D-th: its cache then holds nothing.

Between mixed steps the instance plans plain decode segments as :class:`~pdplan.sim.decode.DecodeInstance` does; an
arriving append cuts the segment at the next step boundary (as an arriving KV does when a seat is free).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdplan.sim.append_ranks import RankPieces
from pdplan.sim.decode import DecodeSetup, MixedStepInstance
from pdplan.sim.decode_cache import DecodeKvCache
from pdplan.sim.spec import ChunkTimeFn

BlocksFn = Callable[[int, int], list[int]]
"""``blocks(request, count)``: the first ``count`` block ids of ``request`` (:func:`pdplan.sim.reuse_requests.
blocks_of`)."""


@dataclass(frozen=True, slots=True)
class AppendWork:
    """What every decode instance of one run shares to run append-prefills (module docstring)."""

    chunk_s: ChunkTimeFn
    """Prefill pieces' time on a decode instance (:class:`pdplan.sim.deployment.SimChunkPrice` of its hardware)."""
    budget_tokens: int
    """Tokens one iteration may carry (decodes and prefill pieces): the engine's ``max_num_batched_tokens``."""
    block_tokens: int
    blocks: BlocksFn
    lookup_blocks: list[int]
    """Whole blocks a prompt may hit: ``⌊(P − 1)/B⌋`` (the last prompt token is always computed)."""
    prompt_blocks: list[int]
    sequence_blocks: list[int]
    append_steps: list[int]
    """Decode steps after token 1 of a turn whose prompt runs here: ``output − 1``."""
    hit_tokens: list[int]
    """Out: per request, the history tokens its decode instance's cache gave it at admission (appends only)."""
    ranks: RankPieces | None = None
    """An instance of D > 1 attention-DP ranks: its mixed steps' price per rank (:mod:`pdplan.sim.append_ranks`);
    None: one rank, :attr:`chunk_s` summed over the pieces."""
    rank_of: list[int] | None = None
    """With :attr:`ranks`: per request, the rank that holds its session (and so runs its append)."""


class AppendDecodeInstance(MixedStepInstance):
    """A decode instance running append-prefills in mixed steps, with its sessions' KV (module docstring)."""

    def __init__(self, setup: DecodeSetup, work: AppendWork) -> None:
        super().__init__(setup)
        self.work = work
        ranks = 1 if work.ranks is None else work.ranks.ranks
        # one session KV per rank, each of the instance's capacity / D (module docstring, Attention-DP ranks)
        self.caches = [DecodeKvCache(setup.kv_capacity_tokens / ranks, work.block_tokens) for _ in range(ranks)]
        self.rank_used = [0.0] * ranks  # KV slots reserved by the admitted sequences of each rank
        self.appends: set[int] = set()  # placed here, not yet through their prefill
        self.left: dict[int, int] = {}  # admitted append -> prompt tokens still to compute
        self.prefilling: deque[int] = deque()  # admitted appends, FCFS
        self.plan: list[tuple[int, int]] = []  # (append, tokens) of the mixed step under way
        self.taken: dict[int, list[int]] = {}  # admitted sequence -> the blocks it took from the cache

    # ---- the engine's side ----

    def submit_append(self, req: int, now_s: float) -> None:
        """Turn ``req`` runs its prefill here, from ``now_s`` (no KV transfer)."""
        self.appends.add(req)
        self.submit(req, now_s)

    def fire(self) -> list[int]:
        """Process the boundary at ``next_time`` (a mixed step's end or a decode segment's event)."""
        now = self.next_time
        act = self.act
        if self.plan:
            self.seg.add(self.t, now, act.b, 1 if act.b else 0)
            act.s += 1
            self.lag.ended((now,))
        elif act.b > 0:
            k = self.next_k + 1
            self.seg.add(self.t, now, act.b, k)
            self.lag.ended((self.t + self.bounds[:k]).tolist())
            act.s += k
        self.t = now
        done = act.pop_finished()
        for req in done:
            self._release(req, now)
        for req, tokens in self.plan:
            self.left[req] -= tokens
            if self.left[req] == 0:
                self._prefilled(req, now, done)
        self.plan = []
        self.load -= len(done)
        admitted = self._admit(now)
        self._plan(admitted)
        return done

    # ---- estimates for the score rule (pdplan.sim.turn_placement) ----

    def step_s(self, extra_seqs: int = 0, extra_context: float = 0.0) -> float:
        """One decode step's time now, with ``extra_seqs`` more sequences of ``extra_context`` more tokens."""
        act = self.act
        batch = np.array([float(act.b + extra_seqs)])
        context = np.array([float(act.context() if act.b else 0) + extra_context])
        return float(np.asarray(act.step_fn(batch, context))[0])

    def append_tokens_ahead(self, rank: int | None = None) -> int:
        """Prompt tokens of the appends placed here (on ``rank``: those its rank runs) and not yet computed (the
        cache's hits taken off those admitted; those still queued counted whole: their hit is known only at
        admission)."""
        of = self.work.rank_of
        mine = (lambda r: True) if rank is None or of is None else (lambda r: of[r] == rank)
        queued = sum(self.prompt[r] for r in self.appends if r not in self.left and mine(r))
        return queued + sum(self.left[r] for r in self.prefilling if mine(r))

    def prompt_room(self) -> int:
        """Prompt tokens one rank's step may carry now: the budget less the rank's decoding sequences."""
        ranks = self.work.ranks
        if ranks is None:
            return self.work.budget_tokens - self.act.b
        return ranks.rank_budget(self.work.budget_tokens, self.act.b)

    def rank_of(self, req: int) -> int:
        """The rank that holds ``req``'s session (0 on one rank)."""
        of = self.work.rank_of
        return 0 if of is None or len(self.caches) == 1 else of[req]

    def cache_of(self, req: int) -> DecodeKvCache:
        """The session KV of the rank that holds ``req``'s session."""
        return self.caches[self.rank_of(req)]

    def free_tokens(self, rank: int) -> float:
        """The KV slots ``rank`` leaves free to its session KV: its capacity (the instance's / D) less what its
        admitted sequences reserve (at least 0: the instance admits over all ranks, module docstring)."""
        if len(self.caches) == 1:
            return self.kv_cap - self.kv_used
        return max(self.kv_cap / len(self.caches) - self.rank_used[rank], 0.0)

    def seats_in_use(self) -> int:
        """Seats held by decoding sequences and admitted appends."""
        return self.act.b + len(self.prefilling)

    # ---- internals ----

    def _release(self, req: int, now: float) -> None:
        """A sequence finished: free its reservation, keep its whole blocks as session KV."""
        self.tl.finish[req] = now
        need = self.prompt[req] + self.steps[req] + self.state
        self.kv_used -= need
        rank = self.rank_of(req)
        self.rank_used[rank] -= need
        work, cache = self.work, self.caches[rank]
        cache.release(self.taken.pop(req))
        cache.keep(work.blocks(req, work.sequence_blocks[req]), self.free_tokens(rank))

    def _prefilled(self, req: int, now: float, done: list[int]) -> None:
        """An append's prompt is complete at ``now``: token 1 is out; it joins the decode batch (or finishes)."""
        self.prefilling.remove(req)
        self.appends.discard(req)
        del self.left[req]
        tl = self.tl
        tl.prefill_done[req] = tl.admit[req] = now
        self.lag.sampled(req, now)  # token 1 sampled at the append's last step, out k iterations later
        steps = self.work.append_steps[req]
        if steps > 0:
            self._join(req, self.prompt[req], steps)
        else:
            self._release(req, now)
            done.append(req)

    def _admit(self, now: float) -> list[int]:
        """FCFS admission as :class:`DecodeInstance` (seats count admitted appends too); an admitted sequence takes
        its blocks out of the cache, an append its cached history (module docstring)."""
        pending, waiting = self.pending, self.waiting
        while pending and pending[0][0] <= now:
            waiting.append(heapq.heappop(pending)[1])
        admitted: list[int] = []
        while waiting and self.seats_in_use() < self.max_batch:
            req = waiting[0]
            need = self.prompt[req] + self.steps[req] + self.state
            if self.kv_used + need > self.kv_cap:
                break
            waiting.popleft()
            self.kv_used += need
            self.rank_used[self.rank_of(req)] += need
            self._start(req, now, admitted)
        return admitted

    def _start(self, req: int, now: float, admitted: list[int]) -> None:
        """Admitted ``req`` takes its blocks out of its rank's cache: an append its cached history, whose rest it has
        to compute; a sequence whose KV came over the link its prompt's blocks, joining the decode batch."""
        work, rank = self.work, self.rank_of(req)
        cache = self.caches[rank]
        if req in self.appends:
            hit = cache.held_prefix(work.blocks(req, work.lookup_blocks[req]))
            self.taken[req] = work.blocks(req, hit)
            cache.take(self.taken[req])
            work.hit_tokens[req] = hit * work.block_tokens
            self.left[req] = self.prompt[req] - hit * work.block_tokens
            self.prefilling.append(req)
        else:
            self.taken[req] = work.blocks(req, work.prompt_blocks[req])
            cache.take(self.taken[req])
            self._join(req, self.prompt[req], self.steps[req])
            self.tl.admit[req] = now
            admitted.append(req)
        cache.resize(self.free_tokens(rank))

    def _join(self, req: int, context: int, steps: int) -> None:
        """``req`` joins the decode batch with ``context`` tokens and ``steps`` steps to go."""
        self.act.add(req, context, steps)

    def _computed(self, req: int) -> int:
        """Prompt tokens of admitted ``req`` already in its KV (its hit and the pieces computed so far)."""
        return self.prompt[req] - self.left[req]

    def _plan(self, admitted: list[int]) -> None:
        """A mixed step while an admitted append has tokens left (module docstring), else as the base instance."""
        if not self.prefilling:
            super()._plan(admitted)
            return
        work = self.work
        room = self.prompt_room()
        if work.ranks is None:
            plan = self._fill(self.prefilling, room)
        else:  # each rank fills its own budget with its own appends, FCFS (module docstring)
            rank_of = work.rank_of
            assert rank_of is not None
            plan = []
            for r in sorted({rank_of[q] for q in self.prefilling}):
                plan += self._fill([q for q in self.prefilling if rank_of[q] == r], room)
        tokens = np.array([float(c) for _, c in plan])
        before = np.array([float(self._computed(r)) for r, _ in plan])
        if work.ranks is None:
            added = float(np.sum(work.chunk_s(tokens, before, float(self.act.b))))
        else:
            assert work.rank_of is not None
            ranks = np.array([work.rank_of[r] for r, _ in plan])
            added = work.ranks.added_s(tokens, before, ranks, float(self.act.b))
        step = self.step_s() + added
        self.plan = plan
        self.next_time = self.t + step
        if self.emits_first_token:
            for req in admitted:
                self.lag.sampled(req, self.next_time)

    def _fill(self, queue: list[int] | deque[int], budget: int) -> list[tuple[int, int]]:
        """``(append, tokens)``: the admitted appends of ``queue`` in order, each taking what it has left of
        ``budget`` prompt tokens."""
        plan: list[tuple[int, int]] = []
        for req in queue:
            if budget <= 0:
                break
            take = min(self.left[req], budget)
            plan.append((req, take))
            budget -= take
        return plan
