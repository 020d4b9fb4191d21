"""``optimize``: search xPyD deployments (and the colocated baseline) for the best plan under an SLO.

1. Build the search space (:mod:`pdplan.search.space`) and per-role tables once per instance type
   (:mod:`pdplan.search.tables`).
2. Screen every candidate in bounded chunks (:mod:`pdplan.search.screen`) into a pool of metrics, keeping the rows
   the later stages read (:mod:`pdplan.search.keep`, :mod:`pdplan.search.pool`);
   the colocated baseline's per-instance goodput is exact (random routing splits the rate evenly, so z instances
   carry z times one instance's goodput).
3. Rank by the objective (:mod:`pdplan.search.select`), re-evaluate the best ones exactly with the serving model
   (:mod:`pdplan.search.exact`), and report the ranked plans, the baseline, the Pareto front, the pick's
   sensitivity and its latency-vs-rate curve.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.evaluation.error_band import of_resolved
from pdplan.io.catalog import Catalog, open_catalog
from pdplan.search.closest import with_closest
from pdplan.search.describe import describe_assumptions, describe_inputs
from pdplan.search.exact import Comparisons, Exact, evaluate_exact, sensitivity, with_cache_report
from pdplan.search.kv_gain import kv_gain_notes
from pdplan.search.law_rows import rate_curve
from pdplan.search.memo import Context, Recent, context
from pdplan.search.planning import (
    comparable_baseline,
    plan_metrics,
    planning_inputs,
    price_sensitivity,
    unpriced_infeasible,
    unpriced_warnings,
    why_not,
)
from pdplan.search.plans import Plan, PlanResult, SearchStats
from pdplan.search.pool import Pool, Stage, build_pool, infeasible, restricted, screen_plan
from pdplan.search.select import Metrics, pareto_front, rank
from pdplan.search.space import Space, build_space
from pdplan.serving import Colocated, ResolvedScenario, resolve
from pdplan.serving.build import PpdProbes
from pdplan.serving.checks.decode_law import law_warnings
from pdplan.specs.arguments import check_count, check_positive, check_scenario
from pdplan.specs.ceilings import MAX_INSTANCES_PER_ROLE, MAX_PARALLEL_DEGREE
from pdplan.specs.scenario import Scenario

REFINE_FACTOR = 1
"""Exact re-evaluations tried per plan reported (the screen's order can shift a little once exact)."""
MAX_TRIES_PER_PLAN = 4
"""Candidates evaluated exactly at most, per plan asked for, when screened ones fail once exact."""


def _question(sc: Scenario, res: ResolvedScenario[Any], space: Space) -> str:
    slo = sc.slo
    target = _objective_words(space)  # the same words as the result's objective line
    gpus = sorted({h.gpu.name for h in (*space.prefill, *space.decode)})
    return (
        f"How should {res.model.name} be deployed on {', '.join(gpus)} for the {sc.workload.name or 'given'} "
        f"workload so that {slo.attainment:.0%} of requests meet P{slo.percentile:g} TTFT <= {slo.ttft:g} s and "
        f"TPOT <= {slo.tpot * 1e3:g} ms — to {target}?"
    )


def _distinct(pool: Pool, order: np.ndarray, mode: str | None) -> Iterator[int]:
    """Candidates in rank order, one per distinct deployment (of one mode if given): variants differing only in
    transfer options rank together, and colocated replicas scale exactly (z instances = z × one), so one count per
    colocated instance type is enough."""
    seen: set[tuple[object, ...]] = set()
    for i in order:
        d = pool.deployment(int(i))
        key: tuple[object, ...]
        if isinstance(d, Colocated):
            key = (d.mode, d.instance.gpu, d.instance.tp, d.instance.pp, d.instance.ep, d.cache)
        else:
            key = (d.mode, d.prefill, d.decode, d.cache)
        if (mode is None or d.mode == mode) and key not in seen:
            seen.add(key)
            yield int(i)


def _refine(
    base: ResolvedScenario[Any],
    pool: Pool,
    order: np.ndarray,
    space: Space,
    top: int,
    mode: str | None = None,
    failures: list[NoFeasiblePlanError] | None = None,
    done: dict[tuple[object, float], Exact] | None = None,
    stage: Stage | None = None,
    probes: PpdProbes | None = None,
    known: dict[Hashable, Any] | None = None,
) -> list[Exact]:
    """Exact plans for the best-ranked candidates (of one mode if given), best first by the same objective.

    Candidates are evaluated in screen order until ``top`` pass exactly (a candidate the screen passes may miss
    the SLO or the target rate once exact), trying at most ``MAX_TRIES_PER_PLAN`` per plan asked for. ``done``:
    the plans this search has already evaluated, by deployment and start rate (the colocated baseline is often one
    of the plans ranked best; filled in here). ``stage`` hears each exact evaluation's number, the most there can be
    and the time left at the mean so far (the progress line). ``probes``: the search's PPD goodput searches, shared
    by plans whose model is ``ppd``'s (:class:`pdplan.serving.build.PpdProbes`: a ``score`` plan placing every append
    repeats its ``ppd`` twin's); ``known``: the goodputs found on deployments without a cache by earlier searches of the
    same scenario (:func:`pdplan.search.exact.evaluate_exact`, :mod:`pdplan.search.memo`)."""
    kept: list[Exact] = []
    most, started = top * MAX_TRIES_PER_PLAN, time.perf_counter()
    for tried, i in enumerate(_distinct(pool, order, mode)):
        if len(kept) >= top * REFINE_FACTOR or tried >= most:
            break
        if stage is not None:
            left = f", at most {(time.perf_counter() - started) / tried * (most - tried):.0f} s left" if tried else ""
            stage(f"exact evaluation {tried + 1} of at most {most}{left}")
        d, start_rps = pool.deployment(i), float(pool.metrics.goodput_rps[i]) * (1.0 + space.headroom)
        e = (done or {}).get((d, start_rps)) or evaluate_exact(
            base,
            d,
            target_rps=space.rate_rps,
            failures=failures,
            shared_warnings=pool.shared_warnings,
            headroom=space.headroom,
            redundancy=space.redundancy,
            start_rps=start_rps,
            probes=probes,
            known=known,
        )
        if e is not None and done is not None:
            done[(d, start_rps)] = e
        if e is not None and (space.budget_gpus is None or e.plan.num_gpus <= space.budget_gpus):
            kept.append(e)
    if not kept:
        return []
    again = _rank(plan_metrics([e.plan for e in kept]), space)
    return [kept[i] for i in again][:top]


def _rank(m: Metrics, space: Space) -> np.ndarray:
    return rank(
        m,
        objective=space.objective,
        budget_gpus=space.budget_gpus,
        rate_rps=space.rate_rps,
        budget_usd_per_hour=space.budget_usd_per_hour,
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
    headroom: float | None = None,
    redundancy: str | None = None,
    prices: dict[str, float] | None = None,
    budget_usd_per_hour: float | None = None,
) -> PlanResult:
    """Search deployments for ``scenario`` (its ``search:`` block and the arguments) and rank them.

    ``budget_gpus`` (maximise goodput per GPU within it) or ``rate_rps`` (meet it at the fewest GPUs / lowest
    cost); ``xpyd`` fixes the instance counts of the plans (``colocated_count`` ranks only that many colocated
    instances); ``analyse`` adds the pick's sensitivity and latency-vs-rate curve (the capacity-review extras).
    The colocated baseline is chosen from the whole colocated search, at the size comparable to the pick (the
    ``colocated_count`` asked for, else the most instances within the pick's GPU count).

    Planning margins (each None: the ``search:`` block's, then ``pdplan/data/planning_defaults.yaml``):
    ``headroom`` H reports a plan's goodput as its SLO-meeting rate / (1 + H), so the SLO holds at (1+H)x the
    operating rate; ``redundancy="n+1"`` finds goodput with one instance of each pool down; ``prices`` (GPU name →
    USD per GPU-hour) replace the catalogue's; ``budget_usd_per_hour`` keeps plans costing at most that.
    """
    started = time.perf_counter()
    _check_arguments(scenario, budget_gpus, rate_rps, top, headroom, budget_usd_per_hour)
    catalog = (catalog or open_catalog()).with_prices(prices or (scenario.search.prices if scenario.search else None))
    if scenario.mode != "disaggregated" and scenario.colocated is None:
        raise SpecError("optimize needs a scenario with a deployment", field="mode")
    space = build_space(
        scenario,
        catalog,
        budget_gpus=budget_gpus,
        rate_rps=rate_rps,
        objective=objective,
        headroom=headroom,
        redundancy=redundancy,
        budget_usd_per_hour=budget_usd_per_hour,
    )
    shared = context(scenario, catalog, lambda: resolve(scenario, catalog))  # one resolve per scenario and process
    note = stage or (lambda _: None)
    return _search(
        shared, space, catalog, note, top=top, analyse=analyse, xpyd=xpyd, colocated=colocated_count, t0=started
    )


def _search(
    shared: Context,
    space: Space,
    catalog: Catalog,
    note: Stage,
    *,
    top: int,
    analyse: bool,
    xpyd: tuple[int, int] | None,
    colocated: int | None,
    t0: float,
) -> PlanResult:
    """:func:`optimize` once the space is built: the PrfaaS search, or screen the pool, re-evaluate its best
    exactly, and pick the comparable colocated baseline (``colocated``: the colocated instance count asked for);
    ``shared``: the parts earlier searches of the same scenario computed (:mod:`pdplan.search.memo`)."""
    res = shared.res
    if res.scenario.prfaas is not None:  # a remote prefill cluster: its own search (pdplan.search.prfaas)
        from pdplan.search.prfaas import optimize_prfaas

        if colocated is not None:
            raise SpecError("a prfaas: block searches disaggregated deployments; drop --colocated", field="prfaas")
        return optimize_prfaas(res, space, catalog, top=top, analyse=analyse, xpyd=xpyd, started=t0)
    probes = PpdProbes()  # goodput searches the plans share: the screen's colocated ones, PPD twins'
    full = build_pool(
        res,
        space,
        catalog,
        note,
        best=top * MAX_TRIES_PER_PLAN,
        xpyd=xpyd,
        colocated=colocated,
        shared=shared,
        same=probes.same,
    )
    pool = restricted(full, xpyd, colocated)
    order = _rank(pool.metrics, space)
    if order.size == 0:
        raise unpriced_infeasible(pool, space) or with_closest(infeasible(pool, space), res, pool)
    note("exact re-evaluation")
    done: dict[tuple[object, float], Exact] = {}
    known = shared.get(("exact goodput",), Recent)
    best = _best_exact(res, pool, order, space, top, done, stage=note, probes=probes, known=known)
    full_order = comparable_baseline(full, _rank(full.metrics, space), best[0].plan, space, colocated)
    baseline = _refine(res, full, full_order, space, 1, mode="colocated", done=done, probes=probes, known=known)
    note("sensitivity")
    return _result(res, space, catalog, pool, order, best, baseline, t0, analyse)


def _check_arguments(
    scenario: Scenario,
    budget_gpus: int | None,
    rate_rps: float | None,
    top: int,
    headroom: float | None,
    budget_usd_per_hour: float | None,
) -> None:
    """The library's own arguments, as the command line checks its flags (:mod:`pdplan.specs.arguments`)."""
    check_scenario(scenario)
    check_count(budget_gpus, "budget_gpus", ceiling=MAX_INSTANCES_PER_ROLE * MAX_PARALLEL_DEGREE)
    check_positive(rate_rps, "rate_rps")
    check_count(top, "top", ceiling=1_000)
    check_positive(budget_usd_per_hour, "budget_usd_per_hour")
    if headroom is not None and not (isinstance(headroom, int | float) and 0 <= headroom < 10):
        raise SpecError(f"must be a number from 0 to 10 (a planning margin), got {headroom!r}", field="headroom")


def _best_exact(
    res: ResolvedScenario[Any],
    pool: Pool,
    order: np.ndarray,
    space: Space,
    top: int,
    done: dict[tuple[object, float], Exact] | None = None,
    stage: Stage | None = None,
    probes: PpdProbes | None = None,
    known: dict[Hashable, Any] | None = None,
) -> list[Exact]:
    """The ``top`` screened candidates that hold when evaluated exactly, plus the best disaggregated plan when
    they are all colocated (always shown beside the baseline); none holding raises, naming the first failure."""
    failures: list[NoFeasiblePlanError] = []
    best = _refine(res, pool, order, space, top, failures=failures, done=done, stage=stage, probes=probes, known=known)
    if not best:
        reason = failures[0] if failures else infeasible(pool, space)
        raise NoFeasiblePlanError(
            f"the best screened candidates fail when evaluated exactly: {reason}",
            binding_constraint=reason.binding_constraint,
        )
    if all(e.plan.mode == "colocated" for e in best):  # always show the best disaggregated plan beside the baseline
        best += _refine(res, pool, order, space, 1, mode="disaggregated", done=done, probes=probes, known=known)
    return best


def _result(
    res: ResolvedScenario[Any],
    space: Space,
    catalog: Catalog,
    pool: Pool,
    order: np.ndarray,
    best: list[Exact],
    baseline: list[Exact],
    started: float,
    analyse: bool,
) -> PlanResult:
    """The ranked plans with the baseline, the Pareto front, the pick's sensitivity and rate curve."""
    per_gpu = pool.metrics.goodput_rps[order] / pool.metrics.num_gpus[order]
    front = order[pareto_front(per_gpu, 1.0 / np.maximum(pool.tau_s[order], 1e-12))]
    # each report's comparison solved once for the whole search, the colocated baseline's without a cache not again
    known = Comparisons.of([*best, *baseline], pool.uncached_rps)
    best = [_with_expected_error(with_cache_report(e, known)) for e in best]
    baseline = [_with_expected_error(with_cache_report(e, known)) for e in baseline]
    pick = best[0]
    return PlanResult(
        question=_question(res.scenario, res, space),
        objective=_objective_words(space),
        plans=tuple(e.plan for e in best),
        baseline=baseline[0].plan if baseline else None,
        pareto=_pareto_plans(pool, front, [*best, *baseline]),
        search=SearchStats(
            candidates=pool.candidates,
            feasible=pool.feasible_count(order),
            seconds=time.perf_counter() - started,
            refined=len(best) + len(baseline),
        ),
        inputs=describe_inputs(res, space, catalog, planning_inputs(space)),
        assumptions=describe_assumptions(space, catalog, res),
        sensitivity=sensitivity(pick, target_rps=space.rate_rps) if analyse else (),
        warnings=_warnings(res, space, pick.plan)
        + law_warnings(pick.res, pick.model)
        + unpriced_warnings(space)
        + kv_gain_notes(res, space, pick),
        rate_curve=rate_curve(pick) if analyse else (),
        slo_percentile=res.scenario.slo.percentile,
        price_sensitivity=price_sensitivity([e.plan for e in best], space, catalog) if analyse else (),
        objective_key=space.objective,
        rate_target_rps=space.rate_rps,
        rejected=why_not(pool, space, order, pick.plan, tuple(e.plan for e in (*best, *baseline))),
    )


def _with_expected_error(e: Exact) -> Exact:
    """``e`` with its plan's expected error (:func:`pdplan.evaluation.error_band.of_resolved` of its deployment)."""
    return dataclasses.replace(e, plan=dataclasses.replace(e.plan, expected_error=of_resolved(e.res)))


def _pareto_plans(pool: Pool, front: np.ndarray, exact: list[Exact]) -> tuple[Plan, ...]:
    """The Pareto front of goodput per GPU against tokens/s per user over the final numbers: the screen's front
    and every exactly evaluated plan, each exact plan with its exact numbers, dominance decided after the swap
    (a plan the exact numbers dominate leaves the front; an exact plan no other dominates joins it)."""
    by_label = {e.plan.label: e.plan for e in exact}
    shown = {p.label: by_label.get(p.label, p) for p in (screen_plan(pool, int(i)) for i in front)}
    shown.update(by_label)
    plans = list(shown.values())
    per_gpu = np.array([p.goodput_rps_per_gpu for p in plans])
    per_user = np.array([p.tokens_per_s_per_user for p in plans])
    return tuple(plans[int(i)] for i in pareto_front(per_gpu, per_user, limit=len(plans)))


def _objective_words(space: Space) -> str:
    words = _target_words(space)
    if space.budget_usd_per_hour is not None:
        words += f"{' and' if space.budget_gpus is not None else ' within'} ${space.budget_usd_per_hour:g}/h"
    return words


def _target_words(space: Space) -> str:
    if space.rate_rps is not None:
        if space.objective == "tokens-per-dollar":
            return f"meet {space.rate_rps:g} req/s at the lowest cost (the most output tokens per dollar at that rate)"
        return f"meet {space.rate_rps:g} req/s at the {'lowest cost' if space.objective == 'cost' else 'fewest GPUs'}"
    what = {"cost": "goodput per $/h", "tokens-per-dollar": "output tokens/s per $/h"}.get(
        space.objective, "goodput per GPU"
    )
    return f"maximise {what}" + (f" within {space.budget_gpus} GPUs" if space.budget_gpus is not None else "")


def _warnings(res: ResolvedScenario[Any], space: Space, pick: Plan) -> tuple[str, ...]:
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
