"""Closed-form LRU hit ratios for multi-turn sessions and shared prefixes (the characteristic-time approximation).

**The approximation** (Che, Tung & Wang, "Hierarchical Web caching systems: modeling, design and experimental
results", IEEE JSAC 20(7), 2002; its accuracy and generality: Fricker, Robert & Roberts, "A versatile and accurate
approximation for LRU cache performance", ITC 24, 2012). An LRU cache of capacity C behaves as if it held exactly
the items accessed within the last T_C, the *characteristic time*, a constant fixed by the capacity. With items of
variable size, every access starts a residence of ``min(T, G)``, where G is the time to the same item's next access
(∞ if none): the item stays until it is accessed again (and a new residence starts) or until T has passed. By
Little's law the mean cached size is

    W(T) = λ_access · E[size · min(T, G)],

and T_C solves W(T_C) = C. An access hits iff its item's previous access was within T_C: P(hit) = P(G_prev < T_C).
Che et al. derived it for independent (IRM) requests; Fricker et al. show it stays accurate for renewal and
time-varying request processes and many items, and that its error vanishes as the number of items grows. Items here
are few-times-reused histories with non-exponential gaps, so the error is measured, not assumed:
``benchmarks/stack_distance_speed.py`` compares both models with the exact LRU (:mod:`pdplan.cache.stack_distance`)
on traces drawn from the same workloads; ``docs/prefix_cache.md §5`` records the errors. Measured (largest absolute
token-hit-ratio error over capacities of 250-20,000 blocks, about 120,000 turns or 100,000 requests): sessions
0.012-0.014 with exponential or lognormal think times and 0.023 with a fixed one (session-affine), 0.003-0.030 with
random routing over 4 instances; the previous-turn-only variant of random routing (``partial_hits=False``) is off
by up to 0.26 at large capacities; shared prefixes 0.005-0.007, 0.026 with 10,000 prefixes (whose finite trace
still pays compulsory misses the stationary formula does not count).

**Multi-turn sessions** (:func:`session_cache`). A session has n turns (``turns_pmf``). Turn k's prompt is the history
so far plus ``append_tokens`` new tokens; after the turn, the history ``H_k = system + k·(append + output)`` is one item
(its blocks were all just touched). The next turn comes ``G = turn_duration + Z`` later (Z the think time); the last
turn's item is never reused, so it stays T. Turn k+1 hits the whole ``H_k`` iff G < T_C. A one-turn session never hits
(but for a shared system prompt, below). Routing over N instances: *session-affine* keeps a session on one instance, so
each instance sees 1/N of the sessions with full reuse; *random* sends each turn to any instance, so the previous turn's
history is there with probability 1/N, and every turn leaves an item on its instance that the next turn finds only with
probability 1/N (the other (N−1)/N stay T). Older, shorter histories that a random router may find on an instance
(partial hits) are ignored: a lower bound.

**Shared system prompts** (``SessionWorkload.system_prompts`` D ≥ 1: the sessions spread evenly over D system
prompts of S tokens each). Every turn's prompt opens with its session's system prompt, so the S blocks are shared by
all the sessions that use it: one item per system prompt, accessed by 1/D of the turns, at ``λ_S = λ_sessions · E[n]
/ D`` on an instance (turns of many independent sessions: Poisson, as for shared prefixes below); the histories keep
only their own ``H_k − S`` tokens. Then

    W(T) = λ_sessions · Σ_k (H_k − S)·E[residence_k] + D · S · (1 − e^{−λ_S T}),

the first term the session items' (below) less their shared part, the second the shared prefixes' form. A turn
whose history is found (probability f_k, tokens as below) hits it, system prompt included; otherwise it still finds
its system prompt with probability ``h_S = 1 − e^{−λ_S T_C}`` (taken independent of its own history's miss: the
other sessions' turns keep it). So P(hit_k) = f_k + (1 − f_k)·h_S and E[hit tokens_k] = E[history hit_k] +
(1 − f_k)·h_S·S; turn 1 (f_1 = 0) hits h_S·S. Without it (D = 0, each session's system prompt its own) turn 1
never hits and a turn routed away from its history finds nothing; the simulator's sessions sharing one 1,000-token
prompt hit 0.771 of their tokens where that model gave 0.683 (docs/prefix_cache.md §9).

**Shared prefixes** (:func:`shared_prefix_cache`). P prefixes of lengths L_j with popularity p_j (Poisson requests
at λ per instance). Prefix j's gaps are exponential with rate λ·p_j, so ``λ p_j E[min(T, G_j)] = 1 − e^{−λ p_j T}``
and ``W(T) = Σ_j L_j (1 − e^{−λ p_j T}) + λ (question + output) T``: each request also inserts its own question
and output, never reused. P(hit of prefix j) = ``1 − e^{−λ p_j T_C}``.

*Resent questions* (``questions_per_prefix`` U: a benchmark's fixed prompt list, inference-perf's ``shared_prefix``
data sending prefix j's k-th request its question k mod U, docs/reuse_workloads.md §5). Each of prefix j's U prompts
recurs every U-th request of the prefix: its gaps are Erlang-U of rate μ_j = λ p_j (mean U/μ_j), not exponential. An
item with renewal gaps G reached at rate 1/E[G] holds the cache for ``E[min(T, G)]/E[G]`` of the time (the Che form
for renewal requests, Fricker, Robert & Roberts, "A versatile and accurate approximation for LRU cache performance",
ITC 2012), and E[min(T, G)] = T·(1 − F_U(μT)) + (U/μ)·F_{U+1}(μT) for Erlang-U (F_k the regularised lower incomplete
gamma P(k, ·): E[G; G ≤ T] = (U/μ)·F_{U+1}(μT)); so the questions add
``Σ_j U·Q·[(μ_j T/U)(1 − F_U(μ_j T)) + F_{U+1}(μ_j T)]`` to W(T) in place of λ·Q·T, and a request finds its whole
prompt (prefix and question) cached with P = F_U(μ_j T_C), the chance that the prompt's last use lies within T_C. (U = 1
is the exponential case: the question recurs with the prefix.) The prefix always holds where its prompt does (its
last use is at least as recent), so the classes are: whole prompt, prefix only (P(prefix) − P(prompt)), nothing.

Capacities are in tokens (the exact model works in blocks: a capacity of b blocks is b·block_tokens tokens).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pdplan.errors import SpecError
from pdplan.numerics.normal import ndtr
from pdplan.numerics.roots import brentq
from pdplan.numerics.special import gammainc, gammaincc
from pdplan.types import FloatArray, IntArray

SessionRouting = Literal["session-affine", "random"]


@dataclass(frozen=True)
class ThinkTime:
    """The law of a user's (or an agent's tool's) time between a turn's end and the next turn's arrival.

    ``exponential`` (mean), ``fixed`` (mean), ``lognormal`` (mean and ``sigma``, the log-space deviation), or
    ``erlang`` (mean and shape ``sigma``: the sum of that many exponentials, which sums of think times give)."""

    kind: Literal["exponential", "fixed", "lognormal", "erlang"]
    mean_s: float
    sigma: float = 0.0
    """Lognormal: the deviation of ln Z; Erlang: the shape (an integer number of exponential stages)."""

    def __post_init__(self) -> None:
        if not self.mean_s > 0 or (self.kind in ("lognormal", "erlang") and not self.sigma > 0):
            raise SpecError("needs mean_s > 0 (and sigma > 0 for lognormal or erlang)", field="think_time")

    def sum_of(self, m: int) -> ThinkTime:
        """The law of Z_1 + … + Z_m (independent): exponential → Erlang (kind ``erlang``, shape m), fixed → fixed,
        lognormal → the lognormal of the same mean and variance (Fenton–Wilkinson; exact for m = 1)."""
        if m == 1:
            return self
        if self.kind == "exponential":
            return ThinkTime("erlang", self.mean_s * m, float(m))
        if self.kind == "fixed":
            return ThinkTime("fixed", self.mean_s * m)
        if self.kind == "erlang":
            return ThinkTime("erlang", self.mean_s * m, self.sigma * m)
        sigma2 = math.log1p(math.expm1(self.sigma**2) / m)
        return ThinkTime("lognormal", self.mean_s * m, math.sqrt(sigma2))

    def cdf(self, t: float) -> float:
        """P(Z ≤ t)."""
        if t <= 0:
            return 0.0
        if self.kind == "exponential":
            return -math.expm1(-t / self.mean_s)
        if self.kind == "fixed":
            return 1.0 if t >= self.mean_s else 0.0
        if self.kind == "erlang":
            return float(gammainc(self.sigma, t * self.sigma / self.mean_s))
        mu = math.log(self.mean_s) - self.sigma**2 / 2
        return float(ndtr((math.log(t) - mu) / self.sigma))

    def mean_min(self, t: float) -> float:
        """E[min(t, Z)] (exponential: m(1 − e^{−t/m}); lognormal: E[Z; Z < t] + t·P(Z ≥ t), with
        E[Z; Z < t] = e^{μ+σ²/2} Φ((ln t − μ − σ²)/σ))."""
        if t <= 0:
            return 0.0
        if math.isinf(t):
            return self.mean_s
        if self.kind == "exponential":
            return -self.mean_s * math.expm1(-t / self.mean_s)
        if self.kind == "fixed":
            return min(t, self.mean_s)
        if self.kind == "erlang":  # E[Z; Z < t] = mean · P(Gamma(shape + 1) < t)
            partial = self.mean_s * float(gammainc(self.sigma + 1, t * self.sigma / self.mean_s))
            return partial + t * (1.0 - self.cdf(t))
        mu = math.log(self.mean_s) - self.sigma**2 / 2
        partial = self.mean_s * float(ndtr((math.log(t) - mu - self.sigma**2) / self.sigma))
        return partial + t * (1.0 - self.cdf(t))

    def mean_min_array(self, t: FloatArray) -> FloatArray:
        """:meth:`mean_min` element by element over ``t`` ≥ 0 (the same expressions in numpy)."""
        t = np.asarray(t, dtype=np.float64)
        mean = self.mean_s
        if self.kind == "exponential":
            return np.asarray(-mean * np.expm1(-t / mean), dtype=np.float64)
        if self.kind == "fixed":
            return np.asarray(np.minimum(t, mean), dtype=np.float64)
        pos = np.maximum(t, 1e-300)
        if self.kind == "erlang":
            x = pos * self.sigma / mean
            out = mean * gammainc(self.sigma + 1, x) + pos * (1.0 - gammainc(self.sigma, x))
        else:  # lognormal
            mu = math.log(mean) - self.sigma**2 / 2
            log_t = np.log(pos)
            out = mean * ndtr((log_t - mu - self.sigma**2) / self.sigma) + pos * (1.0 - ndtr((log_t - mu) / self.sigma))
        return np.asarray(np.where(t > 0, out, 0.0), dtype=np.float64)


def characteristic_time_s(occupancy: Callable[[float], float], capacity: float, saturation: float) -> float:
    """T_C with ``occupancy(T_C) = capacity`` for a nondecreasing occupancy W(T) with W(0) = 0 and limit
    ``saturation`` (∞ when some items are never reused); ∞ when the capacity holds everything (≥ saturation).

    The root is bracketed within a factor 4 from above (``high``) before brentq, whose tolerance is relative to
    ``high``: a capacity far below the occupancy at 1 s (a few tokens, or a subnormal number) otherwise left T_C at a
    tolerance far above the root, and a cache of 5e-324 tokens hit more than one of 1 token (hypothesis found it)."""
    if capacity <= 0:
        return 0.0
    if capacity >= saturation:
        return math.inf
    known: dict[float, float] = {}  # W at the times already evaluated: the bracket's ends are not evaluated again

    def at(t: float) -> float:
        if t not in known:
            known[t] = float(occupancy(t))
        return known[t]

    high = 1.0
    while at(high) < capacity:
        high *= 4.0
    while high > 1e-300 and at(high / 4.0) >= capacity:
        high /= 4.0
    ends = at(0.0) - capacity, at(high) - capacity
    for t, f in zip((0.0, high), ends, strict=True):
        if math.isnan(f):
            raise ValueError(f"The function value at x={t} is NaN; solver cannot continue.")

    def excess(t: float) -> float:
        return float(occupancy(t)) - capacity

    return float(brentq(excess, 0.0, high, xtol=1e-9 * high, rtol=1e-12, f_a=ends[0], f_b=ends[1]))


def append_hit_ratio(context_tokens: float, append_tokens: float) -> float:
    """Token hit ratio of a turn whose history stays cached: (context − append) / context. DualPath's agent traces
    (``docs/mission_features.md §3.1``): 32,721-token context, 429-token append → 32,292 / 32,721 = 98.7 %."""
    return (context_tokens - append_tokens) / context_tokens


@dataclass(frozen=True)
class SessionWorkload:
    """Multi-turn sessions arriving as a Poisson process (cluster-wide rate); token counts are per-turn means."""

    session_rate_per_s: float
    turns_pmf: tuple[float, ...]
    """P(a session has n turns) for n = 1, 2, …; sums to 1."""
    system_tokens: float
    append_tokens: float
    output_tokens: float
    think_time: ThinkTime
    turn_duration_s: float
    """Mean time from the cache's last touch of a turn's blocks to the turn's end, the first part of the gap (0 when
    the cache touches them as the turn ends: an engine frees a finished request's blocks into its LRU then)."""
    outputs_cached: bool = True
    """Whether the cache holds the turn's output KV (a colocated instance does; an xPyD prefill instance never sees
    the outputs, which are decoded elsewhere: its item is the turn's prompt, and the next turn recomputes them)."""
    system_prompts: int = 0
    """How many distinct system prompts the sessions share, spread evenly over them (0: each session's system prompt
    is its own, part of its history only)."""

    def __post_init__(self) -> None:
        pmf = np.asarray(self.turns_pmf, dtype=np.float64)
        if pmf.ndim != 1 or len(pmf) == 0 or np.any(pmf < 0) or abs(pmf.sum() - 1.0) > 1e-9:
            raise SpecError("must be probabilities of 1, 2, … turns summing to 1", field="turns_pmf")
        if self.system_prompts < 0:
            raise SpecError(f"must be >= 0, got {self.system_prompts}", field="system_prompts")
        values = (self.session_rate_per_s, self.append_tokens)
        if min(values) <= 0 or min(self.system_tokens, self.output_tokens, self.turn_duration_s) < 0:
            raise SpecError("rates and appends must be > 0, token counts and durations >= 0", field="sessions")

    @property
    def turns(self) -> FloatArray:
        return np.arange(1, len(self.turns_pmf) + 1, dtype=np.float64)

    @property
    def at_least(self) -> FloatArray:
        """P(n ≥ k) for k = 1, 2, …: the share of sessions that reach turn k."""
        pmf = np.asarray(self.turns_pmf, dtype=np.float64)
        return np.cumsum(pmf[::-1])[::-1]

    @property
    def history_tokens(self) -> FloatArray:
        """H_k = system + k·(append + output): the item left after turn k."""
        return self.system_tokens + self.turns * (self.append_tokens + self.output_tokens)

    @property
    def item_tokens(self) -> FloatArray:
        """What turn k leaves cached: H_k, or without the outputs the turn's prompt H_k − output."""
        return self.history_tokens if self.outputs_cached else self.prompt_tokens

    @property
    def prompt_tokens(self) -> FloatArray:
        """Prompt of turn k: H_{k−1} + append."""
        return self.history_tokens - self.output_tokens


def geometric_turns(mean_turns: float, max_turns: int) -> tuple[float, ...]:
    """A geometric law of turns per session on 1..max_turns (mean ``mean_turns`` before truncation; the tail
    beyond ``max_turns`` is folded into the last value)."""
    q = 1.0 - 1.0 / mean_turns
    pmf = (1.0 - q) * q ** np.arange(max_turns)
    pmf[-1] += q**max_turns
    return tuple(float(p) for p in pmf)


@dataclass(frozen=True)
class SessionCacheResult:
    """One capacity's answer; arrays are per turn index k = 1, 2, … (turn 1 hits only a shared system prompt)."""

    capacity_tokens: float
    characteristic_time_s: float
    hit_probability: FloatArray
    """P(turn k hits at least part of its history or its shared system prompt)."""
    hit_tokens: FloatArray
    """E[hit tokens of turn k] given that the session reaches turn k."""
    prompt_tokens: FloatArray
    token_hit_ratio: float
    """Σ_k P(n ≥ k)·hit tokens_k / Σ_k P(n ≥ k)·prompt_k: hit tokens over all prompt tokens."""
    history_hit_probability: FloatArray
    """P(turn k finds its session's own history): f_k (equal to ``hit_probability`` without a shared system prompt)."""
    history_hit_tokens: FloatArray
    """E[hit tokens of turn k from its history] (its system prompt included when the history is found)."""
    system_hit_probability: float
    """h_S: P(a shared system prompt is cached) (0 without one)."""


def gap_sums(workload: SessionWorkload, t: float, depth: int) -> tuple[FloatArray, FloatArray]:
    """For m = 1..depth gaps in a row (each ``turn_duration + Z``): P(A_m < t) and E[min(t, A_m)].

    Sums of two or more exponential or Erlang think times are Erlang (:meth:`ThinkTime.sum_of`): those are evaluated
    at once (:func:`_erlang_sums`, the same operations element by element), the one think time alone as itself; fixed
    and lognormal sums at once too (:func:`_summed_laws`, the same operations as :meth:`ThinkTime.cdf` and
    :meth:`ThinkTime.mean_min` element by element, so every value is the same double)."""
    m = np.arange(1, depth + 1, dtype=np.float64)
    shifted = t - m * workload.turn_duration_s
    cdf = np.zeros(depth)
    mean_min = np.minimum(t, m * workload.turn_duration_s)
    live = shifted > 0
    if math.isinf(t):
        return np.ones(depth), np.full(depth, math.inf)
    one_by_one = np.flatnonzero(live)
    think = workload.think_time
    if think.kind in ("exponential", "erlang"):
        many = one_by_one[one_by_one >= 1]  # m ≥ 2: an Erlang law (m = 1 is the think time itself)
        one_by_one = one_by_one[one_by_one < 1]
        cdf[many], partial = _erlang_sums(think, m[many], shifted[many])
        mean_min[many] = m[many] * workload.turn_duration_s + partial
    else:
        cdf[one_by_one], partial = _summed_laws(think, depth).at(one_by_one, shifted[one_by_one])
        mean_min[one_by_one] = m[one_by_one] * workload.turn_duration_s + partial
        one_by_one = one_by_one[:0]
    for i in one_by_one:
        law = think.sum_of(int(m[i]))
        cdf[i] = law.cdf(shifted[i])
        mean_min[i] = m[i] * workload.turn_duration_s + law.mean_min(shifted[i])
    return cdf, mean_min


@dataclass(frozen=True)
class _SummedLaws:
    """The laws of Z_1 + … + Z_m, m = 1..depth, of a fixed or lognormal think time (:meth:`ThinkTime.sum_of`), as
    arrays of what :meth:`ThinkTime.cdf` and :meth:`ThinkTime.mean_min` compute from each law before its argument:
    the mean, σ, μ = ln(mean) − σ²/2 and σ², each with Python's scalar ``math`` as those methods do."""

    kind: str
    mean_s: FloatArray
    sigma: FloatArray
    mu: FloatArray
    sigma2: FloatArray

    def at(self, index: IntArray, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(P(A ≤ t), E[min(t, A)])`` of the laws ``index`` at the (positive, finite) ``t``, one each: fixed
        ``[t ≥ mean]`` and ``min(t, mean)``; lognormal Φ((ln t − μ)/σ) and e^{μ+σ²/2}·Φ((ln t − μ − σ²)/σ) +
        t·(1 − Φ((ln t − μ)/σ)) (the logarithm by ``math.log``, one element at a time: the same double)."""
        mean = self.mean_s[index]
        if self.kind == "fixed":
            return np.where(t >= mean, 1.0, 0.0), np.minimum(t, mean)
        log_t = np.fromiter(map(math.log, t.tolist()), dtype=np.float64, count=t.size)
        mu, sigma = self.mu[index], self.sigma[index]
        cdf = ndtr((log_t - mu) / sigma)
        partial = mean * ndtr((log_t - mu - self.sigma2[index]) / sigma)
        return cdf, partial + t * (1.0 - cdf)


@functools.lru_cache(maxsize=64)
def _summed_laws(think: ThinkTime, depth: int) -> _SummedLaws:
    """:class:`_SummedLaws` of ``think`` (fixed or lognormal) up to ``depth`` gaps, once per (law, depth): they do
    not depend on the time the occupancy is evaluated at."""
    laws = [think.sum_of(m) for m in range(1, depth + 1)]
    mu = [math.log(law.mean_s) - law.sigma**2 / 2 for law in laws]
    arrays = [np.array(v, dtype=np.float64) for v in ([w.mean_s for w in laws], [w.sigma for w in laws], mu)]
    arrays.append(np.array([law.sigma**2 for law in laws], dtype=np.float64))
    for a in arrays:
        a.flags.writeable = False
    return _SummedLaws(think.kind, *arrays)


def _erlang_sums(think: ThinkTime, m: FloatArray, t: FloatArray) -> tuple[FloatArray, FloatArray]:
    """P(Z_1 + … + Z_m ≤ t) and E[min(t, Z_1 + … + Z_m)] for each m ≥ 2 and t > 0 of an exponential or Erlang think
    time: the Erlang law of :meth:`ThinkTime.sum_of` (mean m·mean, shape m or m·shape), evaluated as
    :meth:`ThinkTime.cdf` and :meth:`ThinkTime.mean_min` do, an array at a time."""
    mean_s = think.mean_s * m
    shape = m if think.kind == "exponential" else think.sigma * m
    x = t * shape / mean_s
    cdf = np.asarray(gammainc(shape, x), dtype=np.float64)
    partial = mean_s * np.asarray(gammainc(shape + 1, x), dtype=np.float64)
    return cdf, partial + t * (1.0 - cdf)


def _shared_system(workload: SessionWorkload, rate: float) -> tuple[float, float]:
    """(tokens of one shared system prompt, its request rate on one instance) for ``rate`` sessions/s there:
    each of the D prompts is the prefix of 1/D of the turns, ``rate · E[n] / D`` (0, 0 when none is shared)."""
    if workload.system_prompts <= 0 or workload.system_tokens <= 0:
        return 0.0, 0.0
    turns_per_session = float(np.asarray(workload.turns_pmf) @ workload.turns)
    return workload.system_tokens, rate * turns_per_session / workload.system_prompts


def session_cache(
    workload: SessionWorkload,
    capacity_tokens: float,
    *,
    instances: int = 1,
    routing: SessionRouting = "session-affine",
    partial_hits: bool = True,
) -> SessionCacheResult:
    """Hit probability and hit tokens per turn, and the token hit ratio, of one instance's LRU of
    ``capacity_tokens`` when ``instances`` instances share the sessions under ``routing``.

    Random routing: a turn lands on the instance of the turn m turns back with probability ``q(1−q)^(m−1)``,
    q = 1/N; that turn left the session's history ``H_{k−m}`` there (and refreshed every older, shorter history
    of the session on it, a prefix of it), which is still cached iff the m gaps since sum to less than T_C. With
    ``partial_hits=False`` only m = 1 counts (the previous turn's instance, probability 1/N): a lower bound.

    Shared system prompts (``system_prompts`` D ≥ 1, module docstring): a turn that finds no history of its session
    still hits its system prompt's S tokens with probability ``1 − e^{−λ_S T_C}``.

    Memoised by value (:data:`SESSION_CACHE_ENTRIES` answers, least recently used dropped first): the search asks
    for the same (workload, capacity, instances, routing) again for every setting that changes none of them (the
    read paths, the PPD placement, the screen's rounds); the answer's arrays are read-only, shared by the callers."""
    if instances < 1:
        raise SpecError(f"must be >= 1, got {instances}", field="instances")
    return _session_cache(workload, float(capacity_tokens), instances, routing, partial_hits)


SESSION_CACHE_ENTRIES = 1024
"""Answers :func:`session_cache` keeps: a search asks for a few hundred (agent-dualpath's optimize: 100 distinct of
144 asked), each some kilobytes (a few arrays of one float per turn)."""


@functools.lru_cache(maxsize=SESSION_CACHE_ENTRIES)
def _session_cache(
    workload: SessionWorkload, capacity_tokens: float, instances: int, routing: SessionRouting, partial_hits: bool
) -> SessionCacheResult:
    """:func:`session_cache`, once per distinct value of its arguments."""
    q = 1.0 if routing == "session-affine" else 1.0 / instances
    depth = len(workload.turns_pmf)
    landing = q * (1.0 - q) ** np.arange(depth)  # next landing on this instance m = 1, 2, … turns later
    if not partial_hits:
        landing[1:] = 0.0
    reach, pmf, history = workload.at_least, np.asarray(workload.turns_pmf), workload.item_tokens
    later = np.arange(depth)[:, None] + np.arange(1, depth + 1)[None, :]  # [j, m] → index of turn j + m
    reach_after = np.where(later < depth, reach[np.minimum(later, depth - 1)], 0.0)  # P(n ≥ j + m)
    if partial_hits:  # never landed on again: the session ends first, r turns later, with prob (1 − q)^r
        ends = np.where(later - 1 < depth, pmf[np.minimum(later - 1, depth - 1)], 0.0)  # P(n = j + r), r = m − 1
        stays = ends @ (1.0 - q) ** np.arange(depth)
    else:  # reused only by the next turn, with probability q
        stays = pmf + (1.0 - q) * np.append(reach[1:], 0.0)
    rate = workload.session_rate_per_s / instances
    system, system_rate = _shared_system(workload, rate)

    def occupancy(t: float) -> float:
        _, mean_min = gap_sums(workload, t, depth)
        refreshed = reach_after @ (landing * mean_min)
        systems = workload.system_prompts * system * -math.expm1(-system_rate * t)
        return float(rate * np.sum((history - system) * (refreshed + stays * t))) + systems

    t_c = characteristic_time_s(occupancy, capacity_tokens, math.inf)
    cdf, _ = gap_sums(workload, t_c, depth)
    found = landing * cdf  # P(most recent landing m turns back and still cached)
    own_hit, own_tokens = _own_hits(found, history)
    system_hit = 0.0 if system <= 0 else (1.0 if math.isinf(t_c) else -math.expm1(-system_rate * t_c))
    hit_probability = own_hit + (1.0 - own_hit) * system_hit
    hit_tokens = own_tokens + (1.0 - own_hit) * system_hit * system
    prompts = workload.prompt_tokens
    ratio = float(np.sum(reach * hit_tokens) / np.sum(reach * prompts))
    for shared in (hit_probability, hit_tokens, prompts, own_hit, own_tokens):
        shared.flags.writeable = False
    return SessionCacheResult(
        capacity_tokens, t_c, hit_probability, hit_tokens, prompts, ratio, own_hit, own_tokens, system_hit
    )


def _own_hits(found: FloatArray, history: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per turn k = 1..depth: P(it finds its session's history) ``Σ_{m<k} found_m`` and the tokens it finds
    ``Σ_{m<k} found_m·H_{k−m}`` (``found_m``: landed m turns back and still cached). Where no landing but the previous
    turn's can be found (session-affine routing, or ``partial_hits=False``: ``found_m = 0`` for m ≥ 2) each sum is
    its one term, ``found_1`` and ``found_1·H_{k−1}``, taken as it is (adding zeros changes no double); else each
    prefix is summed by ``np.sum``, one turn at a time."""
    depth = found.size
    if not np.any(found[1:]):
        return np.r_[0.0, np.full(depth - 1, found[0])], np.r_[0.0, found[0] * history[: depth - 1]]
    own_hit = np.array([0.0] + [float(np.sum(found[:k])) for k in range(1, depth)])
    own_tokens = np.array([0.0] + [float(np.sum(found[:k] * history[k - 1 :: -1][:k])) for k in range(1, depth)])
    return own_hit, own_tokens


@dataclass(frozen=True)
class SharedPrefixWorkload:
    """Requests at ``request_rate_per_s`` per instance (Poisson), each a shared prefix j (``prefix_tokens[j]``,
    chosen with probability ``popularity[j]``) followed by its own question and output."""

    request_rate_per_s: float
    prefix_tokens: tuple[float, ...]
    popularity: tuple[float, ...]
    question_tokens: float
    output_tokens: float
    questions_per_prefix: int | None = None
    """U distinct questions per prefix, resent in turn (module docstring, *Resent questions*); None: each new."""

    def __post_init__(self) -> None:
        p = np.asarray(self.popularity, dtype=np.float64)
        if p.shape != np.shape(self.prefix_tokens) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
            raise SpecError("needs one probability per prefix, summing to 1", field="popularity")
        if self.request_rate_per_s <= 0 or min(self.question_tokens, self.output_tokens) < 0:
            raise SpecError("needs a rate > 0 and token counts >= 0", field="shared_prefixes")
        if self.questions_per_prefix is not None and self.questions_per_prefix < 1:
            raise SpecError("must be an integer >= 1 (or absent: every question new)", field="questions_per_prefix")


def zipf_popularity(n_prefixes: int, exponent: float) -> tuple[float, ...]:
    """p_j ∝ j^(−s), j = 1..P (s = 0: uniform)."""
    weights = np.arange(1, n_prefixes + 1, dtype=np.float64) ** -exponent
    return tuple(float(w) for w in weights / weights.sum())


@dataclass(frozen=True)
class SharedPrefixResult:
    capacity_tokens: float
    characteristic_time_s: float
    hit_probability: FloatArray
    """Per prefix: 1 − exp(−λ p_j T_C)."""
    token_hit_ratio: float
    """Σ_j p_j (L_j h_j + Q g_j) / (Σ_j p_j L_j + Q): the cached share of the prompt tokens."""
    prompt_hit_probability: FloatArray
    """Per prefix: g_j = P(a request finds its whole prompt cached) = F_U(λ p_j T_C) with resent questions (module
    docstring); 0 where every question is new."""


def shared_prefix_cache(workload: SharedPrefixWorkload, capacity_tokens: float) -> SharedPrefixResult:
    """Hit probabilities per prefix (of the prefix, and of the whole prompt) and the token hit ratio of an LRU of
    ``capacity_tokens`` (module docstring)."""
    lengths = np.asarray(workload.prefix_tokens, dtype=np.float64)
    rates = workload.request_rate_per_s * np.asarray(workload.popularity, dtype=np.float64)
    resent = workload.questions_per_prefix
    question = 0.0 if resent is not None else workload.question_tokens
    unique = workload.request_rate_per_s * (question + workload.output_tokens)

    def occupancy(t: float) -> float:
        held = float(np.sum(lengths * -np.expm1(-rates * t)) + unique * t)
        if resent is not None:
            held += resent * workload.question_tokens * float(np.sum(_erlang_held(rates * t, resent)))
        return held

    live = rates > 0
    saturation = math.inf if unique > 0 else float(np.sum(lengths[live]))
    if resent is not None and unique <= 0:
        saturation += resent * workload.question_tokens * int(np.count_nonzero(live))
    t_c = characteristic_time_s(occupancy, capacity_tokens, saturation)
    hit = np.where(live, 1.0, 0.0) if math.isinf(t_c) else -np.expm1(-rates * t_c)
    whole = np.zeros_like(hit)
    if resent is not None:
        whole = np.where(live, 1.0, 0.0) if math.isinf(t_c) else np.asarray(gammainc(resent, rates * t_c))
    p = np.asarray(workload.popularity, dtype=np.float64)
    cached = np.sum(p * (lengths * hit + workload.question_tokens * whole))
    ratio = float(cached / (np.sum(p * lengths) + workload.question_tokens))
    return SharedPrefixResult(capacity_tokens, t_c, hit, ratio, whole)


def _erlang_held(mu_t: FloatArray, shape: int) -> FloatArray:
    """Per prompt, the share of time an item with Erlang-``shape`` gaps of mean shape/μ is held by an LRU of
    characteristic time T: ``E[min(T, G)]/E[G] = (μT/k)(1 − F_k(μT)) + F_{k+1}(μT)`` (module docstring)."""
    x = np.asarray(mu_t, dtype=np.float64)
    return np.asarray(x / shape * gammaincc(shape, x) + gammainc(shape + 1, x), dtype=np.float64)
