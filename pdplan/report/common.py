"""Shared pieces of the ``optimize`` reports: fixed number formatting (human units), plan facts and warnings.

Every formatter takes SI values and returns text with a fixed number of decimals, so a report is a pure function
of the :class:`~pdplan.search.plans.PlanResult` (no locale, no timestamps). ``None`` prints as ``n/a``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pdplan.search.inputs_record import GpuFacts
from pdplan.search.plans import GrowthRow, Plan, PlanResult
from pdplan.serving.deployment import Role
from pdplan.specs.kernel_table import uncalibrated_warning
from pdplan.units import GIB

NA = "n/a"


def fixed(value: float | None, decimals: int, suffix: str = "") -> str:
    """``value`` with ``decimals`` decimals (thousands separated), ``n/a`` for None/NaN, ``inf`` for infinity."""
    if value is None or math.isnan(value):
        return NA
    if math.isinf(value):
        return ("inf" if value > 0 else "-inf") + suffix
    return f"{value:,.{decimals}f}{suffix}"


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds, one decimal: ``0.6125`` → ``612.5``."""
    return fixed(None if seconds is None else seconds * 1e3, 1)


def pct(fraction: float | None) -> str:
    """A fraction as a percentage, one decimal: ``0.9024`` → ``90.2%``."""
    return fixed(None if fraction is None else fraction * 100.0, 1, "%")


def gib(nbytes: float | None) -> str:
    """Bytes as GiB, one decimal."""
    return fixed(None if nbytes is None else nbytes / GIB, 1, " GiB")


def usd(value: float | None) -> str:
    """Dollars with cents: ``$47.60``; ``n/a`` when unpriced."""
    return NA if value is None else "$" + fixed(value, 2)


def times(value: float | None) -> str:
    """A ratio: ``1.81x``."""
    return fixed(value, 2, "x")


def rps(value: float | None) -> str:
    return fixed(value, 2)


def rps_per_gpu(value: float | None) -> str:
    return fixed(value, 3)


def per_usd_hour(value: float | None) -> str:
    return fixed(value, 4)


def tokens_per_s(value: float | None) -> str:
    return fixed(value, 0)


def role_text(role: Role | None) -> str:
    """``2x h100-sxm TP4`` (``PP2`` appended when pipelined)."""
    if role is None:
        return NA
    return (
        f"{role.count}x {role.gpu} TP{role.tp}"
        + (f" PP{role.pp}" if role.pp > 1 else "")
        + (f" DP{role.dp}" if role.dp > 1 else "")
        + (f" EP{role.ep}" if role.ep > 1 else "")
        + (" ZeRO-gather" if role.expert_gather else "")
    )


_RECORDED = (50, 90, 99)
"""The percentiles a plan records (:data:`pdplan.serving.snapshot.RECORDED`, in percent)."""


def p90(plan: Plan, which: str) -> float | None:
    """The plan's TTFT or TPOT P90 in seconds (``which`` is ``"ttft"`` or ``"tpot"``)."""
    return at_percentile(plan, which, 90)


def at_percentile(plan: Plan, which: str, percentile: int) -> float | None:
    """The plan's TTFT or TPOT at ``percentile`` (50, 90 or 99: the percentiles a plan records) in seconds."""
    latency = plan.ttft_s if which == "ttft" else plan.tpot_s
    if latency is None:
        return None
    if percentile not in _RECORDED:
        raise KeyError(percentile)
    return latency.quantile(percentile / 100.0)  # that percentile alone: each is solved on first read


def shown_percentile(result: PlanResult) -> int:
    """The latency percentile the plan tables show: the SLO's where a plan records it (50, 90, 99), else 90 (the
    JSON and CSV carry every recorded percentile)."""
    pct = result.slo_percentile
    return int(pct) if pct in (50.0, 90.0, 99.0) else 90


def at_columns(columns: tuple[str, ...], percentile: int) -> tuple[str, ...]:
    """Column names with ``P90`` read as the shown percentile (``TTFT P99 ms``)."""
    return tuple(name.replace("P90", f"P{percentile}") for name in columns)


def screened_marker(plan: Plan) -> str:
    """`` (screened)`` for a plan whose numbers come only from the vectorised screen."""
    return "" if plan.exact else " (screened)"


def pareto_sorted(result: PlanResult) -> list[Plan]:
    """The Pareto front by interactivity: tokens/s per user ascending, then goodput per GPU descending, label."""
    return sorted(result.pareto, key=lambda p: (p.tokens_per_s_per_user, -p.goodput_rps_per_gpu, p.label))


def runner_up(result: PlanResult) -> Plan | None:
    return result.plans[1] if len(result.plans) > 1 else None


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one (a document's nested values, :mod:`pdplan.report.mapping`)."""
    return value if isinstance(value, Mapping) else {}


def gpu_inputs(result: PlanResult) -> dict[str, GpuFacts]:
    """``inputs.gpus`` as name → facts, sorted by name."""
    return {name: result.inputs.gpus[name] for name in sorted(result.inputs.gpus)}


def uncalibrated_gpus(result: PlanResult) -> list[str]:
    return [name for name, facts in gpu_inputs(result).items() if not facts.calibrated_kernel_table]


def unpriced_gpus(result: PlanResult) -> list[str]:
    return [name for name, facts in gpu_inputs(result).items() if facts.price_usd_per_gpu_hour is None]


def ranked_with_baseline(result: PlanResult) -> list[tuple[str, Plan]]:
    """``(rank, plan)`` for the ranked plans (``1``, ``2``, ...) then the baseline (``baseline``)."""
    rows = [(str(i), plan) for i, plan in enumerate(result.plans, start=1)]
    if result.baseline is not None:
        rows.append(("baseline", result.baseline))
    return rows


def all_warnings(result: PlanResult) -> list[str]:
    """Every warning of the report, de-duplicated, in a fixed order.

    The result's own warnings first, then uncalibrated kernel tables and missing prices (from ``inputs``),
    screened estimates, and each plan's warnings prefixed by its rank.
    """
    lines = list(result.warnings)
    gpus = gpu_inputs(result)
    for name in uncalibrated_gpus(result):
        lines.append(uncalibrated_warning(name, gpus[name].kernel_table_derived_from))
    for name in unpriced_gpus(result):
        if not any(line.startswith(f"{name} skipped:") for line in lines):  # a cost search says it skipped it
            lines.append(f"{name} has no price in the catalogue: per-$ figures of plans using it are n/a")
    screened = [rank for rank, plan in ranked_with_baseline(result) if not plan.exact]
    if screened:
        which = (
            f"plans {', '.join(screened)} are screened estimates"
            if len(screened) > 1
            else f"plan {screened[0]} is a screened estimate"
        )
        lines.append(f"{which} (vectorised screen only, not re-evaluated with the full serving model)")
    for rank, plan in ranked_with_baseline(result):
        lines.extend(f"plan {rank} ({plan.label}): {w}" for w in plan.warnings)
    return list(dict.fromkeys(lines))


ObjectiveMetric = tuple[str, Callable[[Plan], float | None], Callable[[float | None], str], bool]

_OBJECTIVES: dict[str, ObjectiveMetric] = {
    "cost": ("cost per hour", lambda p: p.cost_usd_per_hour, usd, False),
    "tokens-per-dollar": (
        "output tokens/s per $/h",
        lambda p: p.output_tokens_per_s_per_usd_hour,
        lambda v: fixed(v, 1),
        True,
    ),
}
_GOODPUT_PER_GPU: ObjectiveMetric = ("goodput per GPU (req/s)", lambda p: p.goodput_rps_per_gpu, rps_per_gpu, True)


_BUDGET_OBJECTIVES: dict[str, ObjectiveMetric] = {
    "cost": ("goodput per $/h (req/s per $/h)", lambda p: p.goodput_rps_per_usd_hour, per_usd_hour, True),
    "tokens-per-dollar": _OBJECTIVES["tokens-per-dollar"],
}
_FEWEST_GPUS: ObjectiveMetric = ("GPU count", lambda p: float(p.num_gpus), lambda v: fixed(v, 0), False)


def objective_metric(result: PlanResult) -> ObjectiveMetric:
    """(words, getter, formatter, higher_is_better) of the quantity the objective ranks by, as
    :func:`pdplan.search.select.rank` does: at a target rate, ``cost`` and ``tokens-per-dollar`` rank by cost per
    hour (lower is better; the tokens/s are fixed by the rate) and ``gpus`` by the GPU count; within a budget,
    ``cost`` ranks by goodput per $/h, ``tokens-per-dollar`` by output tokens/s per $/h and ``gpus`` by goodput
    per GPU."""
    key = result.objective_key
    if result.rate_target_rps is not None:
        return _OBJECTIVES["cost"] if key in ("cost", "tokens-per-dollar") else _FEWEST_GPUS
    return _BUDGET_OBJECTIVES.get(key, _GOODPUT_PER_GPU)


def relative_change(new: float | None, old: float | None) -> float | None:
    """``new / old - 1``, None when either is missing or ``old`` is 0."""
    if new is None or old is None or old == 0 or math.isnan(new) or math.isnan(old):
        return None
    return new / old - 1.0


def signed_pct(change: float | None) -> str:
    """``+15.5%`` / ``-3.0%`` / ``n/a``."""
    if change is None:
        return NA
    text = pct(change)
    return text if text.startswith("-") else "+" + text


def union_keys(dicts: Iterable[Mapping[Any, Any]]) -> list[str]:
    """Sorted union of the (string) keys of several dicts."""
    keys: set[str] = set()
    for d in dicts:
        keys.update(str(k) for k in d)
    return sorted(keys)


PLAN_COLUMNS = (
    "rank",
    "plan",
    "GPUs",
    "goodput req/s",
    "req/s per GPU",
    "req/s per $/h",
    "output tok/s",
    "TTFT P90 ms",
    "TPOT P90 ms",
    "binding constraint",
    "$/h",
    "tok/s per GPU",
    "tok/s per user",
    "E2E mean s",
    "ITL mean ms",
    "$/month",
    "$/year",
)


def plan_cells(rank: str, plan: Plan, percentile: int = 90) -> list[str]:
    """One row of the plans table in human units (matches :data:`PLAN_COLUMNS`, latencies at ``percentile``);
    screened ranks get ``*``."""
    return [
        rank + ("" if plan.exact else "*"),
        plan.label,
        str(plan.num_gpus),
        rps(plan.goodput_rps),
        rps_per_gpu(plan.goodput_rps_per_gpu),
        per_usd_hour(plan.goodput_rps_per_usd_hour),
        tokens_per_s(plan.output_tokens_per_s),
        ms(at_percentile(plan, "ttft", percentile)),
        ms(at_percentile(plan, "tpot", percentile)),
        plan.binding_constraint,
        usd(plan.cost_usd_per_hour),
        tokens_per_s(plan.output_tokens_per_s_per_gpu),
        fixed(plan.tokens_per_s_per_user, 1),
        fixed(plan.e2e_mean_s, 2),
        ms(plan.itl_mean_s),
        usd(plan.cost_usd_per_month),
        usd(plan.cost_usd_per_year),
    ]


PLAN_SUMMARY_COLUMNS = (
    "rank",
    "plan",
    "GPUs",
    "goodput req/s",
    "req/s per GPU",
    "TTFT P90 ms",
    "TPOT P90 ms",
    "binding constraint",
    "$/h",
)
"""The terminal's first plans table: what a plan is, what it serves, its SLO latencies, what binds it, its cost."""

PLAN_METRIC_COLUMNS = (
    "rank",
    "$/h",
    "$/month",
    "$/year",
    "req/s per $/h",
    "output tok/s",
    "tok/s per GPU",
    "tok/s per user",
    "E2E mean s",
    "ITL mean ms",
)
"""The terminal's second plans table (by rank): cost (per hour, per 730-h month, per 8,760-h year), cost efficiency
and the metrics people compare with. The two
together hold every column of :data:`PLAN_COLUMNS` and fit a 100-column terminal, which one table of 15 does not."""


def plan_cells_of(columns: tuple[str, ...], rank: str, plan: Plan, percentile: int = 90) -> list[str]:
    """The cells of :func:`plan_cells` for ``columns`` (a selection of :data:`PLAN_COLUMNS`), in that order."""
    cells = dict(zip(PLAN_COLUMNS, plan_cells(rank, plan, percentile), strict=True))
    return [cells[name] for name in columns]


def planning_line(result: PlanResult) -> str:
    """The planning margins in one line (every report prints it): headroom, redundancy, dollar budget."""
    p = result.planning
    text = (
        f"planning: headroom {fixed(p.headroom * 100.0, 0)}% (the SLO holds at {fixed(1.0 + p.headroom, 2)}x "
        f"the operating rate; goodput = SLO-meeting rate / {fixed(1.0 + p.headroom, 2)}), "
        f"redundancy {p.redundancy}"
    )
    return text + (f", budget {usd(p.budget_usd_per_hour)}/h" if p.budget_usd_per_hour is not None else "")


PARETO_COLUMNS = ("plan", "GPUs", "req/s per GPU", "tok/s per user", "TTFT P90 ms", "TPOT P90 ms", "role", "$/h")


def pareto_cells(result: PlanResult, plan: Plan) -> list[str]:
    """One row of the Pareto table; ``role`` says ``recommended`` / ``rank N`` / ``baseline``."""
    pct = shown_percentile(result)
    return [
        plan.label + screened_marker(plan),
        str(plan.num_gpus),
        rps_per_gpu(plan.goodput_rps_per_gpu),
        fixed(plan.tokens_per_s_per_user, 1),
        ms(at_percentile(plan, "ttft", pct)),
        ms(at_percentile(plan, "tpot", pct)),
        plan_role(result, plan),
        usd(plan.cost_usd_per_hour),
    ]


def plan_role(result: PlanResult, plan: Plan) -> str:
    if result.plans and plan == result.plans[0]:
        return "recommended"
    if plan in result.plans:
        return f"rank {result.plans.index(plan) + 1}"
    return "baseline" if plan == result.baseline else ""


def ratio_line(result: PlanResult) -> str:
    """``disaggregated / colocated = 1.81x goodput per GPU`` (or why there is no ratio)."""
    ratio = result.baseline_ratio
    if ratio is None:
        return (
            "no colocated baseline to compare with"
            if result.baseline is None
            else "no disaggregated plan to compare with the colocated baseline"
        )
    return f"disaggregated / colocated = {times(ratio)} goodput per GPU"


WHY_NOT_COLUMNS = ("role", "GPU", "TP", "PP", "DP", "EP", "stage", "reason")


def why_not_cells(row: Mapping[str, Any]) -> list[str]:
    """One row of the why-not table (``None`` TP/PP/DP/EP: every degree; MoE instance types of one GPU and TP differ
    in their attention DP and EP)."""

    def text(value: object) -> str:
        return NA if value is None else str(value)

    cells = [text(row.get(k)) for k in ("role", "gpu", "tp", "pp", "dp", "ep", "stage", "reason")]
    if row.get("expert_gather"):  # ZeRO-Prefill's expert gather: the same TP/DP/EP as a row without it
        cells[5] += " ZeRO-gather"
    return cells


GROWTH_COLUMNS = ("traffic", "target req/s", "plan", "GPUs", "+GPUs", "$/h", "$/month", "binding constraint")


def growth_cells(result: PlanResult, row: GrowthRow) -> list[str]:
    """One row of the growth table (``--growth``): the grown rate, the plan re-planned for it, its GPUs (and how
    many more than the recommended plan), its cost; ``no feasible plan`` with the reason when the search found none."""
    p = row.plan
    more = None if p is None else p.num_gpus - result.best.num_gpus
    return [
        signed_pct(row.growth),
        rps(row.rate_rps),
        "no feasible plan" if p is None else p.label,
        NA if p is None else str(p.num_gpus),
        NA if more is None else f"{more:+d}",
        usd(None if p is None else p.cost_usd_per_hour),
        usd(None if p is None else p.cost_usd_per_month),
        (row.infeasible or "") if p is None else p.binding_constraint,
    ]


def growth_base_line(result: PlanResult) -> str:
    """What the growth is measured from: the target rate, or the recommended plan's goodput."""
    if result.rate_target_rps is not None:
        base = f"the target {rps(result.rate_target_rps)} req/s"
    else:
        base = f"the recommended plan's goodput {rps(result.best.goodput_rps)} req/s"
    return (
        f"traffic grown from {base}, each row re-planned with the same search at that target rate "
        f"(now: {result.best.num_gpus} GPUs, {usd(result.best.cost_usd_per_hour)}/h)"
    )


def rates_line(result: PlanResult) -> str:
    """Which rate each figure of the plans tables is read at: latencies, attainment and utilisations at the
    operating rate (the target, or each plan's goodput); goodput, output tokens/s and the binding constraint at each
    plan's goodput (as ``evaluate``: ``binding_constraint`` at the goodput, ``operating_binding_constraint`` at the
    rate)."""
    where = (
        f"the target {rps(result.rate_target_rps)} req/s"
        if result.rate_target_rps is not None
        else "each plan's goodput"
    )
    return (
        f"rates: latencies and attainment at {where}; goodput, output tok/s and the binding constraint "
        "at each plan's goodput"
    )
