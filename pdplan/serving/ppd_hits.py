"""What the prefill caches hold for the turns a PPD placement leaves on the prefill pool (docs/prefix_cache.md §11,
issue #24).

A turn placed on decode is prefilled there, on the history its decode instance holds: the prefill pool never sees
it, so its prompt never enters a prefill cache. A later turn k left on the prefill pool (its append above the
threshold, or its history no longer held on decode) finds there at most the prompt of its session's *last turn that
was prefilled on the prefill pool*, k − m, which the cache last touched m gaps ago (m turn durations and m think
times), not the previous turn's prompt one gap ago as plain disaggregation has it.

**Derivation.** Let s_j be P(turn j runs on decode) (``placed``: f_j·π_j, s_1 = 0) and q the probability that a
prefill-pool turn lands on a given prefill instance's cache given it is the session's (1 under session-affine
routing, 1/N under random routing over N instances; :func:`pdplan.cache.lru_closed_form.session_cache`). Placements
depend on each turn's own append and on whether its history is held, independent of turn k's append, so for a turn
k on the prefill pool the most recent earlier turn that left its prompt on the same prefill cache is k − m with

    a_{k,m} = q·(1 − s_{k−m})·Π_{j=k−m+1}^{k−1} (1 − q·(1 − s_j)),   m = 1..k−1,

(each turn in between ran on decode, or on another prefill instance). That prompt is still cached iff the m gaps
since sum to less than the LRU's characteristic time T_C: ``c_m = P(m·d + Z_1 + … + Z_m < T_C)`` (d the turn's
duration after the cache's last touch, Z the think times; Che's approximation, Che et al., IEEE JSAC 2002; Fricker
et al., ITC 2012, as :func:`~pdplan.cache.lru_closed_form.session_cache` has it), T_C that of the prefill caches
under the placement (:func:`prefill_characteristic_time_s`: only prefill-pool turns insert, so they hold fewer,
shorter prompts and T_C is longer than plain disaggregation's). The prompt it left is ``S + (j − 1)·(a + o) +
E[append_j | prefill]`` with j = k − m (S the system prompt, a the mean append, o the mean output: an xPyD prefill
instance holds the prompt only), where an append placed on the prefill pool is not a random one:
``E[append_j | prefill] = (a − s_j·m̄_j)/(1 − s_j)`` (m̄_j the mean append of the turns placed on decode; a threshold
policy leaves the long appends on the prefill pool). So the expected hit tokens of a prefill-pool turn k are

    T_k = Σ_{m=1}^{k−1} a_{k,m}·c_m·(S + (k − m − 1)·(a + o) + E[append_{k−m} | prefill]),

plus, where the sessions share D system prompts of S tokens, ``(1 − F_k)·h_S·S`` (F_k = Σ_m a_{k,m}·c_m the
probability the history is found, h_S = 1 − e^{−λ_S·T_C} the system prompt's, λ_S its rate of prefill-pool turns
on one instance), against plain disaggregation's ``T⁰_k`` (every s_j = 0: ``a_{k,m} = q(1 − q)^{m−1}``, every
prompt at the mean append), which is :func:`~pdplan.cache.lru_closed_form.session_cache`'s hit tokens term for term
(tests/unit/test_ppd_hits.py). Worked example: 3 fixed turns, zero think time and turn duration (c_m = 1),
session-affine, s_2 = s_3 = p: ``T_2 = S + a``, ``T_3 = (1 − p)·(S + a + o + ā_P) + p·(S + a)``, ā_P = (a −
p·m̄)/(1 − p).

**In the serving model** (:func:`pdplan.serving.ppd_model.place_turns`): a prefill-pool turn's hit splits into how
often it hits at all, ``P_k = F_k + (1 − F_k)·h_S`` (:func:`hit_probability`), and how many tokens a hit holds,
``T_k / P_k``. With L_{k,b} the requests of turn k whose prompt falls in bin b and that the placement leaves on the
prefill pool (the placed turns' own prompt law taken out, :mod:`pdplan.serving.ppd_bins`), :func:`left_bin_hits`
gives per bin the share of them that hits, ``Σ_k L_{k,b}·P_k / Σ_k L_{k,b}``, and what a hit holds against plain
disaggregation, ``r_k = (T_k/P_k)/(T⁰_k/P⁰_k)`` mixed by ``L_{k,b}·P_k``: the bin's prefill-side mass splits into
hits and misses by that share, its hit classes' tokens are plain disaggregation's times that ratio, and one factor
over the bins sets the prefill side's hit tokens per request to ``Σ_k u_k·T_k / Σ_k P(k)·T⁰_k`` of plain
disaggregation's, u_k = P(turn k)·(1 − s_k) (:func:`remaining_share`: per turn, free of the per-bin figures'
mixing of turns at their means); the pool's rows are then priced at those hit tokens
(:mod:`pdplan.serving.ppd_prices`). Two earlier forms missed: scaling the bin's hit mass by ``ρ_b = Σ_k
u_k·P(b | k)·T_k / Σ_k u_k·P(b | k)·T⁰_k`` (:func:`bin_hit_scale`) kept the mean hit but priced a turn that finds an
older, shorter prompt of its session as a share of whole-prompt hits and a share of full prefills (3 turns, zero
think time, threshold 256: 0.387 of the prefill-side turns hitting where the simulator has 0.491, the prefill
service's second moment 17 % above the simulator's, 14 % after); and plain disaggregation's hit mass less the placed
turns' is nothing under ``ppd`` (every held history placed), while the turns whose history their decode instance no
longer held find their session's earlier prompt here (geometric turns, 5 s think times: a prefill token hit ratio of
0 against the simulator's 0.005). The survivals c_m are conditioned on the placement where a ``miss``
(:class:`pdplan.serving.ppd_miss.DecodeMiss`) is given, as the serving model gives it: a turn left on the prefill pool
after its history left the decode rank had a long think time, which its session's prompt in the prefill cache must
also have survived (:func:`pdplan.serving.ppd_miss.conditioned_survival`; before 2026-12-07 they were taken
independent: 5–23 % of those turns hit a prefill cache where the simulator has 0–2 %, docs/prefix_cache.md §11).
Limits: the prefill characteristic time's occupancy takes the gaps unconditioned; a bin's hit holds one
number of tokens over its quadrature points (plain disaggregation's form: the simulator's computed tokens vary with
the append alone, docs/prefix_cache.md §11); a remote pool's hits are not modelled (a bin whose plain hits are a
remote pool's alone keeps plain disaggregation's hit mass less the placed); the split of the hits among the local
tiers is plain disaggregation's (one band's T_C: the last local one's); the appends are taken at their means in the
items (as the plain closed form does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdplan.cache.lru_closed_form import (
    SessionRouting,
    SessionWorkload,
    characteristic_time_s,
    gap_sums,
    session_cache,
)
from pdplan.serving.cache_domain import cache_rate, prefill_domain, turn_duration_s
from pdplan.serving.ppd_miss import DecodeMiss, conditioned_survival
from pdplan.serving.prefix_cache import lower_tiers, session_workload
from pdplan.types import FloatArray


def last_prefill_law(placed: FloatArray, landing: float) -> FloatArray:
    """``[N, N]`` a[k − 1, m − 1] = a_{k,m}: P(the last earlier turn that left its prompt on turn k's prefill cache is
    k − m), turn k on the prefill pool (module docstring); ``placed`` s_j per turn (s_1 is taken as 0: turn 1 always
    prefills on the pool), ``landing`` q."""
    s = np.asarray(placed, dtype=np.float64).copy()
    if s.size:
        s[0] = 0.0
    n = s.size
    leave = landing * (1.0 - s)  # P(turn j left its prompt on that cache)
    out = np.zeros((n, n))
    for k in range(1, n):  # turn k + 1 (0-based k)
        through = 1.0
        for m in range(1, k + 1):
            out[k, m - 1] = leave[k - m] * through
            through *= 1.0 - leave[k - m]
    return out


def survival(workload: SessionWorkload, t_c_s: float, depth: int) -> FloatArray:
    """``[depth]`` c_m = P(m·d + Z_1 + … + Z_m < T_C), m = 1..depth (1 for an unbounded T_C), as
    :func:`~pdplan.cache.lru_closed_form.session_cache` evaluates them."""
    cdf, _ = gap_sums(workload, t_c_s, depth)
    return np.asarray(cdf, dtype=np.float64)


def prefill_items(workload: SessionWorkload, placed: FloatArray, placed_append_tokens: FloatArray) -> FloatArray:
    """``[N]`` the prompt a prefill-pool turn j leaves cached, ``S + (j − 1)·(a + o) + E[append_j | prefill]``,
    ``E[append_j | prefill] = (a − s_j·m̄_j)/(1 − s_j)`` (module docstring; a where every turn j runs on decode)."""
    n = len(placed)
    s = _placed(placed)
    a, o = workload.append_tokens, workload.output_tokens
    m_bar = np.asarray(placed_append_tokens, dtype=np.float64)
    on_prefill = np.where(s < 1.0, (a - s * m_bar) / np.maximum(1.0 - s, 1e-300), a)
    return np.asarray(workload.system_tokens + np.arange(n) * (a + o) + on_prefill, dtype=np.float64)


def _placed(placed: FloatArray) -> FloatArray:
    """s_j with s_1 = 0 (turn 1 always prefills on the pool)."""
    s = np.array(placed, dtype=np.float64)
    s[0] = 0.0
    return s


def expected_hits(law: FloatArray, survive: FloatArray, items: FloatArray, system: tuple[float, float] = (0.0, 0.0)
                  ) -> FloatArray:  # fmt: skip
    """``[N]`` T_k = Σ_{m=1}^{k−1} a_{k,m}·c_m·item_{k−m} + (1 − F_k)·h_S·S (module docstring): the own history,
    then a shared system prompt's S tokens, cached with probability h_S, where the history is not found (F_k =
    Σ_m a_{k,m}·c_m, :func:`history_found`); ``system`` (S, h_S)."""
    n = items.size
    out, rows = np.zeros(n), _rows(survive, n)
    for k in range(1, n):
        j = k - np.arange(1, k + 1)  # 0-based index of turn (k + 1) − m, m = 1..k
        out[k] = float(np.sum(law[k, :k] * rows[k, :k] * items[j]))
    tokens, hit = system
    return np.asarray(out + (1.0 - history_found(law, survive)) * hit * tokens, dtype=np.float64)


def history_found(law: FloatArray, survive: FloatArray) -> FloatArray:
    """``[N]`` F_k = Σ_{m=1}^{k−1} a_{k,m}·c_m: P(a prefill-pool turn k finds an earlier prompt of its session in
    its prefill cache) (module docstring; F_1 = 0)."""
    n = law.shape[0]
    found, rows = np.zeros(n), _rows(survive, n)
    for k in range(1, n):
        found[k] = float(np.sum(law[k, :k] * rows[k, :k]))
    return found


def _rows(survive: FloatArray, n: int) -> FloatArray:
    """``[N, N]`` c[k − 1, m − 1]: ``survive`` as given where it is per turn (conditioned on the placement,
    :func:`pdplan.serving.ppd_miss.conditioned_survival`), else the one c_m in every row."""
    c = np.asarray(survive, dtype=np.float64)
    return c if c.ndim == 2 else np.broadcast_to(c[:n], (n, n))


def hit_probability(law: FloatArray, survive: FloatArray, system: tuple[float, float] = (0.0, 0.0)) -> FloatArray:
    """``[N]`` P(a prefill-pool turn k hits at all): ``F_k + (1 − F_k)·h_S`` where the sessions share a system
    prompt (``system`` (S, h_S), S > 0), else F_k (:func:`history_found`). With :func:`expected_hits` it splits T_k
    into how often a turn hits and how many tokens a hit holds, ``T_k / P(hit)`` (module docstring, In the serving
    model)."""
    found = history_found(law, survive)
    tokens, hit = system
    return np.asarray(found + (1.0 - found) * (hit if tokens > 0 else 0.0), dtype=np.float64)


def shared_system(workload: SessionWorkload, instances: int, placed: FloatArray) -> tuple[float, float]:
    """``(S_sh, λ_S)``: a shared system prompt's tokens (0 where each session's is its own) and its request rate on
    one prefill instance, ``λ_s/N·Σ_j P(n ≥ j)·(1 − s_j)/D`` (only prefill-pool turns touch it;
    :func:`pdplan.cache.lru_closed_form.session_cache` with every s_j = 0)."""
    if workload.system_prompts <= 0 or workload.system_tokens <= 0:
        return 0.0, 0.0
    s = _placed(placed)
    reach = np.cumsum(np.asarray(workload.turns_pmf, dtype=np.float64)[::-1])[::-1][: s.size]
    rate = workload.session_rate_per_s / instances * float(reach @ (1.0 - s))
    return workload.system_tokens, rate / workload.system_prompts


def _system_hit(workload: SessionWorkload, instances: int, placed: FloatArray, t_c_s: float) -> tuple[float, float]:
    """``(S, h_S)``: a shared system prompt's tokens and P(cached) ``1 − e^{−λ_S·T_C}``."""
    tokens, rate = shared_system(workload, instances, placed)
    if tokens <= 0:
        return 0.0, 0.0
    return tokens, 1.0 if math.isinf(t_c_s) else -math.expm1(-rate * t_c_s)


def prefill_characteristic_time_s(workload: SessionWorkload, capacity_tokens: float, instances: int, landing: float,
                                  placed: FloatArray, items: FloatArray) -> float:  # fmt: skip
    """T_C of one prefill instance's LRU of ``capacity_tokens`` under the placement: Che's approximation (Che et al.,
    IEEE JSAC 2002) with the occupancy of :func:`pdplan.cache.lru_closed_form.session_cache` where only the turns
    left on the prefill pool insert or refresh a prompt. A prefill-pool turn j (rate ``λ_s/N·(1 − s_j)`` per
    instance, λ_s the sessions' rate) leaves ``items[j]`` (less a shared system prompt, counted apart), held until
    the session's next turn that leaves its prompt on the same cache, j + m, for E[min(t, A_m)] (A_m = m·d + Z_1 +
    … + Z_m), or for t if none does; ℓ_i = q·(1 − s_i):

        W(t) = λ_s/N·Σ_j (1 − s_j)·(item_j − S_sh)·[Σ_m P(n ≥ j + m)·Π_{i=j+1}^{j+m−1}(1 − ℓ_i)·ℓ_{j+m}·E[min(t, A_m)]
               + Σ_{r≥0} P(n = j + r)·Π_{i=j+1}^{j+r}(1 − ℓ_i)·t]  (+ D·S·(1 − e^{−λ_S t}), shared system prompts),

    λ_S = λ_s/N·Σ_j P(n ≥ j)(1 − s_j)/D. With every s_j = 0 it is session_cache's W term for term
    (tests/unit/test_ppd_hits.py)."""
    s = _placed(placed)
    n = s.size
    pmf = np.asarray(workload.turns_pmf, dtype=np.float64)[:n]
    reach = np.cumsum(pmf[::-1])[::-1]
    leave = landing * (1.0 - s)
    # gone[j, m - 1]: P(n ≥ j + m, turns j+1..j+m−1 leave nothing on this cache, turn j + m does), 0-based j
    gone, stays = np.zeros((n, n)), np.zeros(n)
    for j in range(n):
        through = 1.0
        stays[j] = pmf[j]
        for m in range(1, n - j):
            gone[j, m - 1] = reach[j + m] * through * leave[j + m]
            through *= 1.0 - leave[j + m]
            stays[j] += pmf[j + m] * through
    rate = workload.session_rate_per_s / instances
    shared, system_rate = shared_system(workload, instances, s)
    weight = rate * (1.0 - s) * (items - shared)

    def occupancy(t: float) -> float:
        _, mean_min = gap_sums(workload, t, n)  # E[min(t, A_m)], m = 1..n, as session_cache evaluates them
        held = float(weight @ (gone @ mean_min + stays * t))
        return held + workload.system_prompts * shared * -math.expm1(-system_rate * t)

    return characteristic_time_s(occupancy, capacity_tokens, math.inf)


def bin_hit_scale(turn_share: FloatArray, placed: FloatArray, turn_bins: FloatArray, hits: FloatArray,
                  plain_hits: FloatArray) -> FloatArray:  # fmt: skip
    """``[K]`` ρ_b: the prefill-pool turns' expected hit tokens in bin b under the placement over plain
    disaggregation's (module docstring; 1 where the bin holds no prefill-pool hit). ``turn_bins`` ``[N, K]``
    P(bin | turn)."""
    u = np.asarray(turn_share, dtype=np.float64) * (1.0 - np.asarray(placed, dtype=np.float64))
    new = (u * hits) @ turn_bins
    old = (u * plain_hits) @ turn_bins
    return np.asarray(np.where(old > 0, new / np.maximum(old, 1e-300), 1.0), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class PrefillView:
    """The sessions as the prefill caches see them and one prefill instance's local capacity."""

    workload: SessionWorkload
    capacity_tokens: float
    instances: int
    landing: float
    """q: 1 under session-affine routing, 1/N under random routing (module docstring)."""
    plain_t_c_s: float
    """Plain disaggregation's characteristic time (:func:`pdplan.cache.lru_closed_form.session_cache`)."""

    def hits(self, placed: FloatArray, placed_append_tokens: FloatArray, miss: DecodeMiss | None = None
             ) -> tuple[FloatArray, FloatArray]:  # fmt: skip
        """``(T [N], T⁰ [N])``: per turn the expected hit tokens (its own history, else a shared system prompt) of a
        prefill-pool turn under the placement (its own characteristic time, :func:`prefill_characteristic_time_s`)
        and under plain disaggregation (module docstring)."""
        got = self.prefill_hits(placed, placed_append_tokens, miss)
        return got.tokens, got.plain_tokens

    def prefill_hits(self, placed: FloatArray, placed_append_tokens: FloatArray, miss: DecodeMiss | None = None
                     ) -> PrefillHits:  # fmt: skip
        """:meth:`hits` with each turn's probability of a hit at all, under the placement and plain
        disaggregation (:func:`hit_probability`). ``miss``: why the placement left turns on the prefill pool, the
        gaps conditioned on it (:func:`pdplan.serving.ppd_miss.conditioned_survival`); None: unconditioned."""
        n, w = len(placed), self.workload
        items = prefill_items(w, placed, placed_append_tokens)
        t_c = prefill_characteristic_time_s(w, self.capacity_tokens, self.instances, self.landing, placed, items)
        zero = np.zeros(n)
        plain_law, plain_survive = last_prefill_law(zero, self.landing), survival(w, self.plain_t_c_s, n)
        plain_system = _system_hit(w, self.instances, zero, self.plain_t_c_s)
        law = last_prefill_law(placed, self.landing)
        survive = survival(w, t_c, n) if miss is None else conditioned_survival(w, t_c, placed, self.landing, miss)
        system = _system_hit(w, self.instances, placed, t_c)
        return PrefillHits(
            expected_hits(law, survive, items, system),
            expected_hits(plain_law, plain_survive, w.prompt_tokens[:n], plain_system),
            hit_probability(law, survive, system),
            hit_probability(plain_law, plain_survive, plain_system),
        )


@dataclass(frozen=True, slots=True)
class PrefillHits:
    """Per turn ``[N]``: a prefill-pool turn's expected hit tokens T_k and probability of a hit, under the placement
    and under plain disaggregation (:meth:`PrefillView.prefill_hits`)."""

    tokens: FloatArray
    plain_tokens: FloatArray
    hit_probability: FloatArray
    plain_hit_probability: FloatArray


def prefill_view(res: Any, turns: FloatArray, token_interval_s: float) -> PrefillView:
    """The sessions as the prefill caches see them (as :func:`pdplan.serving.prefix_cache.cache_classes` builds them
    for an xPyD deployment: the prompt is the item, the decode after the prefill the turn's duration), one prefill
    instance's local tiers (HBM and the instance-local tiers below it: the band a history is found in at all) and
    the landing probability q (module docstring)."""
    setup, spec = res.cache, res.cache.reuse.sessions
    domain = prefill_domain(res)
    duration_s = turn_duration_s(res, token_interval_s if math.isfinite(token_interval_s) else None)
    workload = session_workload(
        spec, np.asarray(turns, dtype=np.float64), cache_rate(res), duration_s, outputs_cached=False
    )
    caps = [domain.hbm_tokens] + [
        t.capacity_tokens
        for t, s in zip(lower_tiers(setup, domain), setup.storages, strict=True)
        if s.kind != "remote-pool"
    ]
    edge = float(np.max(caps)) if setup.inclusive else float(np.sum(caps))
    affine = setup.spec.routing == "affinity"
    kind: SessionRouting = "session-affine" if affine else "random"
    plain = session_cache(workload, edge, instances=domain.instances, routing=kind)
    landing = 1.0 if affine else 1.0 / domain.instances
    return PrefillView(workload, edge, domain.instances, landing, plain.characteristic_time_s)


@dataclass(frozen=True, slots=True)
class LeftHits:
    """Per prompt bin ``[K]``, the turns a placement leaves on the prefill pool (:func:`left_bin_hits`)."""

    fraction: FloatArray
    """The share of them that hit."""
    token_scale: FloatArray
    """What a hit holds under the placement over plain disaggregation (scales the bin's plain hit tokens)."""
    mean_tokens: FloatArray
    """A hit's mean tokens, turn by turn (where plain disaggregation has no hit in the bin)."""
    modelled: FloatArray
    """1 where the local tiers' closed form gives them a hit in plain disaggregation (Σ_k L_{k,b}·P⁰_k > 0), else 0:
    their hits there, if any, are a remote pool's, which this form does not model (the plain hit mass less the
    placed is kept)."""


def left_bin_hits(left: FloatArray, hits: PrefillHits) -> LeftHits:
    """:class:`LeftHits` of the prefill-pool turns per prompt bin (module docstring, In the serving model), ``left``
    ``[N, K]`` L_{k,b}: P(turn k, its prompt in bin b, left on the prefill pool) (the placed turns' own prompt law
    taken out: :mod:`pdplan.serving.ppd_bins`):

        fraction_b    = Σ_k L_{k,b}·P_k / Σ_k L_{k,b}                        (P(a bin-b turn left there hits))
        token_scale_b = Σ_k L_{k,b}·P_k·r_k / Σ_k L_{k,b}·P_k,   r_k = (T_k/P_k) / (T⁰_k/P⁰_k)
        mean_tokens_b = Σ_k L_{k,b}·T_k / Σ_k L_{k,b}·P_k                     (a hit's mean tokens, turn by turn)

    r_k is what a turn-k hit holds under the placement over what it holds in plain disaggregation (the found prompt
    is older where the turns since ran on decode); it scales the bin's plain hit tokens, which keep their rise with
    the prompt's length within a turn (a longer prompt holds a longer history), where ``mean_tokens`` (per turn, not
    per length) stands in where plain disaggregation has no hit in the bin. r_k = 1 where either side has no hit;
    fraction 0 and scale 1 in a bin with nothing left."""
    left = np.asarray(left, dtype=np.float64)
    p, t = hits.hit_probability[: left.shape[0]], hits.tokens[: left.shape[0]]
    p0, t0 = hits.plain_hit_probability[: left.shape[0]], hits.plain_tokens[: left.shape[0]]
    ok = (p > 0) & (p0 > 0) & (t0 > 0)
    r = np.where(ok, (t / np.maximum(p, 1e-300)) / np.maximum(t0 / np.maximum(p0, 1e-300), 1e-300), 1.0)
    mass, hit = left.sum(axis=0), p @ left
    fraction = np.where(mass > 0, hit / np.maximum(mass, 1e-300), 0.0)
    scale = np.where(hit > 0, (p * r) @ left / np.maximum(hit, 1e-300), 1.0)
    mean = np.where(hit > 0, t @ left / np.maximum(hit, 1e-300), 0.0)
    modelled = (p0 @ left > 0).astype(np.float64)
    return LeftHits(*(np.asarray(a, dtype=np.float64) for a in (np.clip(fraction, 0.0, 1.0), scale, mean, modelled)))


def remaining_share(turn_share: FloatArray, placed: FloatArray, hits: FloatArray, plain_hits: FloatArray) -> float:
    """``Σ_k P(k)·(1 − s_k)·T_k / Σ_k P(k)·T⁰_k``: the hit tokens per request left on the prefill pool
    under the placement over plain disaggregation's (module docstring; 1 where plain disaggregation hits nothing).
    Per turn, so a turn placed on decode takes its own hits out, not its prompt bin's mean."""
    share = np.asarray(turn_share, dtype=np.float64)
    old = float(share @ plain_hits)
    new = float((share * (1.0 - np.asarray(placed, dtype=np.float64))) @ hits)
    return new / old if old > 0 else 1.0
