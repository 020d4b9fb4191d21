"""Capacity-review figures in the optimize reports (issue #25 item 4), each against a hand-checked number."""

from __future__ import annotations

import csv
import io
import json

from support.plan_fixture import plan_result

from pdplan.io.billing_periods import billing_periods, per_month, per_year
from pdplan.report import optimize_renderable, render_optimize, to_csv, to_markdown, to_text


def test_billing_periods_are_730_and_8760_hours() -> None:
    periods = billing_periods()
    assert periods.hours_per_month == 730  # 8,760 / 12
    assert periods.hours_per_year == 8760  # 365 x 24
    assert per_month(None) is None


def test_pick_costs_per_month_and_year_in_every_format() -> None:
    # The pick: 12 H100 at $3/GPU-h = $36/h; x 730 h = $26,280/month; x 8,760 h = $315,360/year.
    result = plan_result()
    assert per_month(36.0) == 26280.0
    assert per_year(36.0) == 315360.0
    doc = json.loads(str(render_optimize(result, "json")))
    assert doc["plans"][0]["cost_usd_per_month"] == 26280.0
    assert doc["plans"][0]["cost_usd_per_year"] == 315360.0
    row = next(csv.DictReader(io.StringIO(to_csv(result))))
    assert float(row["cost_usd_per_month"]) == 26280.0
    assert float(row["cost_usd_per_year"]) == 315360.0
    markdown = to_markdown(result)
    assert "$36.00 per hour, $26,280.00 per month (730 h), $315,360.00 per year (8,760 h)" in markdown
    text = to_text(optimize_renderable(result))
    assert "$26,280.00" in text
    assert "$315,360.00" in text
