"""One point of a sweep through the library: the base scenario with the point's overrides, ``optimize`` or
``evaluate``, and the result as table rows (one per plan rank; docs/sweep.md §3 lists the columns).

A point that fails is a row too: ``status`` is ``infeasible`` (no plan meets the SLO: the binding constraint's line)
or ``error`` (bad input for this point, or a bug, with its one line), and the sweep goes on.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.io.engines import DEFAULT_ENGINE
from pdplan.specs.command_line import ScenarioOverrides
from pdplan.specs.sweep import SweepPoint

if TYPE_CHECKING:
    from pdplan.evaluation.record import Evaluation
    from pdplan.io.catalog import Catalog
    from pdplan.search.plans import Plan
    from pdplan.sweep.job import SweepJob

Row = dict[str, Any]

INPUT_COLUMNS = (
    "point",
    "point_id",
    "sweep_id",
    "command",
    "model",
    "gpus",
    "workload",
    "engine",
    "slo_tier",
    "ttft_slo_s",
    "tpot_slo_s",
    "slo_percentile",
    "slo_attainment",
    "rate_rps",
    "budget_gpus",
    "objective",
)
"""The point's inputs, the base scenario's value where the point keeps it."""

RESULT_COLUMNS = (
    "status",
    "error",
    "rank",
    "rows_in_point",
    "plan",
    "mode",
    "num_gpus",
    "prefill_gpu",
    "prefill_tp",
    "prefill_count",
    "decode_gpu",
    "decode_tp",
    "decode_count",
    "colocated_gpu",
    "colocated_tp",
    "colocated_count",
    "granularity",
    "goodput_rps",
    "goodput_rps_per_gpu",
    "ttft_p90_s",
    "tpot_p90_s",
    "attainment",
    "cost_usd_per_hour",
    "binding_constraint",
)
"""What the point found: one row per plan rank (``rows_in_point`` of them), or one row with the error."""

COLUMNS = INPUT_COLUMNS + RESULT_COLUMNS


def run_point(job: SweepJob, catalog: Catalog, index: int, point: SweepPoint) -> list[Row]:
    """The rows of point ``index``: one per plan (``optimize``, ranked) or one (``evaluate``), else one error row."""
    inputs = input_values(job, index, point)
    try:
        results = _optimize(job, catalog, point) if job.command == "optimize" else _evaluate(job, catalog, point)
    except NoFeasiblePlanError as err:
        results = [{"status": "infeasible", "error": str(err), "binding_constraint": err.binding_constraint}]
    except SpecError as err:
        results = [{"status": "error", "error": str(err)}]
    except Exception as err:  # a bug in one point is recorded, the sweep goes on (docs/sweep.md §4)
        results = [{"status": "error", "error": f"bug: {type(err).__name__}: {' '.join(str(err).split())}"}]
    rows = []
    for rank, result in enumerate(results, start=1):
        row = {**inputs, **dict.fromkeys(RESULT_COLUMNS), **result}
        row["rows_in_point"] = len(results)
        if row["status"] == "ok":
            row["rank"] = rank
        rows.append({key: _finite(row[key]) for key in COLUMNS})
    return rows


def input_values(job: SweepJob, index: int, point: SweepPoint) -> Row:
    """The input columns of a point: its own values, else the base scenario's."""
    base = job.base
    tier = job.tiers[point.slo] if point.slo is not None else None
    ttft_s, tpot_s = tier.seconds() if tier is not None else (base.slo.ttft, base.slo.tpot)
    percentile = tier.percentile if tier is not None and tier.percentile is not None else base.slo.percentile
    attainment = tier.attainment if tier is not None and tier.attainment is not None else base.slo.attainment
    budget = point.gpus if point.gpus is not None or point.rate is not None else _base_budget(job)
    return {
        "point": index,
        "point_id": point.point_id(),
        "sweep_id": job.sweep_id,
        "command": job.command,
        "model": point.model or base.model,
        "gpus": "+".join(point.gpu or _base_gpus(job)),
        "workload": point.workload or base.workload.name,
        "engine": point.engine or base.engine or DEFAULT_ENGINE,
        "slo_tier": point.slo,
        "ttft_slo_s": ttft_s,
        "tpot_slo_s": tpot_s,
        "slo_percentile": percentile,
        "slo_attainment": attainment,
        "rate_rps": point.rate,
        "budget_gpus": budget,
        "objective": job.objective or _base_objective(job),
    }


def _base_gpus(job: SweepJob) -> tuple[str, ...]:
    """The GPU types the base scenario searches (``optimize``) or deploys (``evaluate``), each once, in order."""
    base = job.base
    names = [role.gpu for role in (base.prefill, base.decode, base.colocated) if role is not None]
    if job.command == "optimize" and base.search is not None:
        searched = [*(base.search.prefill_gpus or []), *(base.search.decode_gpus or [])]
        names = searched or names
    return tuple(dict.fromkeys(names))


def _base_budget(job: SweepJob) -> int | None:
    search = job.base.search
    return search.gpus if job.command == "optimize" and search is not None else None


def _base_objective(job: SweepJob) -> str | None:
    search = job.base.search
    return search.objective if job.command == "optimize" and search is not None else None


def overrides_of(job: SweepJob, point: SweepPoint) -> ScenarioOverrides:
    """The point as the command line's overrides (files relative to the grid file; the SLO tier's values)."""
    tier = job.tiers[point.slo] if point.slo is not None else None
    return ScenarioOverrides(
        model=None if point.model is None else job.local_path(point.model),
        gpu=None if point.gpu is None else ",".join(point.gpu),
        workload=None if point.workload is None else job.local_path(point.workload),
        engine=None if point.engine is None else job.local_path(point.engine),
        ttft_slo=None if tier is None else str(tier.ttft),
        tpot_slo=None if tier is None else str(tier.tpot),
        percentile=None if tier is None else tier.percentile,
        attainment=None if tier is None else tier.attainment,
    )


def _optimize(job: SweepJob, catalog: Catalog, point: SweepPoint) -> list[Row]:
    from pdplan.io.overrides import search_scenario
    from pdplan.search.optimize import optimize

    scenario = search_scenario(job.base, overrides_of(job, point))
    result = optimize(
        scenario,
        catalog=catalog,
        budget_gpus=point.gpus,
        rate_rps=point.rate,
        objective=job.objective,
        top=job.top,
        analyse=False,
    )
    return [_plan_row(plan) for plan in result.plans]


def _plan_row(plan: Plan) -> Row:
    row: Row = {
        "status": "ok",
        "plan": plan.label,
        "mode": plan.mode,
        "num_gpus": plan.num_gpus,
        "granularity": plan.granularity,
        "goodput_rps": plan.goodput_rps,
        "goodput_rps_per_gpu": plan.goodput_rps_per_gpu,
        "ttft_p90_s": None if plan.ttft_s is None else plan.ttft_s.p90,
        "tpot_p90_s": None if plan.tpot_s is None else plan.tpot_s.p90,
        "attainment": plan.attainment,
        "cost_usd_per_hour": plan.cost_usd_per_hour,
        "binding_constraint": plan.binding_constraint,
    }
    for name, role in (("prefill", plan.prefill), ("decode", plan.decode), ("colocated", plan.colocated)):
        if role is not None:
            row.update({f"{name}_gpu": role.gpu, f"{name}_tp": role.tp, f"{name}_count": role.count})
    return row


def _evaluate(job: SweepJob, catalog: Catalog, point: SweepPoint) -> list[Row]:
    from pdplan.evaluation.evaluate import evaluate
    from pdplan.io.overrides import apply_overrides

    scenario = apply_overrides(job.base, overrides_of(job, point))
    return [_evaluation_row(evaluate(scenario, catalog=catalog, rate=point.rate))]


def _evaluation_row(ev: Evaluation) -> Row:
    point = ev.operating_point
    row: Row = {
        "status": "ok",
        "plan": _deployment_label(ev.deployment),
        "mode": ev.mode,
        "num_gpus": ev.num_gpus,
        "granularity": ev.deployment.get("granularity"),
        "goodput_rps": ev.goodput_rps,
        "goodput_rps_per_gpu": ev.goodput_rps_per_gpu,
        "ttft_p90_s": None if point is None else point.ttft_s.p90,
        "tpot_p90_s": None if point is None else point.tpot_s.p90,
        "attainment": None if point is None else point.attainment,
        "cost_usd_per_hour": ev.cost_usd_per_hour,
        "binding_constraint": ev.binding_constraint,
    }
    for name in ("prefill", "decode", "colocated"):
        role = ev.deployment.get(name)
        if role is not None:
            row.update({f"{name}_gpu": role["gpu"], f"{name}_tp": role["tp"], f"{name}_count": role["count"]})
    return row


def _deployment_label(deployment: dict[str, Any]) -> str:
    """``2P1D h100-sxm TP4 / h100-sxm TP4 layer`` or ``colocated 3x h100-sxm TP4``, as optimize labels its plans."""
    if "colocated" in deployment:
        co = deployment["colocated"]
        return f"colocated {co['count']}x {co['gpu']} TP{co['tp']}"
    pre, dec = deployment["prefill"], deployment["decode"]
    return (
        f"{pre['count']}P{dec['count']}D {pre['gpu']} TP{pre['tp']} / {dec['gpu']} TP{dec['tp']} "
        f"{deployment['granularity']}"
    )


def _finite(value: Any) -> Any:
    """NaN and infinity as None (JSON null, an empty CSV cell), as every pdplan report writes them."""
    return None if isinstance(value, float) and not math.isfinite(value) else value
