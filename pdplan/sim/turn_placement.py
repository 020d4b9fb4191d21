"""Where a session's turn runs its prefill in the simulator (PPD, arXiv 2603.13358; scenario ``cache:
turn_placement:``, :class:`pdplan.specs.cache.TurnPlacementSpec`), written apart from the closed form so that each
checks the other: the two share the workload, the deployment and the roofline step and chunk prices, no formula.

**Session KV on decode.** Every decode instance keeps finished sequences' whole blocks in its free KV
(:mod:`pdplan.sim.decode_cache`) and can run append-prefills in mixed steps (:mod:`pdplan.sim.decode_append`).

**Placement, per turn, when it arrives** (:meth:`TurnPlacer.place`):

1. Turn 1 goes to the prefill pool, as does a turn whose history is shorter than one block (nothing to append onto).
2. The turn's decode instance: with ``cache: routing: affinity`` the one that served its session's previous turn
   (session-affine decode routing; a session none of whose turns has been decoded yet has none, and goes to the
   prefill pool); with ``load-balance``, the one the decode pool's policy picks now (random, round-robin or
   least-work, :func:`pdplan.sim.event_loop`), which holds the history only by chance.
3. That instance *holds the history* when its cache holds every whole block of it (``⌊H/B⌋`` blocks, H = the
   prompt less the turn's new tokens; prefix matching). If not, the turn goes to the prefill pool.
4. The policy: ``ppd`` places every such turn on decode; ``threshold`` those whose new tokens are fewer than
   ``append_threshold_tokens``; ``score`` those whose score is > 0 (below). ``pd`` never (and is not simulated
   here: :func:`pdplan.sim.reuse.simulate_reuse` runs today's deployment unchanged).

A turn on the prefill pool is today's disaggregation: its whole prompt is prefilled (with the prefill instance's
prefix cache) and its whole KV crosses the P→D link; its decode instance is then, under affinity, its session's (a
session's first decoded turn takes the pool's policy), so the next turn finds its history there.

**The score rule** (PPD's decision engine, ``score = w_ttft·(pd_ttft − ppd_ttft)/pd_ttft − w_tpot·(ppd_tpot −
pd_tpot)/pd_tpot``, decode when > 0; its repository reads the four figures from benchmarked tables). The simulator
estimates them from its own state at the turn's arrival, never from the closed form:

* ``pd_ttft`` = the prefill wait + the turn's prefill + (convention A) its KV transfer and one decode step. The wait is
  the rest of the prompt running on its prefill instance (affinity: the session's; random: its draw; round-robin: the
  next; least-loaded / power-of-two: the count-based router's pick now; the central least-work queue: the mean over the
  instances of their rest and the queued prompts, or the shortest rest when none is queued) plus the queued prompts'
  prefills; every prefill is priced as the simulation prices it (the roofline price of its new tokens over the hit its
  instance's prefix cache gives now; the central queue: the best instance's hit), slower tiers' load not counted.
* ``ppd_ttft`` = the mixed steps that the prompt tokens of the appends ahead on the decode instance and the turn's
  own append (its prompt less the history) need at ``budget − B`` tokens a step, each a decode step of the current
  batch, plus the chunk price of those tokens (the turn's own over its history, the others' over nothing).
* ``pd_tpot`` = the decode step of the instance's batch with the turn in it; ``ppd_tpot`` = that step plus the turn's
  append chunk price spread over the turn's own ``output − 1`` tokens: what the append adds to the mean token time
  of a co-running sequence of the same length.

Seat and KV waits on decode, the same under both, are left out of both.

**The decode step.** The instances' plain decode steps are the deployment's own step model: under ``step:
linear`` the linear fit of the decode instance's roofline with no appends (:func:`pdplan.serving.roles.decode_perf`
at the workload's mean context, as plain disaggregation builds it), not the step of the model it is given: a PPD
model's step is the closed form's, stretched by its appends' load, and the appends' time is what the mixed steps
here add themselves (priced apart, it would count twice and the simulator would share the closed form's piece under
test). The roofline step (``step: roofline``) is the hardware's, used as it is. On a decode instance of D > 1
attention-DP ranks a session's appends run on its rank (``session mod D``), priced per rank by
:mod:`pdplan.sim.append_ranks` (the score's estimates too: its own rank's budget and appends ahead).

**Stationary start.** Sessions in progress at t = 0 (:mod:`pdplan.sim.reuse_sessions`) hold their history on a
decode instance drawn uniformly (``default_rng([seed, 60])``), touched oldest first into its cache; under affinity
that instance is their session's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Protocol

import numpy as np

from pdplan.errors import SpecError
from pdplan.queueing.decode import LinearStepTime
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.roles import decode_perf
from pdplan.sim.append_growth import append_instance
from pdplan.sim.append_ranks import rank_pieces
from pdplan.sim.decode import DecodeSetup
from pdplan.sim.decode_append import AppendDecodeInstance, AppendWork
from pdplan.sim.deployment import SimSetup, sim_chunk_price
from pdplan.sim.prefill import DispatchedPrefill
from pdplan.sim.prefix_cache import PrefixCaches
from pdplan.sim.reuse_requests import ReuseRequests, blocks_of
from pdplan.sim.spec import Disaggregated, PrefillStart
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.types import FloatArray

PLACING_POLICIES: tuple[str, ...] = ("ppd", "threshold", "score")
"""The policies that place turns on decode (``pd`` is today's deployment)."""


class PrefillSide(Protocol):
    """The prefill pool's caches as the score reads them (:class:`pdplan.sim.reuse.ReuseTracker`)."""

    @property
    def caches(self) -> PrefixCaches | None: ...
    @property
    def lookup(self) -> list[int]: ...
    @property
    def runs(self) -> tuple[list[int], list[int], list[int]]: ...
    @property
    def price(self) -> Callable[[int, int], float] | None: ...

    def start(self, request: int, instance: int, now_s: float) -> PrefillStart:
        """The prefill of ``request`` starts on ``instance``: its price there."""


class TurnPlacer:
    """The placement of one run (module docstring): the decode instances' factory and the engine's hooks
    (:class:`pdplan.sim.event_loop.TurnPlacement`), and per request what happened to it."""

    def __init__(
        self,
        spec: TurnPlacementSpec,
        reqs: ReuseRequests,
        tracker: PrefillSide,
        work: AppendWork,
        setup: SimSetup,
        affinity: bool,
        seed: int,
        plain_step: LinearStepTime,
    ) -> None:
        assert reqs.new_tokens is not None
        self.plain_step = plain_step
        self.spec, self.reqs, self.tracker, self.work = spec, reqs, tracker, work
        self.affinity = affinity
        self.seed = seed
        dep = setup.deployment
        assert isinstance(dep, Disaggregated)
        self.convention_a = dep.convention == "A"
        self.pool = dep.decode  # its engine's admission rule (pdplan.sim.append_growth)
        assert dep.transfer is not None
        transfer = np.broadcast_to(np.asarray(dep.transfer.time_s, dtype=np.float64), (reqs.count,))
        self.transfer_s: list[float] = transfer.tolist()
        self.prompt: list[int] = reqs.input_tokens.tolist()
        self.turn: list[int] = reqs.turn.tolist()
        self.session: list[int] = reqs.session.tolist()
        self.new: list[int] = reqs.new_tokens.tolist()
        self.decoders: list[AppendDecodeInstance] = []
        self.session_decode: dict[int, int] = {}
        self.on_decode = np.zeros(reqs.count, dtype=bool)
        self.held = np.zeros(reqs.count, dtype=bool)
        self.prefill: DispatchedPrefill | None = None
        self.route_decode: Callable[[int], int] = _unattached
        self.busy_until: list[float] = []
        self.price_memo: dict[tuple[int, int], float] = {}

    # ---- hooks of pdplan.sim.event_loop ----

    def decode_instance(self, setup: DecodeSetup) -> AppendDecodeInstance:
        """A decode instance of the run (the engine builds one per instance), on its engine's KV admission
        (:func:`pdplan.sim.append_growth.append_instance`)."""
        ranks = self.work.ranks
        seats = setup.max_batch if ranks is None else -(-setup.max_batch // ranks.ranks)  # a rank's seats
        if self.work.budget_tokens <= seats:
            raise SpecError(
                f"the decode step's token budget ({self.work.budget_tokens}) must exceed max_num_seqs "
                f"({seats}{'' if ranks is None else ' a rank'}) for append-prefills to ride in decode steps",
                field="chunk_tokens",
            )
        inst = append_instance(setup, self.work, self.pool)
        self.decoders.append(inst)
        return inst

    def attach(self, route_decode: Callable[[int], int], prefill: DispatchedPrefill | None) -> None:
        """The engine's decode routing and prefill pool; the in-progress sessions' histories go to decode."""
        self.route_decode, self.prefill = route_decode, prefill
        self.busy_until = [0.0] * (0 if prefill is None else prefill.instances)
        rng = np.random.default_rng([self.seed, 60])
        reqs, work = self.reqs, self.work
        for req, count in zip(reqs.warm_request.tolist(), reqs.warm_blocks.tolist(), strict=True):
            inst = int(rng.integers(len(self.decoders)))
            dec = self.decoders[inst]
            dec.cache_of(req).keep(work.blocks(req, count), dec.free_tokens(dec.rank_of(req)))
            if self.affinity:
                self.session_decode[self.session[req]] = inst

    def start(self, request: int, instance: int, now_s: float) -> PrefillStart:
        """The prefix cache's start (:meth:`pdplan.sim.reuse.ReuseTracker.start`), noting when the instance frees."""
        begun = self.tracker.start(request, instance, now_s)
        self.busy_until[instance] = now_s + begun.service_s
        return begun

    def place(self, request: int, now_s: float) -> int:
        """The decode instance that runs ``request``'s prefill as an append, or −1: the prefill pool."""
        history = self.prompt[request] - self.new[request]
        whole = history // self.work.block_tokens
        if self.turn[request] < 2 or whole < 1:
            return -1
        if self.affinity:
            inst = self.session_decode.get(self.session[request], -1)
            if inst < 0:
                return -1
        else:
            inst = self.route_decode(request)
        dec = self.decoders[inst]
        if dec.cache_of(request).held_prefix(self.work.blocks(request, whole)) < whole:
            return -1
        self.held[request] = True
        if not self._decides(request, dec, whole * self.work.block_tokens, now_s):
            return -1
        self.on_decode[request] = True
        dec.submit_append(request, now_s)
        return inst

    def route(self, request: int, policy: Callable[[int], int]) -> int:
        """The decode instance of a turn whose prefill ran on the prefill pool (session-affine under affinity)."""
        session = self.session[request]
        inst = self.session_decode.get(session, -1) if self.affinity else -1
        if inst < 0:
            inst = policy(request)
        self.session_decode[session] = inst
        return inst

    def deployment(self, dep: Disaggregated) -> Disaggregated:
        """``dep`` with its prefill start noting when instances free (the run then takes this placement), and under
        ``step: linear`` the plain decode step (module docstring, The decode step)."""
        decode = dep.decode
        if isinstance(decode.step_time_s, LinearStepTime):
            decode = dataclasses.replace(decode, step_time_s=self.plain_step)
        return dataclasses.replace(dep, prefill=dataclasses.replace(dep.prefill, start=self.start), decode=decode)

    # ---- the policy ----

    def _decides(self, request: int, dec: AppendDecodeInstance, history_tokens: int, now_s: float) -> bool:
        """Whether the policy runs a turn whose history ``dec`` holds there (module docstring)."""
        policy = self.spec.policy
        if policy == "ppd":
            return True
        if policy == "threshold":
            return bool(self.new[request] < self.spec.append_threshold_tokens)
        return self.score(request, dec, history_tokens, now_s) > 0.0

    def score(self, request: int, dec: AppendDecodeInstance, history_tokens: int, now_s: float) -> float:
        """PPD's score from the simulator's state now (module docstring)."""
        prompt = self.prompt[request]
        append = prompt - history_tokens
        tau = dec.step_s(1, float(prompt))
        own = float(np.sum(self.work.chunk_s(np.array([float(append)]), np.array([float(history_tokens)]), 0.0)))
        ahead = dec.append_tokens_ahead(None if self.work.rank_of is None else self.work.rank_of[request])
        others = 0.0 if ahead == 0 else float(np.sum(self.work.chunk_s(np.array([float(ahead)]), np.zeros(1), 0.0)))
        room = max(dec.prompt_room(), 1)
        ppd_ttft = math.ceil((ahead + append) / room) * dec.step_s() + own + others
        pd_ttft = self._prefill_wait_s(request, now_s)
        if self.convention_a:
            pd_ttft += float(self.transfer_s[request]) + tau
        ppd_tpot = tau + own / max(int(self.work.append_steps[request]), 1)
        w_ttft, w_tpot = self.spec.ttft_weight, self.spec.tpot_weight
        return w_ttft * (pd_ttft - ppd_ttft) / pd_ttft - w_tpot * (ppd_tpot - tau) / tau

    def _prefill_wait_s(self, request: int, now_s: float) -> float:
        """The turn's time on the prefill pool: the wait for its instance and its own prefill (module docstring)."""
        pre = self.prefill
        if pre is None:
            raise SpecError("turn placement needs the dispatched prefill pool (a prefix cache)")
        x = pre.instances
        rest = [max(self.busy_until[i] - now_s, 0.0) if pre.busy[i] else 0.0 for i in range(x)]
        if pre.central:
            queued = sum(min(self._price_s(q, i) for i in range(x)) for q in pre.queues[0])
            wait = (sum(rest) + queued) / x if pre.queues[0] else min(rest)
            return wait + min(self._price_s(request, i) for i in range(x))
        inst = pre.pick(request)  # pinned or drawn; round-robin's next; a count-based router's pick now
        queued = sum(self._price_s(q, inst) for q in pre.queues[inst])
        return rest[inst] + queued + self._price_s(request, inst)

    def _price_s(self, request: int, instance: int) -> float:
        """``request``'s prefill on prefill ``instance`` at the hit its cache gives now (memoised per pair)."""
        key = (request, instance)
        price = self.price_memo.get(key)
        if price is None:
            tracker = self.tracker
            hit = 0
            if tracker.caches is not None and tracker.lookup[request] > 0:
                hit = sum(tracker.caches.lookup(instance, blocks_of(tracker.runs, request, tracker.lookup[request])))
            price = 0.0 if tracker.price is None else tracker.price(request, hit)
            self.price_memo[key] = price
        return price


def _no_chunk(tokens: FloatArray, before: FloatArray, decode_tokens: float) -> FloatArray:
    raise AssertionError("an attention-DP decode prices its pieces per rank (AppendWork.ranks)")


def _unattached(request: int) -> int:
    raise AssertionError("TurnPlacer.attach was not called")


def turn_placer(
    model: DisaggregatedModel,
    setup: SimSetup,
    reqs: ReuseRequests,
    tracker: PrefillSide,
    spec: TurnPlacementSpec,
    affinity: bool,
    seed: int,
) -> TurnPlacer:
    """The placement of a run of ``model`` serving session requests ``reqs`` (module docstring)."""
    if reqs.new_tokens is None or reqs.kind != "sessions":
        raise SpecError("turn placement needs a sessions workload", field="cache.turn_placement")
    res = model.res
    hw = res.hardware.decode
    runs = reqs.block_lists()
    work = AppendWork(
        chunk_s=sim_chunk_price(hw, res.chunk_tokens, float(reqs.input_tokens.max())) if hw.dp <= 1 else _no_chunk,
        budget_tokens=int(res.chunk_tokens),
        block_tokens=reqs.block_tokens,
        blocks=lambda request, count: blocks_of(runs, request, count),
        lookup_blocks=reqs.lookup_blocks.tolist(),
        prompt_blocks=reqs.prompt_blocks.tolist(),
        sequence_blocks=reqs.sequence_blocks.tolist(),
        append_steps=(setup.requests.output_tokens - 1).tolist(),
        hit_tokens=[0] * reqs.count,
    )
    if hw.dp > 1:  # attention-DP ranks: each append on its session's rank (module docstring, The decode step)
        ranks = rank_pieces(hw, int(res.chunk_tokens), int(model.decode.max_num_seqs), float(reqs.input_tokens.max()))
        rank_of = (reqs.session % hw.dp).tolist()
        work = dataclasses.replace(work, chunk_s=ranks, ranks=ranks, rank_of=rank_of)
    plain = decode_perf(hw, model.cells.mean_work / model.cells.mean_steps, res.max_num_seqs).step
    return TurnPlacer(spec, reqs, tracker, work, setup, affinity, seed, plain)
