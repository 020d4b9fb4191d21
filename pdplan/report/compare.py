"""``pdplan compare``: chosen plans side by side (issue #25: a capacity review compares plans or GPU types).

Each entry is one plan document (a plan of ``optimize --format json``, from a file or from a search run by
``compare --gpu``) with the headroom it was planned at, or the reason a search found no plan. The table and Markdown
put the quantities in rows and the plans in columns (side by side); CSV has one row per plan in SI units; JSON is
``{"plans": [...]}`` with those same keys (docs/json_keys.md). Costs per month and year are $/h x 730 h and
x 8,760 h (``pdplan/data/billing_periods.yaml``), computed here so that plan files written before those keys
existed compare too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pdplan.io.billing_periods import per_month, per_year
from pdplan.report import common as c
from pdplan.report.render import Format, records_to_csv, records_to_markdown, records_to_table, to_json


@dataclass(frozen=True)
class CompareEntry:
    """One column of the comparison: where it came from (a file, or ``--gpu NAME``), the plan's JSON document
    (``None`` when the search found no plan), the headroom it was planned at and, for no plan, why."""

    source: str
    plan: Mapping[str, Any] | None
    headroom: float | None
    rank: int = 1
    infeasible: str | None = None


CSV_COLUMNS = (
    "source",
    "rank",
    "status",
    "label",
    "num_gpus",
    "cost_usd_per_hour",
    "cost_usd_per_month",
    "cost_usd_per_year",
    "goodput_rps",
    "operating_rate_rps",
    "ttft_p90_s",
    "tpot_p90_s",
    "binding_constraint",
    "headroom",
)


def _number(plan: Mapping[str, Any], key: str) -> float | None:
    value = plan.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def compare_record(entry: CompareEntry) -> dict[str, Any]:
    """One entry in SI units (the CSV row and the JSON object): ``status`` is ``ok`` or ``infeasible``."""
    plan = entry.plan or {}
    hourly = _number(plan, "cost_usd_per_hour")
    gpus = plan.get("num_gpus")
    return {
        "source": entry.source,
        "rank": entry.rank if entry.plan is not None else None,
        "status": "ok" if entry.plan is not None else "infeasible",
        "label": plan.get("label"),
        "num_gpus": gpus if isinstance(gpus, int) else None,
        "cost_usd_per_hour": hourly,
        "cost_usd_per_month": per_month(hourly),
        "cost_usd_per_year": per_year(hourly),
        "goodput_rps": _number(plan, "goodput_rps"),
        "operating_rate_rps": _number(plan, "operating_rate_rps"),
        "ttft_p90_s": _number(plan, "ttft_p90_s"),
        "tpot_p90_s": _number(plan, "tpot_p90_s"),
        "binding_constraint": plan.get("binding_constraint") if entry.plan is not None else entry.infeasible,
        "headroom": entry.headroom,
    }


def _ms(value: Any) -> str:
    return c.ms(value if isinstance(value, float) and math.isfinite(value) else None)


_HUMAN: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("plan", lambda r: str(r["label"]) if r["status"] == "ok" else "no feasible plan"),
    ("GPUs", lambda r: c.NA if r["num_gpus"] is None else str(r["num_gpus"])),
    ("$/h", lambda r: c.usd(r["cost_usd_per_hour"])),
    ("$/month (730 h)", lambda r: c.usd(r["cost_usd_per_month"])),
    ("$/year (8,760 h)", lambda r: c.usd(r["cost_usd_per_year"])),
    ("goodput req/s", lambda r: c.rps(r["goodput_rps"])),
    ("latencies at req/s", lambda r: c.rps(r["operating_rate_rps"])),
    ("TTFT P90 ms", lambda r: _ms(r["ttft_p90_s"])),
    ("TPOT P90 ms", lambda r: _ms(r["tpot_p90_s"])),
    ("binding constraint", lambda r: c.NA if r["binding_constraint"] is None else str(r["binding_constraint"])),
    ("headroom", lambda r: c.NA if r["headroom"] is None else c.fixed(r["headroom"] * 100.0, 0, "%")),
)
"""The side-by-side rows: quantity → its cell from a :func:`compare_record` (human units)."""


def side_by_side(entries: Sequence[CompareEntry]) -> tuple[list[str], list[dict[str, str]]]:
    """Columns (``quantity`` then one per entry, named by its source) and one row per quantity of :data:`_HUMAN`."""
    records = [compare_record(e) for e in entries]
    names = _column_names(entries)
    rows = [{"quantity": name, **{n: cell(r) for n, r in zip(names, records, strict=True)}} for name, cell in _HUMAN]
    return ["quantity", *names], rows


def _column_names(entries: Sequence[CompareEntry]) -> list[str]:
    """Each entry's source, with ``rank N`` when it is not the recommended plan and a ``#i`` suffix on repeats."""
    names: list[str] = []
    for e in entries:
        name = e.source + (f" rank {e.rank}" if e.rank != 1 else "")
        names.append(name if name not in names else f"{name} #{len(names) + 1}")
    return names


def render_compare(entries: Sequence[CompareEntry], fmt: Format) -> Any:
    """The comparison in ``fmt``: text for csv / markdown / json, a rich table for table."""
    if fmt is Format.json:
        return to_json({"plans": [compare_record(e) for e in entries]})
    if fmt is Format.csv:
        return records_to_csv([compare_record(e) for e in entries], CSV_COLUMNS)
    columns, rows = side_by_side(entries)
    if fmt is Format.markdown:
        return records_to_markdown(rows, columns)
    return records_to_table(rows, columns, "pdplan compare")
