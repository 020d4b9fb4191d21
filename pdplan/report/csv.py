"""CSV of an optimisation: one row per plan, every field flattened, SI units in the column names.

Every row starts with the search's context (model, workload, SLO, engine, headroom: a row read on its own says what
it answers) and its ``row_kind``: the ranked plans (``ranked``, ``rank`` 1..n), then the colocated baseline
(``baseline``), Pareto plans not among the ranked ones (``pareto``), and with ``--growth`` one row per grown rate
(``growth``, the fraction in ``growth``). ``rank`` is empty except on ranked rows; integer columns (ranks, counts,
degrees, GPUs, bytes) are written as integers and empty where a row has no value. Floats at full precision.
Columns for ``utilisation`` and ``memory_headroom`` are the sorted union of the keys over all rows.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pdplan.report.cache import CSV_COLUMNS, cache_csv_record, dual_csv_columns, has_cache, ppd_csv_columns
from pdplan.report.common import union_keys
from pdplan.report.prfaas import csv_columns, csv_record
from pdplan.report.render import records_to_csv
from pdplan.search.plans import GrowthRow, Plan, PlanResult
from pdplan.serving.deployment import Role
from pdplan.serving.snapshot import Latency

_ROLES = ("prefill", "decode", "colocated")
_CONTEXT = [
    "model",
    "workload",
    "slo_ttft_s",
    "slo_tpot_s",
    "slo_percentile",
    "slo_attainment",
    "engine",
    "engine_version",
    "headroom",
]
_HEAD = ["row_kind", "rank", "is_baseline", "is_pareto", "label", "mode"]
_MIDDLE = [
    "granularity",
    "link",
    "routing",
    "scheduler",
    "max_num_seqs",
    "num_gpus",
    "goodput_rps",
    "goodput_rps_per_gpu",
    "goodput_rps_per_usd_hour",
    "output_tokens_per_s",
    "output_tokens_per_s_per_usd_hour",
    "cost_usd_per_hour",
    "operating_rate_rps",
]
_TAIL = ["attainment"]
_END = ["binding_constraint", "tokens_per_s_per_user", "exact", "warnings"]
_METRICS = [
    "e2e_mean_s",
    "itl_mean_s",
    "output_tokens_per_s_per_gpu",
    "cost_usd_per_month",
    "cost_usd_per_year",
    "operating_binding_constraint",
]
"""Appended after the original columns (kept in place for readers of older CSVs)."""
_STATS = ("mean", "p50", "p90", "p99")


RowKind = Literal["ranked", "baseline", "pareto"]


def _rows(result: PlanResult) -> list[tuple[RowKind, int | None, Plan]]:
    rows: list[tuple[RowKind, int | None, Plan]] = [("ranked", i, p) for i, p in enumerate(result.plans, start=1)]
    if result.baseline is not None:
        rows.append(("baseline", None, result.baseline))
    rows += [("pareto", None, p) for p in result.pareto if p not in result.plans and p != result.baseline]
    return rows


def context_record(result: PlanResult) -> dict[str, Any]:
    """The search's context, repeated on every row: model, workload, SLO (seconds, percentile, attainment), engine
    and version, planning headroom (a fraction)."""
    slo = result.inputs.slo
    engine = result.assumptions.engine
    return {
        "model": result.inputs.model.name,
        "workload": result.inputs.workload.name,
        "slo_ttft_s": slo.ttft,
        "slo_tpot_s": slo.tpot,
        "slo_percentile": slo.percentile,
        "slo_attainment": slo.attainment,
        "engine": engine.get("name"),
        "engine_version": engine.get("version"),
        "headroom": result.planning.headroom,
    }


def growth_record(row: GrowthRow) -> dict[str, Any]:
    """A ``--growth`` row: the re-planned plan's record (or only the reason it found none) with ``growth``."""
    if row.plan is None:
        record: dict[str, Any] = {"row_kind": "growth", "operating_rate_rps": row.rate_rps}
        record["binding_constraint"] = f"no feasible plan: {row.infeasible}"
    else:
        record = plan_record(row.plan, None, is_baseline=False, is_pareto=False)
        record["row_kind"] = "growth"
    record["growth"] = row.growth
    return record


def _role(prefix: str, role: Role | None) -> dict[str, Any]:
    fields = ("gpu", "tp", "pp", "count", "gpus", "dp", "ep")
    if role is None:
        return {f"{prefix}_{f}": None for f in fields}
    return {
        f"{prefix}_gpu": role.gpu,
        f"{prefix}_tp": role.tp,
        f"{prefix}_pp": role.pp,
        f"{prefix}_count": role.count,
        f"{prefix}_gpus": role.gpus,
        f"{prefix}_dp": role.dp,
        f"{prefix}_ep": role.ep,
    }


def _latency(prefix: str, latency: Latency | None) -> dict[str, Any]:
    return {f"{prefix}_{k}_s": None if latency is None else getattr(latency, k) for k in _STATS}


def plan_record(plan: Plan, rank: int | None, *, is_baseline: bool, is_pareto: bool) -> dict[str, Any]:
    """One plan as a flat record (SI units in the keys)."""
    record: dict[str, Any] = {
        "row_kind": "ranked" if rank is not None else ("baseline" if is_baseline else "pareto"),
        "rank": rank,
        "is_baseline": is_baseline,
        "is_pareto": is_pareto,
        "label": plan.label,
        "mode": plan.mode,
    }
    for name in _ROLES:
        record.update(_role(name, getattr(plan, name)))
    record.update({name: getattr(plan, name) for name in _MIDDLE})
    record.update(_latency("ttft", plan.ttft_s))
    record.update(_latency("tpot", plan.tpot_s))
    record["attainment"] = plan.attainment
    record.update({f"utilisation_{k}": v for k, v in sorted(plan.utilisation.items())})
    record.update({f"memory_headroom_{k}_bytes": _whole(v) for k, v in sorted(plan.memory_headroom.items())})
    record.update({name: getattr(plan, name) for name in _END})
    record.update({name: getattr(plan, name) for name in _METRICS})
    if plan.prfaas is not None:
        record.update(csv_record(plan))
    if has_cache([plan]):
        record.update(cache_csv_record(plan))
    record.update(_error_record(plan))
    return record


ERROR_COLUMNS = [
    *(f"{m}_error_{k}_pct" for m in ("tpot", "ttft") for k in ("median_abs", "p90_abs", "signed_median")),
    "outside_validation",
]
"""The plan's expected error (:mod:`pdplan.evaluation.error_band`): its band in %, its notes joined by ``;``."""


def _error_record(plan: Plan) -> dict[str, Any]:
    err = plan.expected_error
    if err is None:
        return {}
    out: dict[str, Any] = {"outside_validation": "; ".join(err.outside)}
    for name, band in (("tpot", err.tpot), ("ttft", err.ttft)):
        if band is not None:
            out[f"{name}_error_median_abs_pct"] = band.median_abs_pct
            out[f"{name}_error_p90_abs_pct"] = band.p90_abs_pct
            out[f"{name}_error_signed_median_pct"] = band.signed_median_pct
    return out


def _whole(nbytes: float) -> int | float:
    """Bytes as an integer column (a fraction of a byte means nothing; NaN / infinity stay as they are)."""
    return round(nbytes) if math.isfinite(nbytes) else nbytes


def columns(result: PlanResult) -> list[str]:
    """The CSV header: fixed columns, then one per utilisation and memory-headroom key (sorted)."""
    plans = [p for _, _, p in _rows(result)] + [g.plan for g in result.growth if g.plan is not None]
    roles = [f"{r}_{f}" for r in _ROLES for f in ("gpu", "tp", "pp", "count", "gpus")]
    latencies = [f"{n}_{k}_s" for n in ("ttft", "tpot") for k in _STATS]
    util = [f"utilisation_{k}" for k in union_keys(p.utilisation for p in plans)]
    headroom = [f"memory_headroom_{k}_bytes" for k in union_keys(p.memory_headroom for p in plans)]
    parallel = [f"{r}_{f}" for r in _ROLES for f in ("dp", "ep")]  # attention DP / EP (issue #13), appended
    prfaas = csv_columns(plans)  # PrfaaS plans only (issue #14), appended
    cache = [*CSV_COLUMNS, *dual_csv_columns(plans), *ppd_csv_columns(plans)] if has_cache(plans) else []  # appended
    return [
        *_CONTEXT,
        *_HEAD,
        *roles,
        *_MIDDLE,
        *latencies,
        *_TAIL,
        *util,
        *headroom,
        *_END,
        *_METRICS,
        *parallel,
        *prfaas,
        *cache,
        *ERROR_COLUMNS,  # issue #23, appended
        *(["growth"] if result.growth else []),
    ]


def to_csv(result: PlanResult) -> str:
    """The CSV text (header row first; empty cells for missing values; warnings joined by ``;``)."""
    records = [
        plan_record(p, rank, is_baseline=kind == "baseline", is_pareto=p in result.pareto)
        for kind, rank, p in _rows(result)
    ]
    records += [growth_record(g) for g in result.growth]
    context = context_record(result)
    return records_to_csv([{**context, **r} for r in records], columns(result))
