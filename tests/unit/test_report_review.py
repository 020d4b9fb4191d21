"""Capacity-review figures in the optimize reports (issue #25 item 4), each against a hand-checked number."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest
from support.plan_fixture import plan_result, runner_up

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.io.billing_periods import billing_periods, per_month, per_year
from pdplan.report import common as c
from pdplan.report import optimize_renderable, render_optimize, to_csv, to_markdown, to_text
from pdplan.search.growth import growth_rows, parse_growth
from pdplan.search.plans import GrowthRow, Plan, PlanResult


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


def _grown(result: PlanResult, growth: float, rate: float, plan: Plan | None, why: str | None = None) -> PlanResult:
    return replace(result, growth=(*result.growth, GrowthRow(growth, rate, plan, why)))


def test_growth_rows_replan_at_the_grown_rate() -> None:
    # A budget search: growth is measured from the pick's goodput, 9.6 req/s; +50 % = 14.4 req/s.
    result = plan_result()
    asked: list[float] = []

    def replan(rate: float) -> PlanResult:
        asked.append(rate)
        if rate > 15:
            raise NoFeasiblePlanError("no candidate reaches it", binding_constraint="TTFT at P90")
        return replace(result, plans=(runner_up(),))

    rows = growth_rows(result, parse_growth("50,100"), replan)
    assert asked == pytest.approx([14.4, 19.2])
    assert rows[0].plan == runner_up()
    assert rows[1].plan is None
    assert rows[1].infeasible == "no candidate reaches it"
    with pytest.raises(SpecError, match="--growth"):
        parse_growth("20,-5")


def test_growth_table_in_every_format() -> None:
    # +50 %: the runner-up, 3P2D on 14 H100 = 2 GPUs more than the pick's 12, $42/h = $30,660/month.
    result = _grown(plan_result(), 0.5, 14.4, runner_up())
    result = _grown(result, 1.0, 19.2, None, "no candidate reaches 19.2 req/s")
    cells = c.growth_cells(result, result.growth[0])
    assert cells[:7] == ["+50.0%", "14.40", runner_up().label, "14", "+2", "$42.00", "$30,660.00"]
    markdown = to_markdown(result)
    assert "## Growth" in markdown
    assert "| +50.0% | 14.40 | 3P2D h100-sxm TP2 / h100-sxm TP4 layer | 14 | +2 | $42.00 | $30,660.00 |" in markdown
    assert (
        "| +100.0% | 19.20 | no feasible plan | n/a | n/a | n/a | n/a | no candidate reaches 19.2 req/s |" in markdown
    )
    assert "Growth" in to_text(optimize_renderable(result))
    doc = json.loads(str(render_optimize(result, "json")))
    assert doc["growth"][0]["num_gpus"] == 14
    assert doc["growth"][0]["cost_usd_per_month"] == 30660.0
    assert doc["growth"][1]["infeasible"] == "no candidate reaches 19.2 req/s"
    rows = [r for r in csv.DictReader(io.StringIO(to_csv(result))) if r["row_kind"] == "growth"]
    assert [r["growth"] for r in rows] == ["0.5", "1.0"]
    assert rows[0]["num_gpus"] == "14"
    assert rows[1]["binding_constraint"] == "no feasible plan: no candidate reaches 19.2 req/s"


def test_csv_rows_carry_context_kind_and_integer_columns() -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(plan_result()))))
    assert [r["row_kind"] for r in rows] == ["ranked", "ranked", "ranked", "baseline", "pareto"]
    assert [r["rank"] for r in rows] == ["1", "2", "3", "", ""]  # empty, never 3.0 or nan
    first = rows[0]
    assert (first["model"], first["workload"], first["engine"]) == ("llama-3.1-70b", "chat", "vllm")
    assert (float(first["slo_ttft_s"]), float(first["slo_tpot_s"]), float(first["slo_attainment"])) == (2, 0.1, 0.9)
    assert float(first["headroom"]) == 0.0
    assert first["prefill_tp"] == "4"
    assert first["num_gpus"] == "12"
    assert first["memory_headroom_decode_bytes"] == str(25 * 2**28)  # 6.25 GiB, whole bytes
    assert rows[3]["colocated_count"] == "3"
    assert rows[3]["prefill_tp"] == ""
