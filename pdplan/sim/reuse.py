"""``simulate_reuse``: a deployment serving a KV-reuse workload, with per-instance prefix caches, request by request.

The closed form predicts hit ratios per tier (:mod:`pdplan.cache`) and feeds them to the queues; this simulation
replays the same deployment with the caches themselves (:mod:`pdplan.sim.prefix_cache`), so that the comparison
checks the hit ratios and the queueing together. It shares with the closed form only inputs: the workload specs and
their samplers (:mod:`pdplan.sim.reuse_requests`, :mod:`pdplan.sim.reuse_sessions`), the roofline price of a prefill
whose prefix is cached (:func:`pdplan.serving.roles.cached_prefill_perf`), and the tiers' load physics, passed in as
a callable (:data:`ExposedLoadFn`, e.g. built from :class:`pdplan.cache.tiers.CacheTier`).

**Per request**, when its prefill starts on an instance (:class:`ReuseTracker`): the instance's caches give the hit
(:meth:`~pdplan.sim.prefix_cache.PrefixCaches.lookup`, at most ``lookup_blocks``), the hit is touched (promoted to
HBM; on a disaggregated prefill instance, which runs one prompt at a time, a hit wholly in HBM is left for the
prompt's end to touch, since nothing else touches that HBM in between), and the prefill is served in
``price(L, h) + exposed_load(hit tokens per lower tier, price(L, h))``: the roofline stage time of the ``L − h``
new tokens over the cached ones, plus the part of the tiers' load the prefill cannot hide.

**When blocks enter the cache.** An engine's running request holds its blocks (referenced, not evictable: vLLM's
free-block queue and SGLang's radix tree evict only blocks no running request uses) and frees them into the LRU when
it is done with them; the cache's HBM (:class:`CacheLayout`) is what the running work leaves free. So a disaggregated
prefill instance touches a prompt's whole blocks into its cache when the prefill ends (the prompt leaves for its
decode instance; the outputs are decoded there and never reach this cache, unless ``cache_outputs``), and a
colocated instance touches the whole sequence (prompt and output blocks) when the request finishes; a colocated
request's hit is refreshed when it starts. Not modelled: a request finding blocks another running request holds
(an engine shares them at once; here they are found once that request has freed them).

**Routing** (``routing``): ``"affinity"`` pins each session, prefix or trace request's leading blocks
(:func:`affinity_keys`) to one prefill (or colocated) instance by a seeded hash (splitmix64 of the key, mod the
instances: uniform over instances; a trace's requests by the closed form's hash, :func:`trace_routes`);
``"load-balance"`` keeps the scenario's policy as :mod:`pdplan.sim.prefill` implements it (random, round-robin,
least-work), so a session's later turn finds its history only on an instance an earlier turn used.

**Prefill service at dispatch.** The hit is known only when a prompt starts on its instance, so the prefill pool is
:class:`pdplan.sim.prefill.DispatchedPrefill` (one prompt at a time, FCFS, the scenario's queues) and colocated
instances ask at admission (prefill-first serves the priced time; chunked starts its chunks after the hit and waits
for the load); decode, KV transfer and everything else are :mod:`pdplan.sim.deployment`'s. A scenario with batched
prefill (``prefill_max_batch_tokens``) is refused: one prefill batch with per-prompt hits is not modelled here.

**Outputs** (:class:`ReuseResult`): per tier (HBM first) the token hit ratio and the share of requests with a hit
there, and the tokens and bytes read from it per second; per request its hit tokens (per tier), turn and session;
the usual :class:`~pdplan.sim.metrics.SimResult` in arrival order, whose TTFT plus ``ttft_extra_s`` is what
:func:`pdplan.sim.compare.simulate_scenario` summarises.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pdplan.cache.tiers import Inclusion
from pdplan.errors import SpecError
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import cached_prefill_perf
from pdplan.sim.deployment import SimSetup, StepModel, sim_deployment
from pdplan.sim.event_loop import simulate_events
from pdplan.sim.metrics import SimResult, Summary
from pdplan.sim.prefix_cache import PrefixCaches, Scope, TierDomain
from pdplan.sim.reuse_requests import ReuseRequests, blocks_of
from pdplan.sim.reuse_workload import reuse_requests
from pdplan.sim.spec import Colocated, Disaggregated, PrefillStart, Requests
from pdplan.sim.storage_paths import Buffered, ReadPathNodes, ReadPathStats, StorageReads
from pdplan.sim.turn_placement import PLACING_POLICIES, TurnPlacer, turn_placer
from pdplan.sim.turn_stats import TurnStats, placed_turns
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.specs.workload import WorkloadSpec
from pdplan.types import FloatArray, Int64Array

ExposedLoadFn = Callable[[Sequence[int], float], float]
"""``exposed_load_s(hit_tokens_per_lower_tier, prefill_compute_s)``: the seconds a prefill waits for its cached
tokens to come up from the tiers below HBM (tier order as :attr:`CacheLayout.tiers`)."""
PriceFn = Callable[[FloatArray, FloatArray], FloatArray]
"""``price_s(input_tokens[m], cached_tokens[m]) -> seconds[m]``: a prefill's compute time with a cached prefix."""
CacheRouting = Literal["affinity", "load-balance"]
WARMUP_FRACTION = 0.1
_PRICE_CHUNK = 1 << 18


@dataclass(frozen=True, slots=True)
class SimTier:
    """A tier below HBM as the simulator holds it: capacity in tokens per domain and who shares a domain
    (:class:`~pdplan.sim.prefix_cache.TierDomain`)."""

    name: str
    capacity_tokens: float
    scope: Scope = "instance"


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """The caches of one deployment: HBM per instance (the caller's figure: the instance's KV capacity less its mean
    resident KV), the tiers below, whether they are inclusive, and how many instances share a node."""

    hbm_tokens: float
    tiers: tuple[SimTier, ...] = ()
    inclusion: Inclusion = "exclusive"
    instances_per_node: int = 1
    prefix_caching: bool = True
    storage: ReadPathNodes | None = None
    """A tier read over storage NICs as queues on the nodes' resources (:mod:`pdplan.sim.storage_paths`; xPyD
    only): its reads are fetched from the request's arrival and moved to the GPU when its prefill starts, instead of
    the exposed-load callable."""

    def caches(self, instances: int, block_tokens: int) -> PrefixCaches | None:
        """The :class:`PrefixCaches` of ``instances`` instances in blocks of ``block_tokens`` (None: caching off)."""
        if not self.prefix_caching:
            return None
        if not (math.isfinite(self.hbm_tokens) and self.hbm_tokens >= 0):
            raise SpecError(f"hbm_tokens must be finite and >= 0, got {self.hbm_tokens}", field="hbm_tokens")
        domains = [TierDomain(t.name, _blocks(t.capacity_tokens, block_tokens, t.name), t.scope) for t in self.tiers]
        hbm = _blocks(self.hbm_tokens, block_tokens, "hbm")
        return PrefixCaches(instances, hbm, domains, self.inclusion, self.instances_per_node)


def _blocks(tokens: float, block_tokens: int, name: str) -> int:
    if not (math.isfinite(tokens) and tokens >= 0):
        raise SpecError(f"tier {name!r}: capacity must be finite and >= 0 tokens, got {tokens}", field="tiers")
    return int(tokens // block_tokens)


class PriceTable:
    """``price_s(L, h·B) + extra_s`` for every candidate hit of every request, priced in bulk; a hit outside the
    candidates is priced alone and counted in ``misses`` (:mod:`pdplan.sim.reuse_requests`)."""

    def __init__(self, price_s: PriceFn, reqs: ReuseRequests, extra_s: FloatArray) -> None:
        counts = np.diff(reqs.candidate_offsets)
        owner = np.repeat(np.arange(reqs.count, dtype=np.int64), counts)
        self.stride = int(reqs.lookup_blocks.max(initial=0)) + 1
        keys, first = np.unique(owner * self.stride + reqs.candidate_blocks, return_index=True)
        owner, hits = owner[first], reqs.candidate_blocks[first]
        values = np.empty(keys.size)
        for lo in range(0, keys.size, _PRICE_CHUNK):
            part = slice(lo, lo + _PRICE_CHUNK)
            lens = reqs.input_tokens[owner[part]].astype(np.float64)
            values[part] = price_s(lens, (hits[part] * reqs.block_tokens).astype(np.float64)) + extra_s[owner[part]]
        self.table: dict[int, float] = dict(zip(keys.tolist(), values.tolist(), strict=True))
        self.price_s, self.extra = price_s, extra_s
        self.lens, self.block_tokens = reqs.input_tokens, reqs.block_tokens
        self.misses = 0

    def __call__(self, request: int, hit_blocks: int) -> float:
        value = self.table.get(request * self.stride + hit_blocks)
        if value is None:
            self.misses += 1
            lens = np.array([float(self.lens[request])])
            value = float(self.price_s(lens, np.array([float(hit_blocks * self.block_tokens)]))[0])
            value += float(self.extra[request])
            self.table[request * self.stride + hit_blocks] = value
        return value


class ReuseTracker:
    """The caches' side of a run: prices each prefill start, caches prompts and sequences, releases sessions' next
    turns (:class:`~pdplan.sim.spec.RequestEvents`; module docstring)."""

    def __init__(
        self,
        reqs: ReuseRequests,
        caches: PrefixCaches | None,
        price: PriceTable | None,
        exposed_load_s: ExposedLoadFn | None,
        cache_outputs: bool,
        colocated: bool,
    ) -> None:
        self.caches, self.price, self.exposed = caches, price, exposed_load_s
        self.cache_outputs = cache_outputs
        self.colocated = colocated
        self.runs = reqs.block_lists()
        self.block_tokens = reqs.block_tokens
        self.lookup, self.prompt_blocks = reqs.lookup_blocks.tolist(), reqs.prompt_blocks.tolist()
        self.sequence_blocks = reqs.sequence_blocks.tolist()
        self.next, self.think = reqs.next_request.tolist(), reqs.think_s.tolist()
        levels = 1 if caches is None else caches.levels
        self.hits = np.zeros((reqs.count, levels), dtype=np.int64)
        self.instance = np.full(reqs.count, -1, dtype=np.int64)
        self.reads: StorageReads | None = None
        self.read_level, self.kv_bytes_per_token = 0, 0.0
        self.fetched: dict[int, tuple[list[int], Buffered | None]] = {}

    def read_over(self, reads: StorageReads, level: int, kv_bytes_per_token: float) -> None:
        """Read the tier at chain ``level`` over ``reads``' queues (:meth:`prefetch`)."""
        self.reads, self.read_level, self.kv_bytes_per_token = reads, level, kv_bytes_per_token

    def prefetch(self, request: int, instance: int, now_s: float) -> float:
        """A prompt bound to ``instance`` arrives at the prefill pool: look it up, promote the hit and fetch its
        storage tier's part into a DRAM buffer (:mod:`pdplan.sim.storage_paths`); when it may join the queue."""
        assert self.reads is not None
        counts = [0]
        if self.caches is not None and self.lookup[request] > 0:
            blocks = blocks_of(self.runs, request, self.lookup[request])
            counts = self.caches.lookup(instance, blocks)
            if sum(counts) > counts[0]:
                self.caches.touch(instance, blocks[: sum(counts)])
        stored = counts[self.read_level] if len(counts) > self.read_level else 0
        if not stored:
            self.fetched[request] = (counts, None)
            return now_s
        nbytes = stored * self.block_tokens * self.kv_bytes_per_token
        ready_s, held = self.reads.fetch(instance, nbytes, now_s)
        self.fetched[request] = (counts, held)
        return ready_s

    def start(self, request: int, instance: int, now_s: float) -> PrefillStart:
        """Look the prompt up on ``instance``, promote the hit, price the prefill (module docstring)."""
        if request in self.fetched:
            return self._start_fetched(request, instance, now_s)
        counts = [0]
        if self.caches is not None and self.lookup[request] > 0:
            blocks = blocks_of(self.runs, request, self.lookup[request])
            counts = self.caches.lookup(instance, blocks)
            if self.colocated or sum(counts) > counts[0]:
                self.caches.touch(instance, blocks[: sum(counts)])
            self.hits[request] = counts
        self.instance[request] = instance
        hit = sum(counts)
        compute = 0.0 if self.price is None else self.price(request, hit)
        load = 0.0
        if hit > counts[0]:
            if self.exposed is None:
                raise SpecError("a hit in a tier below HBM needs exposed_load_s (the tiers' load time)")
            load = float(self.exposed([c * self.block_tokens for c in counts[1:]], compute))
        return PrefillStart(compute + load, hit * self.block_tokens, load)

    def _start_fetched(self, request: int, instance: int, now_s: float) -> PrefillStart:
        """The start of a prompt looked up at its arrival (:meth:`prefetch`): its storage hit comes up from the
        buffer, any other tier's as :meth:`start` loads it."""
        assert self.reads is not None
        counts, held = self.fetched.pop(request)
        if self.caches is not None:
            self.hits[request] = counts
        self.instance[request] = instance
        hit = sum(counts)
        compute = 0.0 if self.price is None else self.price(request, hit)
        load = 0.0
        others = [0 if level == self.read_level else c * self.block_tokens for level, c in enumerate(counts)][1:]
        if any(others):
            if self.exposed is None:
                raise SpecError("a hit in a tier below HBM needs exposed_load_s (the tiers' load time)")
            load = float(self.exposed(others, compute))
        if held is not None:
            load += self.reads.to_gpu(instance, held, now_s, compute)
        return PrefillStart(compute + load, hit * self.block_tokens, load)

    def prefill_done(self, request: int, instance: int, now_s: float) -> None:
        """A disaggregated prefill instance frees the prompt's whole blocks into its cache (module docstring)."""
        if self.caches is not None and not self.colocated:
            self.caches.touch(instance, blocks_of(self.runs, request, self.prompt_blocks[request]))

    def finished(self, request: int, now_s: float) -> tuple[int, float] | None:
        """Free the blocks where they are held (module docstring); release the session's next turn."""
        if self.caches is not None and (self.cache_outputs or self.colocated) and self.instance[request] >= 0:
            held = self.sequence_blocks if self.cache_outputs else self.prompt_blocks
            self.caches.touch(int(self.instance[request]), blocks_of(self.runs, request, held[request]))
        following = self.next[request]
        return None if following < 0 else (following, now_s + self.think[request])

    def prewarm(self, reqs: ReuseRequests, routes: list[int] | None, rng: np.random.Generator) -> None:
        """Touch the histories of sessions in progress at t = 0, oldest first, on their sessions' instances (pinned
        routes; else a uniform draw, as a load-balanced turn lands)."""
        if self.caches is None:
            return
        instances = len(self.caches.chains)
        for req, count in zip(reqs.warm_request.tolist(), reqs.warm_blocks.tolist(), strict=True):
            inst = routes[req] if routes is not None else int(rng.integers(instances))
            self.caches.touch(inst, blocks_of(self.runs, req, count))


AFFINITY_MAX_BLOCKS = 16
"""A trace request's affinity key is taken over at most this many leading blocks."""
AFFINITY_MAX_SHARE = 1.5
"""A trace's affinity key is long enough once no key holds more than this many times an instance's even share."""


def affinity_keys(reqs: ReuseRequests, instances: int) -> Int64Array:
    """What affinity routing hashes (module docstring): a session or a prefix as it is; a trace request's shortest
    prefix of at most :data:`AFFINITY_MAX_BLOCKS` blocks whose keys spread the requests so that no key holds more than
    :data:`AFFINITY_MAX_SHARE` / N of them. A prefix-aware router (Dynamo's KV router, llm-d's prefix scorer) weighs
    load against the match: keyed on the first block alone, a trace whose requests all open with one system prompt
    (Mooncake's conversation trace) would go to one instance. The rule and its key arithmetic (key · 1,000,003 + id +
    1 per block, modulo 2^64) are the closed form's (:func:`pdplan.serving.prefix_cache.affinity_owner`), written here
    on the simulator's own block lists, so that both split a trace alike (:func:`trace_routes`)."""
    if reqs.kind != "trace" or instances <= 1:
        return reqs.affinity_key
    runs = reqs.block_lists()
    heads = [blocks_of(runs, i, AFFINITY_MAX_BLOCKS) for i in range(reqs.count)]
    keys = np.zeros(reqs.count, dtype=np.uint64)
    for depth in range(AFFINITY_MAX_BLOCKS):
        has = np.array([depth < len(head) for head in heads])
        block = np.array([head[depth] if depth < len(head) else 0 for head in heads], dtype=np.uint64)
        with np.errstate(over="ignore"):
            keys = np.where(has, keys * np.uint64(1_000_003) + block + np.uint64(1), keys)
        if max(Counter(keys.tolist()).values()) <= AFFINITY_MAX_SHARE * reqs.count / instances:
            break
    return keys.view(np.int64)


def trace_routes(keys: Int64Array, instances: int) -> Int64Array:
    """Instance per trace request: Knuth's multiplicative hash of its key (× 2654435761, bits 16 up, mod the
    instances), the closed form's (:func:`pdplan.serving.prefix_cache.affinity_owner`). Which keys share an instance
    moves a trace's hit ratios by a few per cent (the vendored Mooncake synthetic trace, 2 instances, HBM and DRAM:
    the HBM share 0.115-0.121 over this simulator's seeded hash at seeds 0-3), so the two sides split it alike to
    measure one quantity (docs/prefix_cache.md §9); sessions and prefixes are many keys of equal law, hashed with the
    seed (:func:`affinity_routes`)."""
    with np.errstate(over="ignore"):
        mixed = (keys.view(np.uint64) * np.uint64(2654435761)) >> np.uint64(16)
    return (mixed % np.uint64(instances)).astype(np.int64)


def affinity_routes(keys: Int64Array, instances: int, seed: int) -> Int64Array:
    """Instance per request: splitmix64 (Steele, Lea and Flood, OOPSLA 2014; the finaliser of Java's
    ``SplittableRandom``) of the key offset by the seed, mod the instances."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15) * np.uint64(seed + 1)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(instances)).astype(np.int64)


@dataclass(frozen=True, slots=True)
class TierStats:
    """One tier over the counted requests: its share of their prompt tokens, the share of them it served at least
    one block, and what one caching instance read from it per second of the measurement window (the deployment's
    reads over the instances, as the closed form's :class:`pdplan.serving.prefix_cache.TierUse`)."""

    name: str
    token_hit_ratio: float
    request_hit_share: float
    read_tokens_per_s: float
    read_bytes_per_s: float


@dataclass(frozen=True, eq=False)
class ReuseResult:
    """A reuse simulation (module docstring); per-request arrays are in arrival order, aligned with ``run``."""

    run: SimResult
    ttft_extra_s: FloatArray
    hit_tokens: Int64Array
    tier_hit_tokens: Int64Array
    """[N, tiers]: hit tokens served per tier, HBM first."""
    turn: Int64Array
    session: Int64Array
    prefill_instance: Int64Array
    tiers: tuple[TierStats, ...]
    block_tokens: int
    price_misses: int
    truncated_sessions: int
    turns: TurnStats | None = None
    """Sessions on xPyD: what the turn placement did (:mod:`pdplan.sim.turn_stats`); None otherwise."""
    read_paths: ReadPathStats | None = None
    """A tier read over storage NICs (:attr:`CacheLayout.storage`): its servers' use; None otherwise."""

    @property
    def ttft_s(self) -> FloatArray:
        """TTFT per request with the engine's host time (what the closed form reports)."""
        return np.asarray(self.run.ttft_s + self.ttft_extra_s, dtype=np.float64)

    @property
    def token_hit_ratio(self) -> float:
        """All tiers' hit tokens over the counted requests' prompt tokens."""
        return float(sum(t.token_hit_ratio for t in self.tiers))

    @property
    def offered_rps(self) -> float:
        """The arrival rate the counted requests offered: ``(n − 1)/(a_n − a_1)`` over the arrival times ``a_1 ≤ … ≤
        a_n`` of the requests after warm-up (n gaps' mean, inverted). A session stream's sample of sessions and turns,
        and its turns' own latencies (:mod:`pdplan.sim.reuse_sessions`, Stationary start), make this differ from the
        nominal ``rate_rps``; a stationary closed form is compared at this rate (docs/prefix_cache.md §9)."""
        arrival = self.run.arrival_s[self.run.warmup_count :]
        span = float(arrival[-1] - arrival[0]) if arrival.size > 1 else 0.0
        if not span > 0.0:
            raise SpecError("the offered rate needs two counted requests at distinct times")
        return (arrival.size - 1) / span

    @property
    def request_hit_share(self) -> float:
        """Share of counted requests with a hit in any tier."""
        warm = self.run.warmup_count
        return float(np.mean(self.hit_tokens[warm:] > 0))

    def ttft_by_turn(self, last_turn: int) -> dict[int, Summary]:
        """TTFT summaries of the counted requests by turn index 1..``last_turn`` (the last gathers the later turns;
        empty outside sessions)."""
        warm = self.run.warmup_count
        ttft, turn = self.ttft_s[warm:], np.minimum(self.turn[warm:], last_turn)
        out: dict[int, Summary] = {}
        for k in range(1, last_turn + 1):
            v = ttft[turn == k]
            if v.size:
                p50, p90, p99 = np.percentile(v, [50.0, 90.0, 99.0])
                out[k] = Summary(float(v.mean()), float(p50), float(p90), float(p99), int(v.size))
        return out

    def _offered_or_none(self) -> float | None:
        """:attr:`offered_rps`, None where it is undefined (fewer than two counted requests at distinct times)."""
        try:
            return self.offered_rps
        except SpecError:
            return None

    def as_dict(self) -> dict[str, object]:
        """The JSON view: per-tier figures and the totals."""
        return {
            "block_tokens": self.block_tokens,
            "token_hit_ratio": self.token_hit_ratio,
            "request_hit_share": self.request_hit_share,
            "tiers": [dataclasses.asdict(t) for t in self.tiers],
            "truncated_sessions": self.truncated_sessions,
            "price_misses": self.price_misses,
            "offered_rps": self._offered_or_none(),
            **({} if self.turns is None else {"turn_placement": self.turns.as_dict()}),
            **({} if self.read_paths is None else {"read_paths": dataclasses.asdict(self.read_paths)}),
        }


def simulate_reuse(
    model: DisaggregatedModel | ColocatedModel,
    workload: WorkloadSpec | ReuseRequests,
    layout: CacheLayout,
    *,
    rate_rps: float,
    routing: CacheRouting = "affinity",
    exposed_load_s: ExposedLoadFn | None = None,
    n_requests: int = 20_000,
    seed: int = 0,
    step: StepModel = "linear",
    block_tokens: int | None = None,
    cache_outputs: bool | None = None,
    warmup_fraction: float = WARMUP_FRACTION,
    stationary_start: bool = True,
    placement: TurnPlacementSpec | None = None,
    turn_latency_s: float | None = 0.0,
) -> ReuseResult:
    """Simulate ``model`` serving ``workload`` at ``rate_rps`` with the caches of ``layout`` (module docstring).

    ``workload``: a reuse workload (its requests drawn here at ``rate_rps``), or requests already built
    (:mod:`pdplan.sim.reuse_requests`, :mod:`pdplan.sim.reuse_sessions`; ``rate_rps``, ``n_requests``, ``seed``'s
    request draws, ``block_tokens`` and ``stationary_start`` then do not apply). ``block_tokens``: the cache's
    block (default :data:`~pdplan.sim.reuse_requests.DEFAULT_BLOCK_TOKENS`; a Mooncake trace's own);
    ``cache_outputs``: whether a finished sequence is cached where its prefill ran (default: colocated yes,
    disaggregated no). ``placement``: where sessions' turns run their prefill on xPyD (PPD,
    :mod:`pdplan.sim.turn_placement`; None or ``pd``: the prefill pool, today's run unchanged). Seeds: requests from
    ``seed`` (common random numbers across rates), routing draws from ``default_rng([seed, 2])``.
    ``turn_latency_s``: the mean turn latency D a sessions run's stationary start places its sessions with
    (:mod:`pdplan.sim.reuse_sessions`, Stationary start): 0 the zero-latency start; None the run's own mean turn
    latency, by runs from D = 0 to its fixed point (:func:`_at_own_latency`; usually 3-4 simulations near the SLO's
    knee, 2 at light load).
    """
    if routing not in ("affinity", "load-balance"):
        raise SpecError(f"routing must be affinity or load-balance, got {routing!r}", field="routing")
    if not (math.isfinite(rate_rps) and rate_rps > 0):
        raise SpecError(f"rate must be finite and > 0, got {rate_rps}", field="rate")
    window = model.res.model.max_position_embeddings
    if turn_latency_s is None and isinstance(workload, WorkloadSpec) and workload.sessions is not None:

        def run_at(latency_s: float) -> ReuseResult:
            return simulate_reuse(
                model, workload, layout, rate_rps=rate_rps, routing=routing, exposed_load_s=exposed_load_s,
                n_requests=n_requests, seed=seed, step=step, block_tokens=block_tokens, cache_outputs=cache_outputs,
                warmup_fraction=warmup_fraction, stationary_start=stationary_start, placement=placement,
                turn_latency_s=latency_s,
            )  # fmt: skip

        return _at_own_latency(run_at)
    if isinstance(workload, ReuseRequests):
        reqs = workload
    else:
        latency_s = 0.0 if turn_latency_s is None else turn_latency_s
        reqs = reuse_requests(workload, rate_rps, n_requests, block_tokens, seed, window, stationary_start, latency_s)
    setup = sim_deployment(model, reqs.input_tokens, reqs.output_tokens, step)
    colocated = isinstance(model, ColocatedModel)
    instances, hw = _caching_side(model)
    keys = affinity_keys(reqs, instances)
    split = trace_routes(keys, instances) if reqs.kind == "trace" else affinity_routes(keys, instances, seed)
    routes = split.tolist() if routing == "affinity" else None
    price = _price_table(model, setup, reqs, layout)
    caches = layout.caches(instances, reqs.block_tokens)
    outputs = colocated if cache_outputs is None else cache_outputs
    tracker = ReuseTracker(reqs, caches, price, exposed_load_s, outputs, colocated)
    tracker.prewarm(reqs, routes, np.random.default_rng([seed, 50]))
    kv_bytes = float(hw.model.kv_bytes_per_token(hw.precision.kv_bytes))
    reads = _storage_reads(layout, caches, tracker, routes, kv_bytes, seed)
    dep = _with_start(setup.deployment, tracker, routes)
    placer = _placer(model, setup, reqs, tracker, placement, routing, seed)
    if placer is not None:
        assert isinstance(dep, Disaggregated)
        dep = placer.deployment(dep)
    req = Requests(reqs.input_tokens, reqs.output_tokens)
    rng = np.random.default_rng([seed, 2])
    run, order = simulate_events(
        reqs.arrival_s, req, dep, rng, tracker, warmup_fraction=warmup_fraction, count_until_s=reqs.count_until_s,
        placement=placer, prefetch=None if reads is None else tracker.prefetch,
    )  # fmt: skip
    names = ("hbm",) if caches is None else caches.names
    misses = 0 if price is None else price.misses
    result = _result(run, order, setup, reqs, tracker, names, kv_bytes, instances, misses)
    if reads is not None:
        result = dataclasses.replace(result, read_paths=reads.summary(run.window_s))
    if isinstance(model, ColocatedModel) or reqs.kind != "sessions":
        return result
    policy = "pd" if placement is None else placement.policy
    extra, turns = placed_turns(run, result.ttft_extra_s, result.turn, model, placer, order, kv_bytes, policy)
    return dataclasses.replace(result, ttft_extra_s=extra, turns=turns)


TURN_LATENCY_REL_TOL = 0.05
"""The measured start's fixed point (:func:`_at_own_latency`): a run whose start's D is within this share of the
mean turn latency it measures. Colocated spread sessions near their simulated goodput (20.9 req/s nominal): D
0 → 10.0 → 12.8 → 14.5 → 15.1 s; the offered rate 18.56, 19.27, 19.44, 19.58 req/s."""
TURN_LATENCY_RUNS = 6
"""At most this many runs to the fixed point: past the stable rate the turns' latency grows with the run's own
backlog and has none; the last run is returned (its SLO attainment has failed by then)."""


def _at_own_latency(run_at: Callable[[float], ReuseResult]) -> ReuseResult:
    """The run whose stationary start is placed with its own mean turn latency D (:func:`mean_turn_latency_s`):
    from D = 0, each run's measured D places the next, until a run's D is within :data:`TURN_LATENCY_REL_TOL` of the
    latency it measures (or :data:`TURN_LATENCY_RUNS` runs). One pass is not enough: the zero-latency start's lighter
    mix of turns gives a shorter D than the placed run measures (above)."""
    latency_s = 0.0
    for _ in range(TURN_LATENCY_RUNS):
        res = run_at(latency_s)
        measured_s = mean_turn_latency_s(res.run)
        if abs(measured_s - latency_s) <= TURN_LATENCY_REL_TOL * measured_s:
            break
        latency_s = measured_s
    return res


def mean_turn_latency_s(run: SimResult) -> float:
    """D of the stationary start (:mod:`pdplan.sim.reuse_sessions`): the counted requests' mean time from arrival to
    last token, which releases the session's next turn after its think time."""
    warm = run.warmup_count
    latency = (run.finish_s - run.arrival_s)[warm:]
    if latency.size == 0 or not bool(np.isfinite(latency).all()):
        raise ValueError("no counted request finished: the turn latency is undefined")
    return float(np.mean(latency))


def _storage_reads(
    layout: CacheLayout,
    caches: PrefixCaches | None,
    tracker: ReuseTracker,
    routes: list[int] | None,
    kv_bytes_per_token: float,
    seed: int,
) -> StorageReads | None:
    """The queues of the tier read over storage NICs, wired to ``tracker`` (None: no such tier). Its reads start at
    the prompt's arrival on its instance, so the prefill routes must be pinned (affinity)."""
    nodes = layout.storage
    if nodes is None or caches is None:
        return None
    if tracker.colocated:
        raise SpecError("storage read paths are modelled on xPyD deployments only", field="cache")
    if routes is None:
        raise SpecError("storage read paths need the prefill routes pinned: cache routing affinity", field="routing")
    if nodes.tier not in caches.names[1:]:
        raise SpecError(f"storage read paths: tier {nodes.tier!r} is not among the cache's tiers {caches.names[1:]}")
    reads = StorageReads(nodes, np.random.default_rng([seed, 60]))
    tracker.read_over(reads, caches.names.index(nodes.tier), kv_bytes_per_token)
    return reads


def _placer(
    model: DisaggregatedModel | ColocatedModel,
    setup: SimSetup,
    reqs: ReuseRequests,
    tracker: ReuseTracker,
    placement: TurnPlacementSpec | None,
    routing: CacheRouting,
    seed: int,
) -> TurnPlacer | None:
    """The turn placement of an xPyD sessions run whose policy places turns on decode; None otherwise (colocated
    instances have no decode side; other workloads have no later turns)."""
    if placement is None or placement.policy not in PLACING_POLICIES or isinstance(model, ColocatedModel):
        return None
    if reqs.kind != "sessions":  # shared prefixes, traces: every request is a first turn
        return None
    return turn_placer(model, setup, reqs, tracker, placement, routing == "affinity", seed)


def _caching_side(model: DisaggregatedModel | ColocatedModel) -> tuple[int, RoleHardware]:
    """The instances that cache (prefill instances in xPyD, else the colocated ones) and their hardware."""
    if isinstance(model, ColocatedModel):
        return model.z, model.res.hardware.colocated
    return model.x, model.res.hardware.prefill


def _price_table(
    model: DisaggregatedModel | ColocatedModel, setup: SimSetup, reqs: ReuseRequests, layout: CacheLayout
) -> PriceTable | None:
    """Disaggregated: the stage time of the cached prefill plus the granularity's per-prompt extra (as
    :mod:`pdplan.sim.deployment`); colocated: its latency (prefill-first serves it; chunked prices its chunks itself
    and needs it only as the compute a layer-wise load hides behind, so not at all without lower tiers)."""
    if isinstance(model, ColocatedModel):
        if model.scheduler == "chunked" and not (layout.prefix_caching and layout.tiers):
            return None
        hw = model.res.hardware.colocated

        def latency(lens: FloatArray, cached: FloatArray) -> FloatArray:
            return cached_prefill_perf(hw, lens, cached).latency_s

        return PriceTable(latency, reqs, np.zeros(reqs.count))
    prefill = model.res.hardware.prefill
    if model.pool.batched is not None:
        raise SpecError("batched prefill (prefill_max_batch_tokens) with a prefix cache is not simulated")

    def stage(lens: FloatArray, cached: FloatArray) -> FloatArray:
        return cached_prefill_perf(prefill, lens, cached).service_s

    assert setup.prefill_extra_s is not None
    return PriceTable(stage, reqs, setup.prefill_extra_s)


def _with_start(
    dep: Disaggregated | Colocated, tracker: ReuseTracker, routes: list[int] | None
) -> Disaggregated | Colocated:
    """The deployment with its prefill priced at dispatch by ``tracker`` and pinned to ``routes``."""
    if isinstance(dep, Colocated):
        return dataclasses.replace(dep, prefill_service_s=None, start=tracker.start, routes=routes)
    pool = dataclasses.replace(dep.prefill, service_s=None, start=tracker.start, routes=routes)
    return dataclasses.replace(dep, prefill=pool)


def _result(
    run: SimResult,
    order: Int64Array,
    setup: SimSetup,
    reqs: ReuseRequests,
    tracker: ReuseTracker,
    names: tuple[str, ...],
    kv_bytes_per_token: float,
    instances: int,
    price_misses: int,
) -> ReuseResult:
    """Per-request arrays in the run's order and the per-tier statistics over its counted requests."""
    tier_tokens = tracker.hits[order] * reqs.block_tokens
    warm = run.warmup_count
    counted = tier_tokens[warm:]
    prompt_tokens = float(run.input_tokens[warm:].sum())
    per_s = instances * (run.window_s[1] - run.window_s[0])
    tiers = []
    for level, name in enumerate(names):
        read = float(counted[:, level].sum()) / per_s if per_s > 0 else math.nan
        tiers.append(
            TierStats(
                name,
                float(counted[:, level].sum()) / prompt_tokens,
                float(np.mean(counted[:, level] > 0)),
                read,
                read * kv_bytes_per_token,
            )
        )
    return ReuseResult(
        run=run,
        ttft_extra_s=np.asarray(setup.ttft_extra_s, dtype=np.float64)[order],
        hit_tokens=tier_tokens.sum(axis=1),
        tier_hit_tokens=tier_tokens,
        turn=reqs.turn[order],
        session=reqs.session[order],
        prefill_instance=tracker.instance[order],
        tiers=tuple(tiers),
        block_tokens=reqs.block_tokens,
        price_misses=price_misses,
        truncated_sessions=reqs.truncated_sessions,
    )
