"""The closed form's prefix cache: per prompt bin, which requests find part of their prompt cached, in which tier,
how many tokens, and what loading them costs (docs/prefix_cache.md §4, §8).

**Classes.** A request of prompt bin k is a *miss* (nothing cached: the whole prompt is computed) or a *hit in tier
i* (its longest cached prefix reaches down to tier i: its KV is loaded, only the rest of the prompt is computed). The
serving models price each (bin, class) pair as its own prefill (:func:`pdplan.serving.roles.cached_prefill_perf` plus
the exposed load of the class's hit tokens in each tier below HBM, :meth:`CacheClasses.exposed_load_s`) and mix the
classes per bin with weights ``w[k, h]`` (:class:`CacheClasses`); the hit tokens of a class are its mean in that bin
(a session's: its turns' mean given the bin, spread over the bin's quadrature points as the tokens it computes spread,
:mod:`pdplan.serving.session_spread`).
The bins weigh ``P(bin k)·w[k, h]`` with the prompt law's marginal, except where the cache model lays out the prompts
itself (shared prefixes: the prefixes' lengths and popularity make the prompts), whose classes weigh by the keys' own
(bin × class) mass (:attr:`CacheClasses.joint`): with Zipf popularity and spread lengths the popular prefixes' bins,
which hit, hold more requests than the prompt law gives them (a miss probability of 0.118 by the prompt law's bins,
0.077 by the prefixes' own, in docs/prefix_cache.md §9's 1P1D case).

**Where the hit rates come from.** One cache domain per instance (a prefill instance in xPyD, or a colocated one):
its HBM (the KV blocks the running sequences leave free), then the tiers below it (host DRAM and local SSD: the
instance's share of its node's; a remote pool: its capacity shared by the whole deployment, its read bandwidth
per node, :func:`lower_tiers`). The hierarchy answers hit/miss like
one LRU of the tiers' cumulative (exclusive) or largest (inclusive) capacity, a tier serving the band of stack
distances its capacity covers (:class:`pdplan.cache.tiers.TierHierarchy`). Per workload:

* **sessions**: the characteristic-time (Che) form per turn index (:func:`pdplan.cache.lru_closed_form.
  session_cache`: a turn hits its session's history iff the history was touched within T_C, else its shared system
  prompt iff that was), evaluated at every band edge; a turn's class is the band its history is first found in (a
  turn that finds none: the band of its system prompt); a turn's prompt law is its history law plus its new tokens,
  so the turn index gives each bin its mix of turns;
* **shared prefixes**: the Che form per prefix (:func:`~pdplan.cache.lru_closed_form.shared_prefix_cache`): prefix j
  hits with ``1 − e^{−λ p_j T_C}``; a prefix-affine router gives each prefix one instance (the deployment then acts
  as one cache of the summed capacity), a load-balancing one shows every instance every prefix at λ/x; with resent
  questions (``questions_per_prefix``, a benchmark's fixed prompt list) a hit finds the whole prompt with the
  probability that form gives the prompt, and loads all of it but the last token, which the engine computes;
* **traces with block hashes** (Mooncake): the exact LRU stack distances of each instance's request stream
  (:func:`pdplan.cache.stack_distance.prefix_distances`; affinity: requests go to the instance their first block
  hashes to; load-balance: round robin), no approximation, counted over the requests after the trace's first tenth,
  which warms the cache (:data:`pdplan.cache.trace.WARMUP_SHARE`: the steady state a running service sees). A
  request's class is the slowest tier its hit blocks reach; each hit block is served by the tier holding it at the
  request's arrival (its own stack position,
  :func:`pdplan.cache.stack_distance.arrival_distances`, in a tier's band), so a hit spread over HBM and DRAM loads
  only its DRAM blocks (:attr:`CacheClasses.tier_share`).

A remote pool is one LRU over every instance's traffic: a request that misses its instance's own tiers finds its
prefix there with the probability that the deployment as a whole (one instance of the summed rate) holds it beyond
what its own tiers held: ``max(0, P_global(C_pool) − P_local)``.

**The rate.** Session and prefix hit rates depend on the per-instance request rate (a faster stream churns the cache
sooner): :func:`cache_classes` takes the rate they hold at; the serving layer evaluates a plan with the hit rates at
its goodput (a fixed point, :mod:`pdplan.evaluation.evaluate`). Trace hit rates do not depend on the rate (LRU order).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from pdplan.cache.lru_closed_form import (
    SessionRouting,
    SessionWorkload,
    SharedPrefixWorkload,
    ThinkTime,
    session_cache,
    shared_prefix_cache,
)
from pdplan.cache.stack_distance import memo_arrival_distances, memo_prefix_distances
from pdplan.cache.tiers import CacheTier, PathElement, tier_from_storage
from pdplan.cache.trace import BlockTrace, counted_from
from pdplan.errors import SpecError
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import PrefillPerf, cached_prefill_perf
from pdplan.serving.session_spread import (
    HistoryGrid,
    TurnHitLaws,
    bin_factors,
    computed_slices,
    held_laws,
    history_grid,
    laws_in_bins,
    on_grid,
    point_spread,
    turn_prompt_laws,
)
from pdplan.specs.cache import CacheSpec
from pdplan.specs.kv_offload import OffloadMechanism
from pdplan.specs.reuse import SessionsSpec, SharedPrefixSpec
from pdplan.specs.session_laws import ExponentialTime, FixedTime, GeometricTurns, LognormalTime, TimeLaw
from pdplan.specs.storage import StorageSpec
from pdplan.specs.token_pmf import TokenPmf, length_pmf
from pdplan.types import FloatArray, IntArray

MAX_TURNS = 256
"""Turns a session law is followed to (a geometric law's tail beyond is folded into the last turn)."""
MIN_TURN_MASS = 1e-6
"""Turn indices reached by fewer sessions than this are left out of the per-bin mix (their weight is < 1e-6)."""
HBM = "hbm"


@dataclass(frozen=True, slots=True)
class Reuse:
    """What a workload reuses: multi-turn sessions, shared prefixes, or a trace's block hashes (one of them)."""

    sessions: SessionsSpec | None = None
    shared_prefix: SharedPrefixSpec | None = None
    trace: BlockTrace | None = None


@dataclass(frozen=True, slots=True)
class CacheSetup:
    """A deployment's prefix cache: its spec, the engine mechanism that keeps the lower tiers (None: HBM only), the
    lower tiers' catalogue entries with their sizes, and what the workload reuses."""

    spec: CacheSpec
    mechanism: OffloadMechanism | None
    storages: tuple[StorageSpec, ...]
    capacities_bytes: tuple[float, ...]
    """Per node for host DRAM and local SSD, the whole pool for a remote pool."""
    reuse: Reuse

    @property
    def inclusive(self) -> bool:
        return self.mechanism is not None and self.mechanism.inclusion.value == "inclusive"

    @property
    def layerwise_overlap(self) -> bool:
        return bool(self.mechanism is not None and self.mechanism.layerwise_overlap.value)


@dataclass(frozen=True, slots=True)
class Domain:
    """One cache domain (an instance): what it holds in HBM and how it shares the lower tiers."""

    hbm_tokens: float
    kv_bytes_per_token: float
    instances: int
    """Instances of the deployment that cache (prefill instances in xPyD)."""
    instances_per_node: int
    layers: int
    gpus_per_instance: int = 1
    """Each GPU of an instance loads its own shard of the KV over its own host link."""
    holds_outputs: bool = True
    """Whether the domain's instances decode (and so cache) the outputs: colocated yes, xPyD prefill instances no."""


@dataclass(frozen=True, slots=True)
class TierUse:
    """What one tier serves at the rate the classes hold at."""

    name: str
    capacity_tokens: float
    """Per instance (the remote pool: the whole pool)."""
    token_hit_ratio: float
    read_bytes_per_s: float
    path_utilisation: dict[str, float]


@dataclass(frozen=True, slots=True)
class TraceRequests:
    """A trace's requests as the cache model classed them (``[N]`` in trace order): prompt tokens, hit tokens per
    class tier ``parts [N, H]`` (each hit block in the tier holding it), prompt bin and class; the requests from
    ``counted_from`` on are the counted ones (:func:`pdplan.cache.trace.counted_from`). The serving model prices a
    trace's (bin, class) cells at these requests (:mod:`pdplan.serving.trace_cells`)."""

    prompt_tokens: FloatArray
    parts: FloatArray
    bin: IntArray
    cls: IntArray
    counted_from: int


@dataclass(frozen=True, slots=True)
class CacheClasses:
    """Per prompt bin ``[K]`` and class ``[H]`` (``names[0]`` the misses, then the tiers fastest first): the share of
    the bin's requests and their mean hit tokens, with the tier each class loads from (None: nothing to load).

    A class is the slowest tier its hit reaches; its hit tokens may lie partly in faster tiers (a trace's blocks,
    each in the tier holding it): ``tier_share[k, h, g]`` is the share of class h's hit tokens that tier g (the tier
    of class g) serves, and the load is the sum over the tiers' parts, each overlapped with the prefill as its tier
    says (:meth:`exposed_load_s`; the simulator's rule, :mod:`pdplan.sim.reuse_setup`)."""

    names: tuple[str, ...]
    weights: FloatArray
    hit_tokens: FloatArray
    load_from: tuple[CacheTier | None, ...]
    rate_rps: float
    routing: str
    tiers: tuple[TierUse, ...]
    token_hit_ratio: float
    """Hit tokens over prompt tokens, all tiers."""
    layers: int
    tier_share: FloatArray
    """``[K, H, H]``: per bin and class, the share of its hit tokens in each class's tier (rows sum to 1 for hit
    classes; the identity where a hit lies in one tier)."""
    joint: FloatArray | None = None
    """``[K, H]`` P(bin k, class h) where the cache model lays out the prompts itself (shared prefixes: each prefix's
    length and popularity), else None: the prompt law's marginal times :attr:`weights`
    (:meth:`bin_class_probability`)."""
    warmup_requests: int = 0
    """A trace's first requests, which warm the cache and are not counted in the hit rates
    (:data:`pdplan.cache.trace.WARMUP_SHARE`); 0 for sessions and shared prefixes (stationary closed forms)."""
    requests: TraceRequests | None = None
    """A trace's requests, each with its own prompt and hit (None for sessions and shared prefixes)."""
    spread: FloatArray | None = None
    """``[K, H, SLICES]`` sessions: each (bin, class)'s computed tokens' deviations from their mean in equal-mass
    slices, NaN where the hit is one count (:func:`pdplan.serving.session_spread.computed_slices`), spread over a
    bin's quadrature points by :func:`point_prices`; None: every point of a (bin, class) holds its mean hit."""

    @property
    def classes(self) -> int:
        return len(self.names)

    def bin_class_probability(self, marginal: FloatArray) -> FloatArray:
        """``[K, H]`` P(prompt bin k, class h): :attr:`joint` where the keys lay out the prompts, else the prompt
        law's ``marginal`` ``[K]`` times the per-bin weights."""
        if self.joint is not None:
            return self.joint
        return np.asarray(marginal, dtype=np.float64)[:, None] * self.weights

    def exposed_load_s(self, hits: FloatArray, kv_bytes_per_token: float, compute_s: FloatArray) -> FloatArray:
        """``[K, H, J]`` the load time each class cannot hide behind its prefill compute: the sum over the tiers
        below HBM of the exposed load of their part of the class's ``hits`` (0 for misses and HBM)."""
        out = np.zeros_like(hits)
        for h in range(1, len(self.load_from)):
            for g, tier in enumerate(self.load_from):
                share = self.tier_share[:, h, g]
                if tier is not None and np.any(share > 0):
                    part = hits[:, h] if g == h and np.all(share == 1.0) else hits[:, h] * share[:, None]
                    out[:, h] += tier.exposed_load_s(part, kv_bytes_per_token, compute_s[:, h], self.layers)
        return out


@dataclass(frozen=True, slots=True)
class ClassPrices:
    """Each (prompt bin, class) priced as its own prefill (``[K, H]``): the hit tokens it loads (at most the prompt
    less one token, which the engine recomputes), the missed tokens' prefill, and the tier's exposed load."""

    cached_tokens: FloatArray
    perf: PrefillPerf
    load_s: FloatArray


def class_prices(
    hw: RoleHardware, classes: CacheClasses, prompt_tokens: FloatArray, kv_bytes_per_token: float
) -> ClassPrices:
    """:class:`ClassPrices` of ``classes`` for prompts of ``prompt_tokens`` per bin on instance type ``hw``
    (:func:`pdplan.serving.roles.cached_prefill_perf`, :meth:`CacheClasses.exposed_load_s`)."""
    prompt = np.broadcast_to(np.asarray(prompt_tokens, dtype=np.float64)[:, None], classes.weights.shape)
    cached = np.clip(np.minimum(classes.hit_tokens, prompt - 1.0), 0.0, None)
    perf = cached_prefill_perf(hw, prompt, cached)
    load = classes.exposed_load_s(cached[:, :, None], kv_bytes_per_token, perf.latency_s[:, :, None])[:, :, 0]
    return ClassPrices(cached, perf, load)


def point_prices(
    hw: RoleHardware, classes: CacheClasses, points: FloatArray, point_hits: FloatArray, kv_bytes_per_token: float
) -> ClassPrices:
    """:class:`ClassPrices` of each (bin, class) at its own prompt lengths ``points`` ``[K, H, J]`` with hits
    ``point_hits`` (broadcast to them; with the classes' :attr:`~CacheClasses.spread`, each point's hit its (bin,
    class)'s ``point_hits`` plus its offset, :func:`pdplan.serving.session_spread.point_spread`): ``min(hit, l − 1)``
    tokens cached (at least 0), the rest computed, the hit's exposed load against that compute; ``cached_tokens`` and
    ``load_s`` ``[K, H, J]``, ``perf`` over the points flattened. The xPyD prefill pool's points (quadrature lengths,
    or a trace's own requests, :mod:`pdplan.serving.disaggregated`) and the colocated prefill-first cells'
    (:mod:`pdplan.serving.colocated_cache`)."""
    if classes.spread is not None:
        point_hits = point_hits + point_spread(classes.spread, points)
    cached = np.clip(np.minimum(point_hits, points - 1.0), 0.0, None)
    perf = cached_prefill_perf(hw, np.ravel(points), cached.ravel())
    load = classes.exposed_load_s(cached, kv_bytes_per_token, perf.latency_s.reshape(cached.shape))
    return ClassPrices(cached, perf, load)


def bin_edges(representatives: FloatArray) -> FloatArray:
    """Prompt-length bin edges from the bins' representatives: midpoints, open at both ends."""
    reps = np.asarray(representatives, dtype=np.float64)
    return np.concatenate(([-math.inf], 0.5 * (reps[1:] + reps[:-1]), [math.inf]))


def _mass_per_bin(pmf: TokenPmf, edges: FloatArray) -> FloatArray:
    """``P(bin k)`` of a token law, bins cut at ``edges``."""
    idx = np.searchsorted(edges, pmf.values.astype(np.float64), side="right") - 1
    return np.asarray(np.bincount(np.clip(idx, 0, edges.size - 2), weights=pmf.prob, minlength=edges.size - 1), float)


def lower_tiers(setup: CacheSetup, domain: Domain) -> list[CacheTier]:
    """The tiers below HBM sized for one instance (a remote pool: the whole pool). Every tier's read bandwidth is per
    node (the catalogue's convention, :mod:`pdplan.specs.storage`: a remote pool is read over each node's own storage
    NIC), shared by the instances of the node; a remote pool's capacity is the deployment's."""
    tiers = []
    for spec, capacity in zip(setup.storages, setup.capacities_bytes, strict=True):
        pool = spec.kind == "remote-pool"
        share = capacity if pool else capacity / domain.instances_per_node
        tier = tier_from_storage(
            spec,
            capacity_tokens=share / domain.kv_bytes_per_token,
            sharing=domain.instances_per_node,
            layerwise_overlap=setup.layerwise_overlap,
            latency_s=spec.latency_s if spec.latency_s is not None else 0.0,
        )
        medium, gpu_path = tier.path
        wide = PathElement(gpu_path.name, gpu_path.read_bytes_per_s * domain.gpus_per_instance)
        tiers.append(dataclasses.replace(tier, path=(medium, wide)))
    return tiers


def _hbm_tier(domain: Domain) -> CacheTier:
    """HBM: hits there need no load (the blocks are already in the GPU's KV pool)."""
    return CacheTier(HBM, domain.hbm_tokens, (PathElement("HBM", math.inf),), 0.0, True)


@dataclass(frozen=True, slots=True)
class _Bands:
    """Band edges (tokens) of the instance-local tiers and, if any, the remote pool's capacity."""

    local: tuple[CacheTier, ...]
    edges: FloatArray
    pool: CacheTier | None


def _bands(setup: CacheSetup, domain: Domain) -> _Bands:
    local = [_hbm_tier(domain)]
    pool = None
    for tier, spec in zip(lower_tiers(setup, domain), setup.storages, strict=True):
        if spec.kind == "remote-pool":
            pool = tier
        else:
            local.append(tier)
    caps = np.array([t.capacity_tokens for t in local], dtype=np.float64)
    edges = np.maximum.accumulate(caps) if setup.inclusive else np.cumsum(caps)
    return _Bands(tuple(local), edges, pool)


def think_law(law: TimeLaw) -> ThinkTime:
    """The cache model's think-time law (a uniform law as the lognormal of its mean and variance)."""
    mean = max(law.mean_s(), 1e-9)
    if isinstance(law, ExponentialTime):
        return ThinkTime("exponential", mean)
    if isinstance(law, FixedTime) or law.scv() <= 0.0:
        return ThinkTime("fixed", mean)
    sigma = law.sigma if isinstance(law, LognormalTime) else math.sqrt(math.log1p(law.scv()))
    return ThinkTime("lognormal", mean, sigma)


def _turns_pmf(spec: SessionsSpec) -> FloatArray:
    """P(T = n), n = 1..N (a geometric law folded at :data:`MAX_TURNS`)."""
    if isinstance(spec.turns, GeometricTurns):
        q = spec.turns.ratio
        pmf = (1.0 - q) * q ** np.arange(MAX_TURNS)
        pmf[-1] += q**MAX_TURNS
        return np.asarray(pmf)
    counts, prob = spec.turns.pmf()
    out = np.zeros(int(counts[-1]))
    out[counts - 1] = prob
    return out


def turn_bins(spec: SessionsSpec, turns: int, edges: FloatArray) -> FloatArray:
    """:func:`_turn_bins_of`, computed once per (spec, turns, edges): it depends on neither the rate nor the
    capacities, which the goodput search and the optimiser vary."""
    return _turn_bins_cached(spec.model_dump_json(), turns, tuple(float(e) for e in edges))


@functools.lru_cache(maxsize=64)
def _turn_bins_cached(spec_json: str, turns: int, edges: tuple[float, ...]) -> FloatArray:
    """Keyed by the spec's JSON: a spec holding lists (a histogram length law) cannot be hashed itself."""
    out = _binned(*_turn_laws(spec_json, turns), np.asarray(edges, dtype=np.float64))
    out.flags.writeable = False
    return out


def _turn_bins_of(spec: SessionsSpec, turns: int, edges: FloatArray) -> FloatArray:
    """``[T, K]``: P(prompt bin k | turn t), turn t's prompt being the system prompt, t new parts and t − 1 outputs
    (independent). Computed on one token grid (a step of ``span / 2^16`` tokens at most, rounding the parts' lengths
    to it: far finer than the bins) with one FFT per part law and one inverse per turn (:func:`_turn_laws`), each
    turn's law then summed over the bins (:func:`_binned`)."""
    return _binned(*_turn_laws(spec.model_dump_json(), turns), edges)


@functools.lru_cache(maxsize=2)
def _turn_laws(spec_json: str, turns: int) -> tuple[FloatArray, FloatArray]:
    """(the grid's token counts ``[size]``, each turn's prompt law on it ``[T, size]``, read-only) of
    :func:`_turn_bins_of`: they do not depend on the bin edges, which the sensitivity rows scale (ISL x0.8 and x1.2
    bin the same laws again: examples/chat-ppd.yaml's three binnings share one set of 36 inverse FFTs of 2^16 cells).
    The last two kept (36 x 2^16 doubles, 19 MB, each)."""
    spec = SessionsSpec.model_validate_json(spec_json)
    new, out = length_pmf(spec.new_tokens), length_pmf(spec.output_tokens)
    span = turns * int(new.values[-1]) + (turns - 1) * int(out.values[-1]) + 1
    step = max(1, math.ceil(span / 2**16))
    cells = span // step + turns + 2
    size = int(2 ** math.ceil(math.log2(cells)))

    new_hat, out_hat = np.fft.rfft(on_grid(new, step, size)), np.fft.rfft(on_grid(out, step, size))
    tokens = np.asarray(spec.system_prompt_tokens + np.arange(size) * float(step), dtype=np.float64)
    laws = turn_prompt_laws(new_hat, out_hat, turns, size)
    tokens.flags.writeable = False
    laws.flags.writeable = False
    return tokens, laws


def _binned(tokens: FloatArray, laws: FloatArray, edges: FloatArray) -> FloatArray:
    """``[T, K]``: each turn's law (a row of ``laws`` on the grid ``tokens``) summed over the bins ``edges``, over its
    total."""
    idx = np.clip(np.searchsorted(edges, tokens, side="right") - 1, 0, edges.size - 2)
    rows = [np.bincount(idx, weights=law, minlength=edges.size - 1) / max(law.sum(), 1e-300) for law in laws]
    return np.asarray(rows)


@dataclass(frozen=True, slots=True)
class _PerKey:
    """Class probabilities ``[N, H]`` and hit tokens ``[N, H]`` of N keys (turn indices, prefix groups, requests)
    with their bin masses ``[N, K]`` (each key's share of the requests, spread over the bins)."""

    probs: FloatArray
    tokens: FloatArray
    bins: FloatArray
    parts: FloatArray | None = None
    """``[N, H, H]``: the hit tokens of each class that each class's tier serves (None: all in the class's own)."""
    own_bins: bool = False
    """Whether the keys lay out the prompts themselves (their bin masses, not the prompt law's, weigh the bins)."""
    bin_factor: FloatArray | None = None
    """``[N, K]`` sessions: each turn's hit tokens in a bin over its mean (:func:`pdplan.serving.session_spread.
    bin_factors`); None: the same in every bin."""
    laws: TurnHitLaws | None = None
    """Sessions: the turns' hit and computed tokens per bin (:func:`pdplan.serving.session_spread.turn_hit_laws`)."""

    def tier_tokens(self, g: int) -> FloatArray:
        """``[N]``: each key's mean hit tokens served by the tier of class g, over all its requests."""
        if self.parts is None:
            return np.asarray(self.probs[:, g] * self.tokens[:, g], dtype=np.float64)
        return np.asarray(np.einsum("nh,nh->n", self.probs, self.parts[:, :, g]), dtype=np.float64)


def _by_bin(keys: _PerKey) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``(w [K, H], hit tokens [K, H], tier shares [K, H, H], joint mass [K, H])``: the keys' classes mixed per bin
    (a bin no key reaches: all misses)."""
    mass = keys.bins.sum(axis=0)  # [K]
    joint = keys.bins.T @ keys.probs  # [K, H]
    factor = np.ones_like(keys.bins) if keys.bin_factor is None else keys.bin_factor
    tok = (keys.bins * factor).T @ (keys.probs * keys.tokens)
    weights = np.where(mass[:, None] > 0, joint / np.maximum(mass, 1e-300)[:, None], 0.0)
    weights[mass <= 0, 0] = 1.0
    hits = np.where(joint > 0, tok / np.maximum(joint, 1e-300), 0.0)
    h = keys.probs.shape[1]
    if keys.parts is None:
        share = np.broadcast_to(np.diag(np.r_[0.0, np.ones(h - 1)]), (mass.size, h, h)).copy()
    else:
        parts = np.einsum("nk,nh,nhg->khg", keys.bins, keys.probs, keys.parts)
        share = np.where(tok[:, :, None] > 0, parts / np.maximum(tok, 1e-300)[:, :, None], 0.0)
    return weights, hits, share, joint


def _bands_from_levels(
    levels: FloatArray, tokens: FloatArray, pool: tuple[FloatArray, FloatArray] | None
) -> tuple[FloatArray, FloatArray]:
    """Class probabilities and tokens ``[N, H]`` from P(hit within each band edge) ``levels [E, N]`` and the hit
    tokens there ``tokens [E, N]`` (unconditional means); ``pool``: the deployment-wide P(hit) and tokens in the
    remote pool. Class 0 is the misses."""
    p = np.diff(levels, axis=0, prepend=0.0)
    t = np.diff(tokens, axis=0, prepend=0.0)
    probs, toks = [np.clip(p, 0.0, None)], [np.where(p > 1e-15, t / np.maximum(p, 1e-300), 0.0)]
    if pool is not None:
        extra = np.clip(pool[0] - levels[-1], 0.0, None)
        probs.append(extra[None, :])
        toks.append(np.where(pool[0] > 1e-15, pool[1] / np.maximum(pool[0], 1e-300), 0.0)[None, :])
    hit = np.concatenate(probs, axis=0)
    miss = np.clip(1.0 - hit.sum(axis=0), 0.0, 1.0)
    return np.vstack([miss[None, :], hit]).T, np.vstack([np.zeros((1, hit.shape[1])), *toks]).T


def session_workload(
    spec: SessionsSpec, turns_pmf: FloatArray, rate_rps: float, duration_s: float, *, outputs_cached: bool
) -> SessionWorkload:
    """The closed form's :class:`SessionWorkload` of ``spec`` with the turn counts ``turns_pmf`` (P(T = 1..n)), the
    turns arriving at ``rate_rps`` (sessions at that over E[T]) and each taking ``duration_s`` before its think time;
    the sessions spread over the distinct system prompts and share them (the simulator alike)."""
    mean_turns = float(turns_pmf @ np.arange(1, turns_pmf.size + 1))
    return SessionWorkload(
        session_rate_per_s=rate_rps / mean_turns,
        turns_pmf=tuple(float(x) for x in turns_pmf),
        system_tokens=float(spec.system_prompt_tokens),
        append_tokens=length_pmf(spec.new_tokens).mean(),
        output_tokens=length_pmf(spec.output_tokens).mean(),
        think_time=think_law(spec.think_time),
        turn_duration_s=duration_s,
        outputs_cached=outputs_cached,
        system_prompts=spec.distinct_system_prompts,
    )


def _session_keys(
    spec: SessionsSpec,
    bands: _Bands,
    domain: Domain,
    edges: FloatArray,
    rate_rps: float,
    routing: str,
    duration_s: float,
) -> _PerKey:
    pmf = _turns_pmf(spec)
    reach = np.cumsum(pmf[::-1])[::-1]
    n = max(1, int(np.count_nonzero(reach > MIN_TURN_MASS)))
    pmf = np.append(pmf[: n - 1], pmf[n - 1 :].sum())
    workload = session_workload(spec, pmf, rate_rps, duration_s, outputs_cached=domain.holds_outputs)
    kind: SessionRouting = "session-affine" if routing == "affinity" else "random"
    local = [session_cache(workload, float(e), instances=domain.instances, routing=kind) for e in bands.edges]
    # a turn's class is the band its history is first found in; a turn whose history no band holds, the band its
    # shared system prompt is first found in (independent of the history's miss): P(class within edge i) =
    # f_i + (1 − f_E)·h_i, its tokens E[history hit]_i + (1 − f_E)·h_i·S (= the whole hit at the last edge)
    missed = 1.0 - local[-1].history_hit_probability
    system = float(spec.system_prompt_tokens)
    levels = np.array([r.history_hit_probability + missed * r.system_hit_probability for r in local])
    tokens = np.array([r.history_hit_tokens + missed * r.system_hit_probability * system for r in local])
    pool = None
    if bands.pool is not None:
        glob = session_cache(workload, bands.pool.capacity_tokens, instances=1)
        pool = (glob.hit_probability, glob.hit_tokens)
    probs, toks = _bands_from_levels(levels, tokens, pool)
    turn_share = reach[:n] / reach[:n].sum()
    bins = turn_bins(spec, n, edges)
    laws = _hit_laws_cached(spec.model_dump_json(), n, tuple(float(e) for e in edges), domain.holds_outputs)
    return _PerKey(probs, toks, turn_share[:, None] * bins, bin_factor=bin_factors(laws, bins), laws=laws)


@functools.lru_cache(maxsize=64)
def _hit_laws_cached(spec_json: str, turns: int, edges: tuple[float, ...], holds_outputs: bool) -> TurnHitLaws:
    """:func:`pdplan.serving.session_spread.turn_hit_laws` of a sessions spec (by its JSON) on :func:`_turn_laws`'
    grid: like :func:`turn_bins`, independent of the rate and the capacities."""
    return laws_in_bins(_history_grid_cached(spec_json, turns, holds_outputs), np.asarray(edges, np.float64))


_GRID: dict[tuple[str, int, bool], HistoryGrid] = {}
"""The last :func:`_history_grid_cached` grid (one at a time; a grid holds views of :func:`_turn_laws`' laws, D's law
and, with the outputs held, the output law's spectrum: a binning convolves the held laws of X a few rows at a time,
:func:`pdplan.serving.session_spread.history_grid`), with whether it has been binned yet."""
_BINNED: set[tuple[str, int, bool]] = set()


def _history_grid_cached(spec_json: str, turns: int, holds_outputs: bool) -> HistoryGrid:
    """:func:`pdplan.serving.session_spread.history_grid` of a sessions spec on :func:`_turn_laws`' grid: the part of
    :func:`_hit_laws_cached` the bin edges do not enter (the sensitivity rows' scaled edges rebin it), for one binning
    (each call one). The first binning convolves the held laws of X as it cumulates them, a few rows at a time (a
    table's search bins each grid once: agent-dualpath's [156, 2^16] held laws, 82 MB, never exist whole); the
    second keeps them whole for the later ones (``-f json`` bins them three times:
    :func:`pdplan.serving.session_spread.held_laws`). The same doubles either way."""
    key = (spec_json, turns, holds_outputs)
    if key not in _GRID:
        _GRID.clear()
        _BINNED.clear()
        spec = SessionsSpec.model_validate_json(spec_json)
        tokens, laws = _turn_laws(spec_json, turns)
        new, out = length_pmf(spec.new_tokens), length_pmf(spec.output_tokens)
        _GRID[key] = history_grid(tokens, laws, new, out, holds_outputs=holds_outputs)
    elif key in _BINNED:
        _GRID[key] = held_laws(_GRID[key])
    _BINNED.add(key)
    return _GRID[key]


def _prefix_lengths(spec: SharedPrefixSpec) -> FloatArray:
    """Each prefix's length: the prefix law's quantiles spread over the prefixes (a fixed law: every one the same),
    decorrelated from popularity by the golden-ratio sequence (a deterministic stand-in for independent draws)."""
    pmf = length_pmf(spec.prefix_tokens)
    if pmf.values.size == 1:
        return np.full(spec.num_prefixes, float(pmf.values[0]))
    u = (np.arange(spec.num_prefixes) * 0.6180339887498949 + 0.5) % 1.0
    idx = np.searchsorted(np.cumsum(pmf.prob), u, side="left")
    return pmf.values[np.minimum(idx, pmf.values.size - 1)].astype(np.float64)


def _prefix_keys(
    spec: SharedPrefixSpec, bands: _Bands, domain: Domain, edges: FloatArray, rate_rps: float, routing: str
) -> _PerKey:
    p, lengths = spec.prefix_probabilities(), _prefix_lengths(spec)
    q, o = length_pmf(spec.question_tokens), length_pmf(spec.output_tokens)
    affine = routing == "affinity"  # each prefix on one instance: the deployment acts as one cache of x times

    # a resent prompt found whole is loaded but for its last token, which the engine computes to sample from it (vLLM
    # ``KVCacheManager.get_computed_blocks``: ``max_cache_hit_length = request.num_tokens - 1``; block rounding of
    # the hit is not modelled, as for every class of the closed form)
    question_hit = max(q.mean() - 1.0, 0.0)

    def hits(capacity: float, rate: float) -> tuple[FloatArray, FloatArray]:
        """Per prefix: P(hit) and the mean hit tokens (the prefix, or the whole prompt when its question is cached)."""
        output = o.mean() if domain.holds_outputs else 0.0  # an xPyD prefill instance never holds the outputs
        work = SharedPrefixWorkload(rate, tuple(lengths), tuple(p), q.mean(), output, spec.questions_per_prefix)
        res = shared_prefix_cache(work, capacity)
        return res.hit_probability, res.hit_probability * lengths + res.prompt_hit_probability * question_hit

    x = domain.instances
    scale, rate = (x, rate_rps) if affine else (1, rate_rps / x)
    levels, tokens = (np.array(a) for a in zip(*(hits(float(e) * scale, rate) for e in bands.edges), strict=True))
    pool = hits(bands.pool.capacity_tokens, rate_rps) if bands.pool is not None else None
    probs, toks = _bands_from_levels(levels, tokens, pool)
    values, inverse = np.unique(lengths, return_inverse=True)
    share = np.bincount(inverse, weights=p)
    probs_g = np.array([np.bincount(inverse, weights=p * probs[:, h]) for h in range(probs.shape[1])]).T
    toks_g = np.array([np.bincount(inverse, weights=p * probs[:, h] * toks[:, h]) for h in range(probs.shape[1])]).T
    probs_g = probs_g / share[:, None]
    toks_g = np.where(probs_g > 0, toks_g / np.maximum(probs_g * share[:, None], 1e-300), 0.0)
    bins = np.array([_mass_per_bin(q.shifted(int(v)), edges) for v in values])
    return _PerKey(probs_g, toks_g, share[:, None] * bins, own_bins=True)


def _sub_trace(trace: BlockTrace, rows: np.ndarray) -> BlockTrace:
    """The requests ``rows`` of a trace, in order."""
    off = np.asarray(trace.offsets, np.int64)
    counts = np.diff(off)[rows]
    starts = off[rows]
    take = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts) + np.arange(int(counts.sum()))
    prompts = None if trace.prompt_tokens is None else np.asarray(trace.prompt_tokens)[rows]
    blocks = None if trace.prompt_blocks is None else np.asarray(trace.prompt_blocks)[rows]
    return BlockTrace(
        np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        np.asarray(trace.block_ids, np.int64)[take],
        trace.block_tokens,
        blocks,
        prompts,
    )


def _hit_blocks(trace: BlockTrace, edges_blocks: FloatArray) -> FloatArray:
    """``[E, N]``: per request, its prompt blocks that hit the hierarchy (an LRU of ``edges_blocks[-1]`` blocks:
    the running maximum of the distances below it) and that sit, at the request's arrival, within each band edge (the
    block's own stack position, :func:`pdplan.cache.stack_distance.arrival_distances`: the tier holding it).
    Row −1 is every hit block; with one edge no position is needed."""
    dist = memo_prefix_distances(trace).astype(np.float64)  # the same sub-traces recur over rates and tiers
    off = np.asarray(trace.offsets, np.int64)
    request = np.repeat(np.arange(trace.n_requests), np.diff(off))
    in_prompt = (np.arange(off[-1]) - off[request]) < trace.prompt_block_counts[request]
    hit = in_prompt & (dist < edges_blocks[-1])
    place = memo_arrival_distances(trace).astype(np.float64) if edges_blocks.size > 1 else dist
    out = np.zeros((edges_blocks.size, trace.n_requests))
    for i, e in enumerate(edges_blocks):
        within = hit if i == edges_blocks.size - 1 else hit & (place < e)
        out[i] = np.bincount(request, weights=within.astype(np.float64), minlength=trace.n_requests)
    return out


AFFINITY_MAX_BLOCKS = 16
"""The longest prefix (in blocks) an affinity router's key is taken over."""
AFFINITY_MAX_SHARE = 1.5
"""An affinity key is long enough once no instance would get more than this many times its even share."""


def affinity_owner(trace: BlockTrace, instances: int) -> IntArray:
    """The instance a prefix-aware router sends each request of a hashed trace to: a hash of its first d blocks,
    with d the shortest prefix (up to :data:`AFFINITY_MAX_BLOCKS`) whose keys spread the requests so that no key
    holds more than :data:`AFFINITY_MAX_SHARE` / N of them. Keying on the first block alone sends a trace whose
    requests all open with one system prompt (Mooncake's conversation trace: every request starts with block 0) to
    one instance; a prefix-aware router (Dynamo's KV router, llm-d's prefix scorer) weighs load against the match and
    spreads them, keeping each conversation's longer prefix together."""
    off = np.asarray(trace.offsets, np.int64)
    ids = np.asarray(trace.block_ids, np.int64)
    n = off.size - 1
    key = np.zeros(n, dtype=np.uint64)
    for d in range(AFFINITY_MAX_BLOCKS):
        has = off[:-1] + d < off[1:]
        nxt = ids[np.minimum(off[:-1] + d, max(ids.size - 1, 0))].astype(np.uint64)
        key = np.where(has, key * np.uint64(1_000_003) + nxt + np.uint64(1), key)
        _, counts = np.unique(key, return_counts=True)
        if instances <= 1 or counts.max() <= AFFINITY_MAX_SHARE * n / instances:
            break
    return np.asarray(((key * np.uint64(2654435761)) >> np.uint64(16)) % np.uint64(instances), dtype=np.int64)


def _trace_keys(trace: BlockTrace, bands: _Bands, domain: Domain, edges: FloatArray, routing: str) -> _PerKey:
    n, x, bt = trace.n_requests, domain.instances, float(trace.block_tokens)
    owner = affinity_owner(trace, x) if routing == "affinity" else np.arange(n) % x
    blocks = bands.edges / bt
    levels_b = np.zeros((blocks.size, n))
    for i in range(x):
        rows = np.flatnonzero(owner == i)
        if rows.size:
            levels_b[:, rows] = _hit_blocks(_sub_trace(trace, rows), blocks)
    total = levels_b[-1]
    band = np.argmax(levels_b >= total[None, :], axis=0)  # the slowest band holding one of its hit blocks
    hit_tokens = np.minimum(total * bt, trace.prompt_lengths() - 1.0)
    h = bands.edges.size + (bands.pool is not None) + 1
    probs, toks, parts = np.zeros((n, h)), np.zeros((n, h)), np.zeros((n, h, h))
    hits = total > 0
    rows = np.flatnonzero(hits)
    probs[rows, 1 + band[rows]] = 1.0
    toks[rows, 1 + band[rows]] = hit_tokens[rows]
    per_band = np.diff(levels_b, axis=0, prepend=0.0)[:, rows].T  # [hits, E] blocks in each band's tier
    scale = hit_tokens[rows] / (total[rows] * bt)  # the last block clipped to the prompt less one token
    parts[rows, 1 + band[rows], 1 : 1 + bands.edges.size] = per_band * bt * scale[:, None]
    if bands.pool is not None:
        g = _hit_blocks(trace, np.array([bands.pool.capacity_tokens / bt]))[0]
        from_pool = ~hits & (g > 0)
        probs[from_pool, -1] = 1.0
        toks[from_pool, -1] = np.minimum(g[from_pool] * bt, trace.prompt_lengths()[from_pool] - 1.0)
        parts[from_pool, -1, -1] = toks[from_pool, -1]
    probs[:, 0] = 1.0 - probs[:, 1:].sum(axis=1)
    prompts = trace.prompt_lengths()
    idx = np.clip(np.searchsorted(edges, prompts, side="right") - 1, 0, edges.size - 2)
    bins = np.zeros((n, edges.size - 1))
    start = counted_from(n)  # the requests that warmed the cache weigh nothing (pdplan.cache.trace.WARMUP_SHARE)
    bins[np.arange(start, n), idx[start:]] = 1.0 / (n - start)
    return _PerKey(probs, toks, bins, parts)


def cache_classes(
    setup: CacheSetup,
    domain: Domain,
    representatives: FloatArray,
    rate_rps: float,
    turn_duration_s: float,
    *,
    spread: bool = True,
) -> CacheClasses:
    """The classes of every prompt bin (bins given by their representative lengths) at ``rate_rps`` (the whole
    deployment's request rate); ``turn_duration_s``: a session turn's mean time from arrival to its last token (the
    part of the gap between turns that is not think time). ``spread``: whether to compute a session workload's
    :attr:`CacheClasses.spread`, which only :func:`point_prices` reads (False: None; the screen's per-bin class
    prices, :func:`pdplan.search.cache_options.screened_prefill`, price each (bin, class) at its mean hit)."""
    bands = _bands(setup, domain)
    edges = bin_edges(representatives)
    routing = setup.spec.routing
    reuse = setup.reuse
    requests = None
    if reuse.sessions is not None:
        keys = _session_keys(reuse.sessions, bands, domain, edges, rate_rps, routing, turn_duration_s)
    elif reuse.shared_prefix is not None:
        keys = _prefix_keys(reuse.shared_prefix, bands, domain, edges, rate_rps, routing)
    elif reuse.trace is not None:
        keys = _trace_keys(reuse.trace, bands, domain, edges, routing)
        requests = _trace_requests(reuse.trace, keys, edges)
    else:
        raise SpecError("the workload reuses no KV: give sessions, shared_prefix or a trace with block hashes")
    weights, hits, share, joint = _by_bin(keys)
    slices = None
    if spread and keys.laws is not None and keys.bin_factor is not None:  # sessions: module session_spread
        at = keys.bins[:, :, None] * keys.probs[:, None, :]
        slices = computed_slices(keys.laws, at, keys.tokens[:, None, :] * keys.bin_factor[:, :, None])
    tiers = [*bands.local, *([bands.pool] if bands.pool is not None else [])]
    names = ("miss", *(t.name for t in tiers))
    load_from = (None, None, *tiers[1:])  # misses and HBM hits load nothing
    return CacheClasses(
        names=names,
        weights=weights,
        hit_tokens=hits,
        load_from=load_from,
        rate_rps=rate_rps,
        routing=routing,
        tiers=_tier_use(tiers, keys, domain, rate_rps, representatives),
        token_hit_ratio=_ratio(keys, representatives, slice(1, None)),
        layers=domain.layers,
        tier_share=share,
        joint=joint / max(float(joint.sum()), 1e-300) if keys.own_bins else None,
        warmup_requests=0 if reuse.trace is None else counted_from(reuse.trace.n_requests),
        requests=requests,
        spread=slices,
    )


def _trace_requests(trace: BlockTrace, keys: _PerKey, edges: FloatArray) -> TraceRequests:
    """The per-request keys of :func:`_trace_keys` as :class:`TraceRequests` (one class per request)."""
    parts = keys.probs * keys.tokens if keys.parts is None else np.einsum("nh,nhg->ng", keys.probs, keys.parts)
    prompt = trace.prompt_lengths()
    idx = np.clip(np.searchsorted(edges, prompt, side="right") - 1, 0, edges.size - 2)
    cls = np.argmax(keys.probs, axis=1)
    return TraceRequests(prompt, np.asarray(parts, np.float64), idx, cls, counted_from(trace.n_requests))


def _ratio(keys: _PerKey, representatives: FloatArray, classes: slice) -> float:
    """Hit tokens of ``classes`` over prompt tokens (prompt tokens from the bins' representatives)."""
    share = keys.bins.sum(axis=1)
    hit = float(share @ (keys.probs[:, classes] * keys.tokens[:, classes]).sum(axis=1))
    prompt = float(keys.bins.sum(axis=0) @ representatives)
    return hit / prompt if prompt > 0 else 0.0


def _tier_use(
    tiers: list[CacheTier], keys: _PerKey, domain: Domain, rate_rps: float, representatives: FloatArray
) -> tuple[TierUse, ...]:
    """Per tier: its token hit ratio, the bytes per second one instance reads from it, and the utilisation of every
    element of its read path (a remote pool's: the whole deployment's reads over the pool's bandwidth, which is one
    instance's reads over its 1/instances share; until 2026-12-06 the pool's and the last tier's traffic was
    multiplied by the instances a second time, so such tiers bound too early)."""
    mean_prompt = float(keys.bins.sum(axis=0) @ representatives)
    out = []
    share = keys.bins.sum(axis=1)
    for h, tier in enumerate(tiers, start=1):
        ratio = float(share @ keys.tier_tokens(h)) / mean_prompt if mean_prompt > 0 else 0.0
        per_instance = rate_rps / domain.instances * mean_prompt * ratio * domain.kv_bytes_per_token
        # one domain's reads over its share of each element (lower_tiers divides a node's medium among the node's
        # domains and a pool among the deployment's): the same utilisation as all readers over the whole element
        util = {
            e.name: (per_instance / e.read_bytes_per_s if math.isfinite(e.read_bytes_per_s) else 0.0) for e in tier.path
        }
        out.append(TierUse(tier.name, tier.capacity_tokens, ratio, per_instance, util))
    return tuple(out)
