"""The prefix cache as a search dimension: the cache settings ``optimize`` tries, and the screen's price of a
prefill instance type under each (docs/prefix_cache.md §8).

**Variants** (:func:`cache_variants`). A workload without reuse has one: the scenario's ``cache:`` (it changes
nothing). With reuse, ``search: cache:`` lists prefix caching on/off, the routings and, per tier of the scenario's
``cache.tiers``, the sizes to try (0 leaves the tier out); the variants are their product, with caching off a single
variant. Without ``search: cache:`` the one variant is the scenario's ``cache:`` (prefix caching on, affinity, the
tiers given: what the engines do by default). ``read_paths`` (DualPath, :mod:`pdplan.serving.dual_path_setup`) is a
dimension only where a tier sits behind a storage NIC (a remote pool, known from the catalogue) and only for xPyD
plans: the colocated baseline keeps ``prefill`` (:func:`colocated_caches`). ``turn_placement`` (PPD,
:mod:`pdplan.serving.ppd_model`) multiplies every caching-on variant by the policies listed, for xPyD plans of a
``sessions`` workload; the colocated baseline keeps ``pd``. The screen prices every PPD variant as its ``pd`` twin (the
prefill side's price); the exact re-evaluation prices the placement.

**The screen's price** (:func:`screened_prefill`). The exact model splits each prompt bin into its cache classes
(:mod:`pdplan.serving.prefix_cache`); the screen keeps one service per bin, the classes' mean — missed tokens'
prefill plus the exposed load of the hit tokens, weighted by the classes' shares — so its tables keep their shape
(the wait's service variance across classes is left out: the screen is a ranking, every plan it reports is
re-evaluated exactly). The hit rates are those of one prefill instance at :data:`SCREEN_LOAD` of its own cached
capacity (a fixed point of two rounds) — for ``affinity`` routing a deployment of x instances is x such caches, each
at 1/x of the rate; for ``load-balance`` the exact model divides a session's reuse over the instances, which the
screen does not (optimistic there).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.serving.build import LocalModel, build_model, goodput_model, with_cache_rate
from pdplan.serving.cache_domain import cache_rate, decode_duration_s, role_domain
from pdplan.serving.cache_mechanisms import SNIC_KINDS
from pdplan.serving.cache_setup import cache_setup, reuses_kv
from pdplan.serving.goodput import Goodput
from pdplan.serving.resolve import ResolvedScenario
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import PrefillPerf, cached_prefill_perf
from pdplan.serving.same_hits import SameHits
from pdplan.specs.cache import CacheRouting, CacheSpec, ReadPaths, TierChoice, TurnPlacementSpec
from pdplan.specs.scenario import Scenario, SloSpec

if TYPE_CHECKING:
    pass

SCREEN_LOAD = 0.8
"""The share of one cached prefill instance's capacity its hit rates are evaluated at in the screen."""
SCREEN_ROUNDS = 2
WARM_RTOL = 0.05
"""A warm-started colocated estimate stops after one build when g(r₀) is within this of r₀."""


def cache_variants(scenario: Scenario, catalog: Catalog | None = None) -> tuple[CacheSpec | None, ...]:
    """The cache settings the search tries (module docstring); ``catalog`` tells which tiers sit behind a storage
    NIC (without it ``read_paths`` stays the scenario's)."""
    search = scenario.search.cache if scenario.search is not None else None
    placements = _placements(scenario)  # refuses PPD policies without sessions to place
    if not reuses_kv(scenario) or search is None:
        return (scenario.cache,)
    tiers = scenario.cache.tiers if scenario.cache is not None else ()
    if search.tier_capacities and len(search.tier_capacities) != len(tiers):
        raise SpecError(
            f"gives sizes for {len(search.tier_capacities)} tier(s), the scenario's cache.tiers has {len(tiers)}",
            field="search.cache.tier_capacities",
        )
    sizes: tuple[tuple[float | None, ...], ...] = search.tier_capacities or tuple((t.capacity,) for t in tiers)
    paths = _read_paths(scenario, catalog)
    out: list[CacheSpec | None] = []
    for on in dict.fromkeys(search.prefix_caching):
        if not on:
            out.append(CacheSpec(prefix_caching=False))
            continue
        for routing in dict.fromkeys(search.routing):
            for chosen in itertools.product(*sizes):
                kept = tuple(
                    TierChoice(storage=t.storage, capacity=c)
                    for t, c in zip(tiers, chosen, strict=True)
                    if c is None or c > 0
                )
                for spec in _with_paths(scenario.cache, routing, kept, paths, catalog):
                    out.extend(_placed(spec, placements))
    return tuple(dict.fromkeys(out))


def _placements(scenario: Scenario) -> tuple[TurnPlacementSpec, ...]:
    """The PPD policies searched: ``search.cache.turn_placement`` where given (a ``sessions`` workload only: bad input
    elsewhere; colocated plans keep ``pd``, :func:`colocated_caches`), else the scenario's own."""
    own = scenario.cache.turn_placement if scenario.cache is not None else TurnPlacementSpec()
    search = scenario.search.cache if scenario.search is not None else None
    if search is None or "turn_placement" not in search.model_fields_set:
        return (own,)
    listed = tuple(dict.fromkeys(search.turn_placement))
    if any(p.policy != "pd" for p in listed) and scenario.workload.sessions is None:
        why = "PPD policies other than pd need a sessions workload (multi-turn sessions to place)"
        raise SpecError(why, field="search.cache.turn_placement")
    return listed


def _placed(spec: CacheSpec, placements: tuple[TurnPlacementSpec, ...]) -> list[CacheSpec]:
    """``spec`` under each PPD policy (the default ``pd`` leaves the setting as it was)."""
    return [spec if p == spec.turn_placement else spec.model_copy(update={"turn_placement": p}) for p in placements]


def _read_paths(scenario: Scenario, catalog: Catalog | None) -> tuple[ReadPaths, ...]:
    """The read paths searched: ``search.cache.read_paths`` where the catalogue is known, else the scenario's."""
    own: ReadPaths = scenario.cache.read_paths if scenario.cache is not None else "prefill"
    search = scenario.search.cache if scenario.search is not None else None
    if catalog is None or search is None or "read_paths" not in search.model_fields_set:
        return (own,)
    return tuple(dict.fromkeys(search.read_paths))


def _with_paths(
    base: CacheSpec | None,
    routing: CacheRouting,
    tiers: tuple[TierChoice, ...],
    paths: tuple[ReadPaths, ...],
    catalog: Catalog | None,
) -> list[CacheSpec]:
    """One variant per read path; ``dual`` only where one of ``tiers`` sits behind a storage NIC (without a catalogue
    the paths are the scenario's own, kept as given)."""
    snic = catalog is None or any(catalog.storage(t.storage).kind in SNIC_KINDS for t in tiers)
    kept = [p for p in paths if p == "prefill" or snic] or ["prefill"]
    base = base or CacheSpec()
    return [
        CacheSpec(
            prefix_caching=True,
            routing=routing,
            tiers=tiers,
            read_paths=p,
            staging_dram=base.staging_dram,
            dual_split=base.dual_split,
        )
        for p in kept
    ]


def colocated_caches(caches: tuple[CacheSpec | None, ...]) -> tuple[CacheSpec | None, ...]:
    """The cache settings tried on the colocated baseline: all but ``load-balance`` routing. A colocated deployment
    routes at random whatever the cache (one queue per instance, :mod:`pdplan.serving.colocated`), so a
    load-balancing router buys it no better queueing and only divides a session's reuse over the instances: it is
    dominated by ``affinity``. A colocated deployment has no decode nodes to read over: DualPath variants become
    ``read_paths: prefill``; nor decode instances to append on: PPD variants become ``pd``."""
    plain = {"read_paths": "prefill", "turn_placement": TurnPlacementSpec()}
    kept = tuple(
        c
        if c is None or (c.read_paths == "prefill" and c.turn_placement.policy == "pd")
        else c.model_copy(update=plain)
        for c in caches
        if c is None or not c.prefix_caching or c.routing != "load-balance"
    )
    return tuple(dict.fromkeys(kept)) or caches


def screen_twin(spec: CacheSpec | None) -> CacheSpec | None:
    """The setting the screen prices ``spec`` as: the same prefix caching, routing and tiers, with the settings
    :func:`screened_prefill` does not read at their defaults (the read paths with their staging DRAM and split, the
    PPD placement: the screen prices the prefill side's cache classes only, module docstring). Settings with one
    twin have one screen price, computed once (:mod:`pdplan.search.pool`)."""
    if spec is None or not spec.prefix_caching:
        return spec
    return CacheSpec(prefix_caching=True, routing=spec.routing, tiers=spec.tiers)


def screened_prefill(res: ResolvedScenario[Any], hw: RoleHardware, spec: CacheSpec | None) -> PrefillPerf | None:
    """One prefill instance type's per-bin price under the cache ``spec`` for the screen (module docstring); None
    when the variant caches nothing (no reuse, or caching off): the plain price applies."""
    setup = cache_setup(res.reuse, spec, res.catalog, res.engine)
    if setup is None:
        return None
    from pdplan.serving.prefix_cache import cache_classes, class_prices  # lazy: a prefix cache (start-up, #27)

    lens = res.lengths
    prob = lens.input_marginal()
    domain = dataclasses.replace(
        role_domain(res, hw, "prefill", 1, float(lens.input_tokens.max())), holds_outputs=False
    )
    kvb = res.model.kv_bytes_per_token(hw.precision.kv_bytes)
    duration_s = decode_duration_s(res)
    service = cached_prefill_perf(hw, lens.input_tokens, np.zeros_like(lens.input_tokens)).service_s
    perf = PrefillPerf(lens.input_tokens, service, service)
    for _ in range(SCREEN_ROUNDS):
        rate = SCREEN_LOAD * hw.dp / max(float(prob @ perf.service_s), 1e-12)
        classes = cache_classes(setup, domain, lens.input_tokens, rate, duration_s, spread=False)  # per-bin prices
        priced = class_prices(hw, classes, lens.input_tokens, kvb)
        each, load, w = priced.perf, priced.load_s, classes.weights
        perf = PrefillPerf(
            lens.input_tokens,
            np.asarray(np.sum(w * (each.latency_s + load), axis=1), np.float64),
            np.asarray(np.sum(w * (each.service_s + load), axis=1), np.float64),
        )
    return perf


def screened_goodput(
    res: ResolvedScenario[Any], slo: SloSpec, start_rps: float | None, same: SameHits | None = None
) -> tuple[ResolvedScenario[Any], LocalModel, Goodput]:
    """The colocated baseline's per-instance goodput for the pool, in two model builds where the exact
    :func:`pdplan.serving.build.goodput_model` brackets the self-consistent rate: r₁ = g(r₀) from ``start_rps`` (a
    neighbouring setting's estimate; None: :func:`pdplan.serving.cache_domain.cache_rate`), then g(r₁), and the rate
    where the secant of h(r) = g(r) − r through the two crosses 0, kept between g(r₀) and g(r₁) (one build when a warm
    start is already within :data:`WARM_RTOL` of self-consistent; the second reuses the first's parts the hit rates do
    not change, as :func:`~pdplan.serving.build.goodput_model`'s probes do: the same model, bit for bit). The plans the
    pool ranks best are re-evaluated exactly (:mod:`pdplan.search.exact`). Without a cache: the goodput itself.
    ``same``: the search's colocated goodput searches (:class:`pdplan.serving.same_hits.SameHits`), which the exact
    plans' probes read where they build one of these models (an emptied cache) and start in the same interval."""
    if res.cache is None:
        return goodput_model(res, slo)
    r0 = start_rps if start_rps is not None and start_rps > 0 else cache_rate(res)
    search = same or SameHits()
    first = with_cache_rate(res, r0)
    model = build_model(first)
    good = search.goodput(first, model, slo, None)
    if start_rps is not None and abs(good.rate_rps - r0) <= WARM_RTOL * r0:
        return first, model, good  # a neighbouring setting's rate was already (nearly) self-consistent here
    g0 = good.rate_rps
    second = with_cache_rate(res, g0)
    model = build_model(second, model)  # the first build's parts the hit rates do not change, reused (build_model)
    good = search.goodput(second, model, slo, None)
    h0, h1 = g0 - r0, good.rate_rps - g0
    r = g0 - h1 * (g0 - r0) / (h1 - h0) if h1 != h0 else good.rate_rps
    r = min(max(r, min(g0, good.rate_rps)), max(g0, good.rate_rps), good.limit.rate_rps)
    return second, model, dataclasses.replace(good, rate_rps=r)
