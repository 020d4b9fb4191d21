"""``optimize``: search xPyD deployments (and the colocated baseline) for the best plan under an SLO.

1. Build the search space (:mod:`pdplan.search.space`) and per-role tables once per instance type
   (:mod:`pdplan.search.tables`).
2. Screen every candidate at once (:mod:`pdplan.search.screen`); the colocated baseline's per-instance goodput is
   exact (random routing splits the rate evenly, so z instances carry z times one instance's goodput).
3. Rank by the objective (:mod:`pdplan.search.select`), re-evaluate the best ones exactly with the serving model
   (:mod:`pdplan.search.exact`), and report the ranked plans, the baseline, the Pareto front, the pick's
   sensitivity and its latency-vs-rate curve.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.io.catalog import Catalog, open_catalog
from pdplan.search.describe import describe_assumptions, describe_inputs
from pdplan.search.exact import Exact, evaluate_exact, rate_curve, sensitivity
from pdplan.search.results import Plan, PlanResult, SearchStats
from pdplan.search.screen import Candidates, screen_disaggregated
from pdplan.search.select import Metrics, pareto_front, rank
from pdplan.search.space import Space, build_space
from pdplan.search.tables import DecodeTable, PrefillBase, decode_tables, prefill_base
from pdplan.serving import (
    Deployment,
    ResolvedScenario,
    Role,
    RoleHardware,
    build,
    decode_cells,
    find_goodput,
    prefill_perf,
    resolve,
)
from pdplan.specs.scenario import Scenario
from pdplan.types import Binding, Routing

Stage = Callable[[str], None]
REFINE_FACTOR = 1
"""Exact re-evaluations tried per plan reported (the screen's order can shift a little once exact)."""


@dataclass(frozen=True)
class Pool:
    """All screened candidates, disaggregated then colocated, as parallel arrays; :meth:`deployment` rebuilds one."""

    screened: Candidates
    bases: list[PrefillBase]
    tables: list[DecodeTable]
    routings: tuple[Routing, ...]
    colocated: list[Deployment]
    metrics: Metrics
    tau_s: np.ndarray
    binding: np.ndarray
    shared_warnings: tuple[str, ...] = ()
    """Warnings of the base scenario (e.g. context-window clipping): every candidate has them; reported once."""
    chunk_tokens: int | None = None
    """The base scenario's prefill chunk size (None: the serving default), kept by every candidate."""
    prefill_batch_tokens: int | None = None
    """The base scenario's batched-prefill budget, kept by every disaggregated candidate."""

    @property
    def size(self) -> int:
        return self.screened.size + len(self.colocated)

    def deployment(self, i: int) -> Deployment:
        """Candidate ``i`` as a deployment (built on demand: only the few that are reported need one)."""
        c = self.screened
        if i >= c.size:
            return self.colocated[i - c.size]
        base, table = self.bases[int(c.prefill[i])], self.tables[int(c.decode[i])]
        return Deployment(
            "disaggregated",
            _role(base.hw, int(c.x[i])),
            _role(table.hw, int(c.y[i])),
            granularity=base.granularity,
            link=base.link,
            routing=self.routings[int(c.routing[i])],
            max_num_seqs=table.max_num_seqs,
            chunk_tokens=self.chunk_tokens,
            prefill_max_batch_tokens=self.prefill_batch_tokens,
        )


def _role(hw: RoleHardware, count: int) -> Role:
    return Role(hw.gpu.name, hw.tp, hw.pp, count)


def _price(hw: RoleHardware) -> float:
    return np.nan if hw.gpu.price is None else hw.gpu.price.typical_usd_per_gpu_hour


def _tables(space: Space, res: ResolvedScenario, catalog: Catalog) -> tuple[list[PrefillBase], list[DecodeTable]]:
    lens = res.lengths
    prob = np.asarray(lens.input_marginal(), dtype=np.float64)
    decode_tps = sorted({h.tp for h in space.decode})
    perfs = [prefill_perf(hw, lens.input_tokens) for hw in space.prefill]  # one roofline pass per instance type
    bases = [
        prefill_base(perf, hw, g, catalog.link(link), dtp, prob, res.chunk_tokens, res.scenario.nics_per_instance)
        for hw, perf in zip(space.prefill, perfs, strict=True)
        for g in space.granularities
        for link in space.links
        for dtp in decode_tps
    ]
    cells = decode_cells(res)
    kept = [
        t
        for hw in space.decode
        for t in decode_tables(hw, space.max_num_seqs, cells, lens.input_tokens.size, res.scenario.slo.tpot)
    ]
    if not kept:
        raise NoFeasiblePlanError(
            "no decode instance type holds the longest request's KV cache", binding_constraint=Binding.DECODE_KV
        )
    return bases, kept


def _disaggregated_metrics(
    c: Candidates, bases: list[PrefillBase], tables: list[DecodeTable], mean_out: float
) -> Metrics:
    p_gpus = np.array([b.hw.tp * b.hw.pp for b in bases], dtype=np.float64)[c.prefill]
    d_gpus = np.array([t.hw.tp * t.hw.pp for t in tables], dtype=np.float64)[c.decode]
    p_cost = np.array([_price(b.hw) for b in bases])[c.prefill]
    d_cost = np.array([_price(t.hw) for t in tables])[c.decode]
    gpus = c.x * p_gpus + c.y * d_gpus
    cost = c.x * p_gpus * p_cost + c.y * d_gpus * d_cost
    return Metrics(c.goodput_rps, gpus, cost, c.goodput_rps * mean_out)


def _colocated_pool(
    res: ResolvedScenario, space: Space, mean_out: float
) -> tuple[list[Deployment], Metrics, np.ndarray, np.ndarray]:
    """z = 1..max_instances replicas of each colocated instance type (per-instance goodput computed exactly).

    The baseline runs at the largest batch cap of the search (a cap only limits it through the seat bound).
    """
    deps: list[Deployment] = []
    good, gpus, cost, tau, binding = [], [], [], [], []
    zs = np.arange(1, space.max_instances + 1)
    for hw in space.colocated:
        for seqs in (max(space.max_num_seqs),):
            chunk = res.scenario.chunk_tokens
            one = Deployment(
                "colocated",
                colocated=_role(hw, 1),
                scheduler=space.colocated_scheduler,
                max_num_seqs=seqs,
                chunk_tokens=chunk,
            )
            try:
                model = build(res, one)
                g1 = find_goodput(model, res.scenario.slo)
            except NoFeasiblePlanError:
                continue
            mean_tpot = float(model.snapshot(np.array([g1.rate_rps * (1 - 1e-6)])).tpot.mean_s[0])
            for z in zs:
                deps.append(dataclasses.replace(one, colocated=_role(hw, int(z))))
            good.append(zs * g1.rate_rps)
            gpus.append(zs * float(hw.tp * hw.pp))
            cost.append(zs * hw.tp * hw.pp * _price(hw))
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


def _pool(res: ResolvedScenario, space: Space, catalog: Catalog, stage: Stage) -> Pool:
    stage("pricing instance types")
    bases, tables = _tables(space, res, catalog)
    stage("screening candidates")
    prob = np.asarray(res.lengths.input_marginal(), dtype=np.float64)
    base = res.scenario
    cands = screen_disaggregated(
        bases, tables, space.routings, base.slo, base.ttft_convention, prob, space.max_instances
    )
    mean_out = res.lengths.mean_output()
    m = _disaggregated_metrics(cands, bases, tables, mean_out)
    stage("colocated baseline")
    cdeps, cm, ctau, cbind = _colocated_pool(res, space, mean_out)
    metrics = Metrics(
        *(
            np.concatenate([getattr(m, f), getattr(cm, f)])
            for f in ("goodput_rps", "num_gpus", "cost_usd_per_hour", "output_tokens_per_s")
        )
    )
    return Pool(
        cands,
        bases,
        tables,
        space.routings,
        cdeps,
        metrics,
        np.concatenate([cands.tau_s, ctau]),
        np.concatenate([cands.binding, cbind]),
        res.warnings,
        base.chunk_tokens,
        base.prefill_max_batch_tokens,
    )


def _question(sc: Scenario, res: ResolvedScenario, space: Space) -> str:
    slo = sc.slo
    target = (
        f"serve {space.rate_rps:g} req/s at the fewest {'dollars' if space.objective == 'cost' else 'GPUs'}"
        if space.rate_rps is not None
        else f"maximise {'goodput per $/h' if space.objective == 'cost' else 'goodput per GPU'}"
        + (f" within {space.budget_gpus} GPUs" if space.budget_gpus is not None else "")
    )
    gpus = sorted({h.gpu.name for h in (*space.prefill, *space.decode)})
    return (
        f"How should {res.model.name} be deployed on {', '.join(gpus)} for the {sc.workload.name or 'given'} "
        f"workload so that {slo.attainment:.0%} of requests meet P{slo.percentile:g} TTFT <= {slo.ttft:g} s and "
        f"TPOT <= {slo.tpot * 1e3:g} ms — to {target}?"
    )


def _seats(d: Deployment) -> int:
    assert d.max_num_seqs is not None  # every candidate of the pool names its batch cap
    return d.max_num_seqs


def _screen_plan(pool: Pool, i: int) -> Plan:
    """A plan from screen values only (exact=False): used for the Pareto front."""
    d = pool.deployment(int(i))
    m = pool.metrics
    cost = float(m.cost_usd_per_hour[i])
    tau = float(pool.tau_s[i])
    return Plan(
        mode=d.mode,
        prefill=d.prefill,
        decode=d.decode,
        colocated=d.colocated,
        granularity=d.granularity,
        link=d.link,
        routing=d.routing,
        scheduler=d.scheduler,
        max_num_seqs=_seats(d),
        num_gpus=int(m.num_gpus[i]),
        goodput_rps=float(m.goodput_rps[i]),
        output_tokens_per_s=float(m.output_tokens_per_s[i]),
        cost_usd_per_hour=None if np.isnan(cost) else cost,
        operating_rate_rps=float(m.goodput_rps[i]),
        ttft_s=None,
        tpot_s=None,
        attainment=None,
        utilisation={},
        memory_headroom={},
        binding_constraint=str(pool.binding[i]),
        tokens_per_s_per_user=1.0 / tau if tau > 0 else 0.0,
        exact=False,
    )


def _refine(
    base: ResolvedScenario,
    pool: Pool,
    order: np.ndarray,
    space: Space,
    top: int,
    mode: str | None = None,
    failures: list[NoFeasiblePlanError] | None = None,
) -> list[Exact]:
    """Exact plans for the best-ranked candidates (of one mode if given), best first by the same objective."""
    seen: set[tuple[object, ...]] = set()
    picked: list[int] = []
    for i in order:  # distinct deployments only: variants differing only in transfer options rank together
        d = pool.deployment(int(i))
        # colocated replicas scale exactly (z instances = z x one), so one count per instance type is enough
        co = None if d.colocated is None else (d.colocated.gpu, d.colocated.tp, d.colocated.pp)
        key = (d.mode, d.prefill, d.decode, co)
        if (mode is None or d.mode == mode) and key not in seen:
            seen.add(key)
            picked.append(int(i))
        if len(picked) >= top * REFINE_FACTOR:
            break
    exact = [
        evaluate_exact(
            base,
            pool.deployment(int(i)),
            target_rps=space.rate_rps,
            failures=failures,
            shared_warnings=pool.shared_warnings,
        )
        for i in picked
    ]
    kept = [e for e in exact if e is not None and (space.budget_gpus is None or e.plan.num_gpus <= space.budget_gpus)]
    if not kept:
        return []
    m = Metrics(
        *(
            np.array([getattr(e.plan, f) or np.nan for e in kept], dtype=np.float64)
            for f in ("goodput_rps", "num_gpus", "cost_usd_per_hour", "output_tokens_per_s")
        )
    )
    again = rank(m, objective=space.objective, budget_gpus=space.budget_gpus, rate_rps=space.rate_rps)
    return [kept[i] for i in again][:top]


def _infeasible(pool: Pool, space: Space) -> NoFeasiblePlanError:
    """Exit-3 error naming the binding constraint and the closest candidate."""
    m = pool.metrics
    if not m.goodput_rps.size or m.goodput_rps.max() <= 0.0:
        words, counts = np.unique(pool.binding.astype(str), return_counts=True)
        binding = str(words[counts.argmax()]) if words.size else "memory"
        return NoFeasiblePlanError(
            f"no candidate meets the SLO at any rate; most are bound by {binding}", binding_constraint=binding
        )
    if space.rate_rps is not None:
        ok = m.num_gpus <= (space.budget_gpus or np.inf)
        best = int(np.argmax(np.where(ok, m.goodput_rps, -1.0)))
        label = _screen_plan(pool, best).label
        return NoFeasiblePlanError(
            f"no candidate reaches {space.rate_rps:g} req/s within {space.max_instances} instances per pool; closest: "
            f"{label} at {m.goodput_rps[best]:.4g} req/s (bound by {pool.binding[best]})",
            binding_constraint=str(pool.binding[best]),
            closest=label,
        )
    if space.budget_gpus is None:
        return NoFeasiblePlanError("no candidate meets the SLO", binding_constraint=Binding.SLO)
    fewest = int(np.argmin(np.where(m.goodput_rps > 0, m.num_gpus, np.inf)))
    label = _screen_plan(pool, fewest).label
    return NoFeasiblePlanError(
        f"no candidate fits {space.budget_gpus} GPUs while meeting the SLO; the smallest feasible plan is {label} "
        f"with {int(m.num_gpus[fewest])} GPUs",
        binding_constraint=Binding.GPU_BUDGET,
        closest=label,
    )


def _restricted(pool: Pool, xpyd: tuple[int, int] | None, colocated_count: int | None) -> Pool:
    """The pool with only the asked-for instance counts left rankable (others get zero goodput)."""
    if xpyd is None and colocated_count is None:
        return pool
    c = pool.screened
    if xpyd is not None:
        disagg = (c.x == xpyd[0]) & (c.y == xpyd[1])
        co = np.zeros(len(pool.colocated), dtype=bool)
    else:
        disagg = np.zeros(c.size, dtype=bool)
        co = np.array(
            [d.colocated is not None and d.colocated.count == colocated_count for d in pool.colocated], dtype=bool
        )
    keep = np.concatenate([disagg, co])
    return dataclasses.replace(
        pool, metrics=dataclasses.replace(pool.metrics, goodput_rps=np.where(keep, pool.metrics.goodput_rps, 0.0))
    )


def optimize(
    scenario: Scenario,
    *,
    catalog: Catalog | None = None,
    budget_gpus: int | None = None,
    rate_rps: float | None = None,
    objective: str | None = None,
    top: int = 5,
    stage: Stage | None = None,
    analyse: bool = True,
    xpyd: tuple[int, int] | None = None,
    colocated_count: int | None = None,
) -> PlanResult:
    """Search deployments for ``scenario`` (its ``search:`` block and the arguments) and rank them.

    ``budget_gpus`` (maximise goodput per GPU within it) or ``rate_rps`` (meet it at the fewest GPUs / lowest
    cost); ``xpyd`` fixes the instance counts of the plans (``colocated_count`` ranks only that many colocated
    instances); ``analyse`` adds the pick's sensitivity and latency-vs-rate curve (the capacity-review extras).
    The colocated baseline is always chosen from the whole colocated search.
    """
    started = time.perf_counter()
    note = stage or (lambda _: None)
    catalog = catalog or open_catalog()
    if scenario.mode != "disaggregated" and scenario.colocated is None:
        raise SpecError("optimize needs a scenario with a deployment", field="mode")
    space = build_space(scenario, catalog, budget_gpus=budget_gpus, rate_rps=rate_rps, objective=objective)
    res = resolve(scenario, catalog)
    full = _pool(res, space, catalog, note)
    pool = _restricted(full, xpyd, colocated_count)
    order = rank(pool.metrics, objective=space.objective, budget_gpus=space.budget_gpus, rate_rps=space.rate_rps)
    if order.size == 0:
        raise _infeasible(pool, space)
    note("exact re-evaluation")
    failures: list[NoFeasiblePlanError] = []
    best = _refine(res, pool, order, space, top, failures=failures)
    if not best:
        reason = failures[0] if failures else _infeasible(pool, space)
        raise NoFeasiblePlanError(
            f"the best screened candidates fail when evaluated exactly: {reason}",
            binding_constraint=reason.binding_constraint,
        )
    if all(e.plan.mode == "colocated" for e in best):  # always show the best disaggregated plan beside the baseline
        best += _refine(res, pool, order, space, 1, mode="disaggregated")
    full_order = rank(full.metrics, objective=space.objective, budget_gpus=space.budget_gpus, rate_rps=space.rate_rps)
    baseline = _refine(res, full, full_order, space, 1, mode="colocated")
    feasible = order
    per_gpu = pool.metrics.goodput_rps[feasible] / pool.metrics.num_gpus[feasible]
    front = feasible[pareto_front(per_gpu, 1.0 / np.maximum(pool.tau_s[feasible], 1e-12))]
    note("sensitivity")
    pick = best[0]
    return PlanResult(
        question=_question(scenario, res, space),
        objective=_objective_words(space),
        plans=tuple(e.plan for e in best),
        baseline=baseline[0].plan if baseline else None,
        pareto=_pareto_plans(pool, front, [*best, *baseline]),
        search=SearchStats(
            candidates=pool.size,
            feasible=int(order.size),
            seconds=time.perf_counter() - started,
            refined=len(best) + len(baseline),
        ),
        inputs=describe_inputs(scenario, res, space, catalog),
        assumptions=describe_assumptions(space, catalog),
        sensitivity=sensitivity(pick, target_rps=space.rate_rps) if analyse else (),
        warnings=_warnings(res, space, best[0].plan),
        rate_curve=rate_curve(pick) if analyse else (),
    )


def _pareto_plans(pool: Pool, front: np.ndarray, exact: list[Exact]) -> tuple[Plan, ...]:
    """Pareto-front plans; any that was re-evaluated exactly is shown with its exact numbers."""
    by_label = {e.plan.label: e.plan for e in exact}
    screened = [_screen_plan(pool, int(i)) for i in front]
    return tuple(by_label.get(p.label, p) for p in screened)


def _objective_words(space: Space) -> str:
    if space.rate_rps is not None:
        return f"meet {space.rate_rps:g} req/s at the {'lowest cost' if space.objective == 'cost' else 'fewest GPUs'}"
    what = {"cost": "goodput per $/h", "tokens-per-dollar": "output tokens/s per $/h"}.get(
        space.objective, "goodput per GPU"
    )
    return f"maximise {what}" + (f" within {space.budget_gpus} GPUs" if space.budget_gpus is not None else "")


def _warnings(res: ResolvedScenario, space: Space, pick: Plan) -> tuple[str, ...]:
    out = list(res.warnings) + list(space.notes)
    # uncalibrated kernel tables and missing prices are reported from ``inputs`` by every renderer
    if res.prefill_batch_tokens is not None:
        out.append(
            f"prefill batching (prefill_max_batch_tokens {res.prefill_batch_tokens}): the screen ranks "
            "candidates with one prompt at a time per prefill instance (a lower bound on batched capacity); "
            "the reported plans are evaluated exactly with batching, but a plan with fewer prefill "
            "instances may have been screened out"
        )
    if any(h.table.framework.decode_step_overhead_s == 0.0 for h in (*space.prefill, *space.decode)):
        out.append(
            "kernel tables carry no per-step framework overhead (0 s): calibrate with `pdplan calibrate` "
            "on your stack's step times for end-to-end accuracy"
        )
    return tuple(dict.fromkeys(out))
