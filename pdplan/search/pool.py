"""The optimiser's candidate pool: the screened xPyD candidates the later stages read (:mod:`pdplan.search.keep`:
the screen runs in bounded chunks, so a search's memory does not grow with its space) and the colocated baseline's
replicas, as parallel arrays of metrics, with each candidate rebuilt as a :class:`~pdplan.serving.Deployment` only
when it is reported.

The colocated baseline's per-instance goodput is exact (random routing splits the rate evenly, so z instances carry
z times one instance's goodput).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.io.catalog import Catalog
from pdplan.search.cache_options import colocated_caches, screen_twin, screened_goodput, screened_prefill
from pdplan.search.keep import Groups, Keep, Rows, Tally, kept_rows
from pdplan.search.memo import Context
from pdplan.search.plans import Plan
from pdplan.search.screen import Candidates, Margins, screen_disaggregated, screened_count
from pdplan.search.select import Metrics
from pdplan.search.space import Space
from pdplan.search.tables import DecodeTable, PrefillBase, block_variants, decode_tables, kv_options, prefill_base
from pdplan.serving import (
    Colocated,
    Disaggregated,
    ResolvedScenario,
    Role,
    RoleHardware,
    decode_cells,
    prefill_perf,
)
from pdplan.serving.cache_setup import cache_cost_usd_per_hour, cache_setup
from pdplan.serving.resolve import bind
from pdplan.serving.roles import PrefillPerf
from pdplan.serving.same_hits import SameHits
from pdplan.specs.cache import CacheSpec
from pdplan.specs.ceilings import MAX_SCREENED_CANDIDATES, SCREEN_CHUNK_CANDIDATES
from pdplan.types import Binding, Routing

Stage = Callable[[str], None]


@dataclass(frozen=True)
class Pool:
    """The kept screened candidates (in enumeration order) then the colocated ones, as parallel arrays;
    :meth:`deployment` rebuilds one."""

    screened: Candidates
    bases: list[PrefillBase]
    tables: list[DecodeTable]
    routings: tuple[Routing, ...]
    colocated: list[Colocated]
    metrics: Metrics
    tau_s: np.ndarray
    binding: np.ndarray
    shared_warnings: tuple[str, ...] = ()
    """Warnings of the base scenario (e.g. context-window clipping): every candidate has them; reported once."""
    chunk_tokens: int | None = None
    """The base scenario's prefill chunk size (None: the serving default), kept by every candidate."""
    prefill_batch_tokens: int | None = None
    """The base scenario's batched-prefill budget, kept by every disaggregated candidate."""
    tally: Tally = field(default_factory=Tally)
    """Counts over every screened candidate, kept or not (:class:`pdplan.search.keep.Tally`)."""
    uncached_rps: dict[Colocated, float] = field(default_factory=dict)
    """The goodput of one colocated instance without a prefix cache (no margins applied), by its deployment (cache
    None), wherever the colocated baseline searched it (a cache variant that caches nothing): the exact search's
    comparison without the cache reads it (:class:`pdplan.search.exact.Comparisons`) rather than solving it again."""

    @property
    def size(self) -> int:
        """Rows of the pool's arrays: the kept screened candidates and the colocated ones."""
        return self.screened.size + len(self.colocated)

    @property
    def candidates(self) -> int:
        """Candidates the search priced: every screened one (kept or not) and the colocated ones."""
        return self.tally.screened + len(self.colocated)

    def feasible_count(self, order: np.ndarray) -> int:
        """Feasible candidates of the search, ``order`` being the ranking of this pool's rows: the screened ones
        tallied over every chunk, and the colocated ones of ``order``."""
        return self.tally.feasible + int((np.asarray(order) >= self.screened.size).sum())

    def most_binding(self, role: str, label: str, rows: np.ndarray) -> str:
        """The most common binding constraint of the candidates of instance type ``label`` in ``role``: tallied over
        every screened candidate for a prefill or decode type, counted over ``rows`` for a colocated one."""
        if role != "colocated":
            return self.tally.most_binding(role, label)
        return Counter(str(b) for b in self.binding[rows]).most_common(1)[0][0]

    def deployment(self, i: int) -> Disaggregated | Colocated:
        """Candidate ``i`` as a deployment (built on demand: only the few that are reported need one)."""
        c = self.screened
        if i >= c.size:
            return self.colocated[i - c.size]
        base, table = self.bases[int(c.prefill[i])], self.tables[int(c.decode[i])]
        return Disaggregated(
            _role(base.hw, int(c.x[i])),
            _role(table.hw, int(c.y[i])),
            link=base.link,
            granularity=base.granularity,
            routing=self.routings[int(c.routing[i])],
            max_num_seqs=table.max_num_seqs,
            chunk_tokens=self.chunk_tokens,
            prefill_max_batch_tokens=self.prefill_batch_tokens,
            cache=base.cache,
            kv_backend=None if base.kv_choice is None else base.kv_choice.backend,
            kv_block_tokens=None if base.kv_choice is None else base.kv_choice.block_tokens,
        )


def _role(hw: RoleHardware, count: int) -> Role:
    return Role(hw.gpu.name, hw.tp, hw.pp, count, hw.dp, hw.ep, hw.expert_gather)


def _price(hw: RoleHardware) -> float:
    return np.nan if hw.gpu.price is None else hw.gpu.price.typical_usd_per_gpu_hour


def _tables(space: Space, res: ResolvedScenario[Any], catalog: Catalog) -> tuple[list[PrefillBase], list[DecodeTable]]:
    lens = res.lengths
    prob = np.asarray(lens.input_marginal(), dtype=np.float64)
    decode_tps = sorted({h.tp for h in space.decode})
    perfs = [prefill_perf(hw, lens.input_tokens) for hw in space.prefill]  # one roofline pass per instance type
    priced: dict[tuple[int, CacheSpec | None], PrefillPerf | None] = {}  # per instance type and screen twin

    def screened(i: int, cache: CacheSpec | None) -> PrefillPerf | None:
        key = (i, screen_twin(cache))
        if key not in priced:
            priced[key] = screened_prefill(res, space.prefill[i], key[1])
        return priced[key]

    kvs = kv_options(space.kv_choices, space.kv_searched, res.engine)  # the data plane as the exact model's
    nics = res.scenario.nics_per_instance
    bases = [
        _with_cache(
            prefill_base(
                cached or perf,
                kv.hardware(hw),
                g,
                catalog.link(link),
                dtp,
                prob,
                res.chunk_tokens,
                nics,
                kv.plane,
                kv.choice,
            ),
            res,
            cache,
        )
        for i, (hw, perf) in enumerate(zip(space.prefill, perfs, strict=True))
        for kv in kvs
        for cache in space.caches
        for cached in (screened(i, cache),)
        for g in space.granularities
        for link in space.links
        for dtp in decode_tps
    ]
    cells = decode_cells(res)
    kept = [
        t
        for hw in space.decode
        for kv_hw in block_variants(hw, kvs)
        for t in decode_tables(kv_hw, space.max_num_seqs, cells, lens.input_tokens.size, res.scenario.slo.tpot)
    ]
    if not kept:
        raise NoFeasiblePlanError(
            "no decode instance type holds the longest request's KV cache", binding_constraint=Binding.DECODE_KV
        )
    return bases, kept


def _with_cache(base: PrefillBase, res: ResolvedScenario[Any], cache: CacheSpec | None) -> PrefillBase:
    """``base`` priced under the cache setting ``cache``, with its lower tiers' cost per GPU and per deployment."""
    setup = cache_setup(res.reuse, cache, res.catalog, res.engine)
    gpn = base.hw.gpu.gpus_per_node
    fixed, one = cache_cost_usd_per_hour(setup, 0.0, gpn), cache_cost_usd_per_hour(setup, 1.0, gpn)
    per_gpu = np.nan if fixed is None or one is None else one - fixed
    return dataclasses.replace(
        base,
        cache=cache,
        cache_usd_per_hour_per_gpu=per_gpu,
        cache_usd_per_hour_fixed=np.nan if fixed is None else fixed,
    )


def _disaggregated_metrics(
    c: Candidates, bases: list[PrefillBase], tables: list[DecodeTable], mean_out: float
) -> Metrics:
    p_gpus = np.array([b.hw.gpus_per_instance for b in bases], dtype=np.float64)[c.prefill]
    d_gpus = np.array([t.hw.gpus_per_instance for t in tables], dtype=np.float64)[c.decode]
    p_cost = np.array([_price(b.hw) + b.cache_usd_per_hour_per_gpu for b in bases])[c.prefill]
    fixed = np.array([b.cache_usd_per_hour_fixed for b in bases])[c.prefill]
    d_cost = np.array([_price(t.hw) for t in tables])[c.decode]
    gpus = c.x * p_gpus + c.y * d_gpus
    cost = c.x * p_gpus * p_cost + c.y * d_gpus * d_cost + fixed
    return Metrics(c.goodput_rps, gpus, cost, c.goodput_rps * mean_out)


def _colocated_pool(
    res: ResolvedScenario[Any],
    space: Space,
    mean_out: float,
    uncached_rps: dict[Colocated, float],
    same: SameHits | None = None,
) -> tuple[list[Colocated], Metrics, np.ndarray, np.ndarray]:
    """z = 1..max_instances replicas of each colocated instance type (per-instance goodput computed exactly; with a
    prefix cache estimated in two builds, :func:`pdplan.search.cache_options.screened_goodput`).

    The baseline runs at the largest batch cap of the search (a cap only limits it through the seat bound).
    ``uncached_rps`` hears the goodput of each setting that caches nothing (:attr:`Pool.uncached_rps`); ``same``
    keeps the goodput searches of the cached models for the exact plans' probes (:mod:`pdplan.serving.same_hits`).
    """
    deps: list[Colocated] = []
    good, gpus, cost, tau, binding = [], [], [], [], []
    zs = np.arange(1, space.max_instances + 1)
    for hw in space.colocated:
        last: float | None = None  # the previous setting's goodput: where the next one's fixed point starts
        for cache in colocated_caches(space.caches):
            one = Colocated(
                _role(hw, 1),
                scheduler=space.colocated_scheduler,
                max_num_seqs=max(space.max_num_seqs),
                chunk_tokens=res.scenario.chunk_tokens,
                cache=cache,
            )
            try:
                bound, model, g1 = screened_goodput(bind(res, one), res.scenario.slo, last, same)
            except NoFeasiblePlanError:
                continue
            last = g1.rate_rps if bound.cache is not None else last
            if bound.cache is None:  # goodput_model's find_goodput as it is: the model without a cache, searched
                uncached_rps[dataclasses.replace(one, cache=None)] = g1.rate_rps
            mean_tpot = float(model.snapshot(np.array([g1.rate_rps * (1 - 1e-6)])).tpot.mean_s[0])
            for z in zs:
                deps.append(dataclasses.replace(one, instance=_role(hw, int(z))))
            serving = zs - 1 if space.redundancy == "n+1" else zs  # one instance down under n+1
            good.append(serving * g1.rate_rps / (1.0 + space.headroom))
            gpus.append(zs * float(hw.gpus_per_instance))
            tiers = cache_cost_usd_per_hour(bound.cache, float(hw.gpus_per_instance), hw.gpu.gpus_per_node)
            cost.append(zs * hw.gpus_per_instance * _price(hw) + zs * (np.nan if tiers is None else tiers))
            tau.append(np.full(zs.size, mean_tpot))
            binding.append(np.full(zs.size, g1.binding, dtype=object))
    if not deps:
        empty = np.zeros(0)
        return [], Metrics(empty, empty, empty, empty), empty, np.zeros(0, dtype=object)
    g = np.concatenate(good)
    return (
        deps,
        Metrics(g, np.concatenate(gpus), np.concatenate(cost), g * mean_out),
        np.concatenate(tau),
        np.concatenate(binding),
    )


def _colocated_parts(
    res: ResolvedScenario[Any], space: Space, same: SameHits | None
) -> tuple[list[Colocated], Metrics, np.ndarray, np.ndarray, dict[Colocated, float]]:
    """:func:`_colocated_pool` with the goodputs it found without a cache (:attr:`Pool.uncached_rps`)."""
    uncached_rps: dict[Colocated, float] = {}
    return (*_colocated_pool(res, space, res.lengths.mean_output(), uncached_rps, same), uncached_rps)


def build_pool(
    res: ResolvedScenario[Any],
    space: Space,
    catalog: Catalog,
    stage: Stage,
    *,
    best: int,
    xpyd: tuple[int, int] | None = None,
    colocated: int | None = None,
    shared: Context | None = None,
    same: SameHits | None = None,
) -> Pool:
    """Screen the space in chunks of at most :data:`SCREEN_CHUNK_CANDIDATES` and keep what the later stages read
    (:mod:`pdplan.search.keep`): ``best`` distinct deployments for exact re-evaluation, ranked under the
    restriction ``xpyd`` / ``colocated`` (the instance counts asked for) that :func:`restricted` then applies.

    ``shared``: the parts of ``res``'s searches that read neither the target rate, the objective nor the dollar
    budget (the tables, the screened tiles, the colocated baseline), computed by an earlier search of the same
    scenario (:mod:`pdplan.search.memo`; None: this search's own). Their keys add what they read of ``space``
    beyond the scenario: the GPU budget bounds the instance types searched, the margins scale the goodputs.
    ``same``: the search's colocated goodput searches, filled in by the screen (:mod:`pdplan.serving.same_hits`;
    a memoised baseline fills nothing, and the exact plans' probes then search for themselves: the same answers)."""
    shared = shared if shared is not None else Context(res)
    stage("pricing instance types")
    bases, tables = shared.get(("tables", space.budget_gpus), lambda: _tables(space, res, catalog))
    keep = Keep(
        space.objective, space.budget_gpus, space.rate_rps, space.budget_usd_per_hour, best, xpyd, colocated is not None
    )
    margins = (space.budget_gpus, space.headroom, space.redundancy)
    rows, tally = _screen(res, space, bases, tables, keep, stage, shared)
    stage("colocated baseline")
    cdeps, cm, ctau, cbind, uncached = shared.get(("colocated", *margins), lambda: _colocated_parts(res, space, same))
    uncached_rps = dict(uncached)
    metrics = Metrics(
        *(
            np.concatenate([getattr(rows.metrics, f), getattr(cm, f)])
            for f in ("goodput_rps", "num_gpus", "cost_usd_per_hour", "output_tokens_per_s")
        )
    )
    return Pool(
        rows.cands,
        bases,
        tables,
        space.routings,
        cdeps,
        metrics,
        np.concatenate([rows.cands.tau_s, ctau]),
        np.concatenate([rows.cands.binding, cbind]),
        res.warnings,
        res.scenario.chunk_tokens,
        res.scenario.prefill_max_batch_tokens,
        tally,
        uncached_rps,
    )


def _screen(
    res: ResolvedScenario[Any],
    space: Space,
    bases: list[PrefillBase],
    tables: list[DecodeTable],
    keep: Keep,
    stage: Stage,
    shared: Context,
) -> tuple[Rows, Tally]:
    """The kept rows of the disaggregated screen and its tally; a space above :data:`MAX_SCREENED_CANDIDATES` is
    refused before it starts (a bound on time), and the progress line counts candidates across chunks. The screened
    tiles read neither the target rate nor the objective: ``shared`` holds them for the next search of the same
    scenario and margins (a small space's only, :meth:`pdplan.search.memo.Context.tiles`)."""
    count = screened_count(bases, tables, len(space.routings), space.max_instances)
    if count > MAX_SCREENED_CANDIDATES:
        raise SpecError(
            f"the search space holds {count:,} disaggregated candidates, above the ceiling of "
            f"{MAX_SCREENED_CANDIDATES:,} (pdplan.specs.ceilings: about an hour of screening); narrow it: fewer "
            "max_instances (the count grows as its square), TP/EP/DP degrees, GPUs or links",
            field="search",
        )
    stage(f"screening {count:,} candidates")
    base, mean_out = res.scenario, res.lengths.mean_output()
    tiles = shared.tiles(
        ("tiles", space.budget_gpus, space.headroom, space.redundancy),
        count,
        lambda: screen_disaggregated(
            bases,
            tables,
            space.routings,
            base.slo,
            base.ttft_convention,
            np.asarray(res.lengths.input_marginal(), dtype=np.float64),
            space.max_instances,
            chunk=SCREEN_CHUNK_CANDIDATES,
            margins=Margins(space.redundancy, space.headroom),
        ),
    )
    return kept_rows(
        tiles,
        lambda c: _disaggregated_metrics(c, bases, tables, mean_out),
        keep,
        Groups.of(bases, tables, space.max_instances),
        SCREEN_CHUNK_CANDIDATES,
        _progress(stage, count),
    )


def _progress(stage: Stage, count: int) -> Callable[[int, float], None]:
    """The progress line of a screen in chunks: candidates screened of ``count`` and the time left at the mean
    rate so far."""

    def note(done: int, seconds: float) -> None:
        left = seconds / max(done, 1) * (count - done)
        stage(f"screened {done:,} of {count:,} candidates, about {left:.0f} s left")

    return note


def _seats(d: Disaggregated | Colocated) -> int:
    if d.max_num_seqs is None:  # every candidate of the pool names its batch cap
        raise TypeError(f"pool candidate without a batch cap: {d}")
    return d.max_num_seqs


def screen_plan(pool: Pool, i: int) -> Plan:
    """A plan from screen values only (exact=False): used for the Pareto front."""
    d = pool.deployment(int(i))
    m = pool.metrics
    cost = float(m.cost_usd_per_hour[i])
    return Plan.of(
        d,
        max_num_seqs=_seats(d),
        num_gpus=int(m.num_gpus[i]),
        goodput_rps=float(m.goodput_rps[i]),
        output_tokens_per_s=float(m.output_tokens_per_s[i]),
        cost_usd_per_hour=None if np.isnan(cost) else cost,
        operating_rate_rps=float(m.goodput_rps[i]),
        binding_constraint=str(pool.binding[i]),
        tpot_mean_s=float(pool.tau_s[i]),
        exact=False,
    )


def infeasible(pool: Pool, space: Space) -> NoFeasiblePlanError:
    """Exit-3 error naming the binding constraint and the closest candidate."""
    m = pool.metrics
    if not m.goodput_rps.size or m.goodput_rps.max() <= 0.0:
        counts = pool.tally.binding + Counter(str(b) for b in pool.binding[pool.screened.size :])
        binding = min(counts, key=lambda w: (-counts[w], w)) if counts else "memory"  # ties: the first in order
        return NoFeasiblePlanError(
            f"no candidate meets the SLO at any rate; most are bound by {binding}", binding_constraint=binding
        )
    if space.rate_rps is not None:
        ok = m.num_gpus <= (space.budget_gpus or np.inf)
        best = int(np.argmax(np.where(ok, m.goodput_rps, -1.0)))
        label = screen_plan(pool, best).label
        return NoFeasiblePlanError(
            f"no candidate reaches {space.rate_rps:g} req/s within {space.max_instances} instances per pool; closest: "
            f"{label} at {m.goodput_rps[best]:.4g} req/s, {(1.0 - m.goodput_rps[best] / space.rate_rps) * 100.0:.1f} % "
            f"short (bound by {pool.binding[best]})",
            binding_constraint=str(pool.binding[best]),
            closest=label,
        )
    if space.budget_gpus is None:
        return NoFeasiblePlanError("no candidate meets the SLO", binding_constraint=Binding.SLO)
    fewest = int(np.argmin(np.where(m.goodput_rps > 0, m.num_gpus, np.inf)))
    label = screen_plan(pool, fewest).label
    return NoFeasiblePlanError(
        f"no candidate fits {space.budget_gpus} GPUs while meeting the SLO; the smallest feasible plan is {label} "
        f"with {int(m.num_gpus[fewest])} GPUs, {int(m.num_gpus[fewest]) - space.budget_gpus} over the budget",
        binding_constraint=Binding.GPU_BUDGET,
        closest=label,
    )


def restricted(pool: Pool, xpyd: tuple[int, int] | None, colocated_count: int | None) -> Pool:
    """The pool with only the asked-for instance counts left rankable (others get zero goodput)."""
    if xpyd is None and colocated_count is None:
        return pool
    c = pool.screened
    if xpyd is not None:
        disagg = (c.x == xpyd[0]) & (c.y == xpyd[1])
        co = np.zeros(len(pool.colocated), dtype=bool)
    else:
        disagg = np.zeros(c.size, dtype=bool)
        co = np.array([d.instance.count == colocated_count for d in pool.colocated], dtype=bool)
    keep = np.concatenate([disagg, co])
    return dataclasses.replace(
        pool, metrics=dataclasses.replace(pool.metrics, goodput_rps=np.where(keep, pool.metrics.goodput_rps, 0.0))
    )
