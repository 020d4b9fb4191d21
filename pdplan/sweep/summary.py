"""The sweep's Markdown summary (docs/sweep.md §3): the best plan of every point, and the $/h of the best plan against
each forecast rate for every scenario swept over rates. Deterministic: points in sweep order, fixed formatting."""

from __future__ import annotations

from collections import Counter

from pdplan.report.render import records_to_markdown
from pdplan.sweep.point import Row

SCENARIO_KEYS = ("model", "gpus", "workload", "engine", "slo_tier", "budget_gpus")
"""The inputs that name a scenario apart from its forecast rate (the rows of the $/h table)."""


def render_summary(title: str, rows: list[Row]) -> str:
    """The Markdown summary of a finished sweep whose ``rows`` are in sweep order."""
    best = _best_rows(rows)
    counts = Counter(str(row["status"]) for row in best)
    lines = [
        f"# pdplan sweep: {title}",
        "",
        f"{len(best)} points: {counts['ok']} ok, {counts['infeasible']} infeasible, {counts['error']} error. "
        f"Command: `{best[0]['command'] if best else '-'}`; objective: {best[0]['objective'] if best else '-'}. "
        "Every plan of every point is a row of the CSV and JSONL beside this file.",
        "",
        "## 1. Best plan per scenario",
        "",
        records_to_markdown([_best_record(row) for row in best]).rstrip("\n"),
    ]
    forecast = _forecast_table(best)
    if forecast:
        lines += ["", "## 2. $/h against the forecast", "", forecast.rstrip("\n")]
    return "\n".join(lines) + "\n"


def _best_rows(rows: list[Row]) -> list[Row]:
    """The first row (rank 1, or the error) of each point, in sweep order."""
    seen: dict[str, Row] = {}
    for row in rows:
        seen.setdefault(str(row["point_id"]), row)
    return list(seen.values())


def _best_record(row: Row) -> dict[str, object]:
    ok = row["status"] == "ok"
    return {
        "point": row["point"],
        "point_id": row["point_id"],
        "model": row["model"],
        "gpus": row["gpus"],
        "workload": row["workload"],
        "engine": row["engine"],
        "slo": row["slo_tier"] or "base",
        "rate req/s": _number(row["rate_rps"], "{:g}"),
        "budget GPUs": row["budget_gpus"] if row["rate_rps"] is None else None,
        "status": row["status"],
        "best plan": row["plan"] if ok else row["error"],
        "GPUs": row["num_gpus"],
        "$/h": _number(row["cost_usd_per_hour"], "{:.2f}"),
        "goodput req/s": _number(row["goodput_rps"], "{:.2f}"),
        "TTFT P90 ms": _number(_ms(row["ttft_p90_s"]), "{:.0f}"),
        "TPOT P90 ms": _number(_ms(row["tpot_p90_s"]), "{:.1f}"),
    }


def _forecast_table(best: list[Row]) -> str:
    """One row per scenario, one column per forecast rate: the best plan's $/h (and GPUs) meeting it."""
    rated = [row for row in best if row["rate_rps"] is not None]
    if not rated:
        return ""
    rates = sorted({float(row["rate_rps"]) for row in rated})
    table: dict[tuple[object, ...], dict[str, object]] = {}
    for row in rated:
        key = tuple(row[k] for k in SCENARIO_KEYS)
        record = table.setdefault(key, {k: row[k] for k in SCENARIO_KEYS if k != "budget_gpus"})
        record[f"{float(row['rate_rps']):g} req/s"] = _forecast_cell(row)
    columns = [k for k in SCENARIO_KEYS if k != "budget_gpus"] + [f"{rate:g} req/s" for rate in rates]
    return records_to_markdown(list(table.values()), columns)


def _forecast_cell(row: Row) -> str:
    if row["status"] != "ok":
        return str(row["status"])
    cost = row["cost_usd_per_hour"]
    gpus = f"{row['num_gpus']} GPU{'' if row['num_gpus'] == 1 else 's'}"
    return gpus if cost is None else f"${cost:.2f}/h ({gpus})"


def _ms(seconds: object) -> float | None:
    return None if not isinstance(seconds, int | float) else 1e3 * seconds


def _number(value: object, form: str) -> str | None:
    return None if not isinstance(value, int | float) else form.format(value)
