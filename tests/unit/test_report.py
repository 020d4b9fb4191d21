"""pdplan.report: the optimise reports (table, CSV, Markdown, JSON) of a synthetic PlanResult."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest
from rich.console import Group
from support.plan_fixture import baseline, minimal_result, pick, plan_result, runner_up

from pdplan.report import common as c
from pdplan.report import optimize_renderable, render_optimize, to_csv, to_markdown, to_text
from pdplan.report.render import Format
from pdplan.search.inputs_record import SearchAssumptions, SearchInputs

SECTIONS = [
    "## Question",
    "## Inputs and their sources",
    "## Assumed efficiencies",
    "## Recommended plan and why",
    "## Alternatives",
    "## Pareto front",
    "## Sensitivity",
    "## Warnings",
    "## Method",
]


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize("fmt", ["csv", "markdown", "json", Format.csv])
def test_render_optimize_text_formats(fmt: str) -> None:
    assert isinstance(render_optimize(plan_result(), fmt), str)


def test_render_optimize_table_is_renderable() -> None:
    assert isinstance(render_optimize(plan_result(), "table"), Group)
    with pytest.raises(ValueError, match="yaml"):
        render_optimize(plan_result(), "yaml")


def test_csv_rows_ranked_then_baseline_then_pareto_only() -> None:
    result = plan_result()
    rows = _csv_rows(to_csv(result))
    assert [r["rank"] for r in rows] == ["1", "2", "3", "", ""]
    assert [r["is_baseline"] for r in rows] == ["False", "False", "False", "True", "False"]
    assert [r["is_pareto"] for r in rows] == ["True", "True", "False", "False", "True"]
    assert rows[3]["label"] == baseline().label
    assert rows[3]["prefill_gpu"] == ""
    assert rows[3]["colocated_count"] == "3"


def test_csv_columns_carry_units_and_full_precision() -> None:
    result = plan_result()
    row = _csv_rows(to_csv(result))[0]
    for column in (
        "goodput_rps",
        "goodput_rps_per_gpu",
        "ttft_p90_s",
        "tpot_p99_s",
        "utilisation_prefill",
        "utilisation_colocated",
        "memory_headroom_decode_bytes",
        "cost_usd_per_hour",
        "exact",
    ):
        assert column in row
    assert float(row["goodput_rps_per_gpu"]) == result.best.goodput_rps_per_gpu  # repr round-trips exactly
    assert float(row["ttft_p90_s"]) == 0.8742
    assert float(row["memory_headroom_decode_bytes"]) == result.best.memory_headroom["decode"]
    screened = _csv_rows(to_csv(result))[2]
    assert screened["cost_usd_per_hour"] == ""
    assert screened["exact"] == "False"
    assert screened["warnings"] == "h20 kernel table derived from h100-sxm"


def test_markdown_sections_in_order() -> None:
    text = to_markdown(plan_result())
    positions = [text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert text.startswith("# Capacity review: llama-3.1-70b\n")
    assert text.endswith("\n")
    assert not text.endswith("\n\n")


def test_markdown_content() -> None:
    text = to_markdown(plan_result())
    assert "disaggregated / colocated = 1.81x goodput per GPU" in text
    assert "h20 **not calibrated**" in text  # uncalibrated kernel table named in the assumptions
    assert "h20 has no price" in text
    assert "plan 3 is a screened estimate" in text
    assert "| 3* |" in text
    assert "clipped at the model's 131072-token context" in text
    assert "hardware_db/gpus/h100-sxm.yaml" in text
    assert "3f1c9a0e5b7d" in text
    assert "P90 874.2" in text
    assert "31.4 GiB" in text
    assert "$36.00 per hour" in text
    assert "+6.7%" in text  # pick vs runner-up on goodput per GPU
    assert "| link bandwidth x0.5 | 9.10 | -5.2% |" in text


def test_markdown_is_deterministic_and_has_no_wall_time() -> None:
    result = plan_result()
    assert to_markdown(result) == to_markdown(result)
    faster = replace(result, search=replace(result.search, seconds=99.5))
    assert to_markdown(faster) == to_markdown(result)


def test_markdown_renders_new_keys_generically(monkeypatch: pytest.MonkeyPatch) -> None:
    # a key the inputs / assumptions records write that the Markdown has never seen
    result = plan_result()
    inputs = {**result.inputs.to_document(), "zeta_option": 7, "caches": {"a": {"size_bytes": 1.5, "on": True}}}
    assumptions = {**result.assumptions.to_document(), "new_convention": "B"}
    monkeypatch.setattr(SearchInputs, "to_document", lambda self: inputs)
    monkeypatch.setattr(SearchAssumptions, "to_document", lambda self: assumptions)
    text = to_markdown(result)
    assert "- zeta_option: 7" in text
    assert "### Caches" in text
    assert "| a | yes | 1.5 |" in text
    assert "- new_convention: B" in text


def test_markdown_minimal_result() -> None:
    text = to_markdown(minimal_result())
    assert text.startswith("# Capacity review: llama-3.1-70b\n")
    assert "no colocated baseline to compare with" in text
    assert "only plan that meets the SLO" in text
    assert "None: the recommended plan is the only feasible one." in text
    assert "## Pareto front\n\nNot computed." in text
    assert "## Sensitivity\n\nNot computed." in text
    assert "## Warnings\n\nNone." in text


def test_markdown_cost_objective_says_lower_is_better() -> None:
    # at a target rate the cost objective ranks by $/h (issue #12 item 6: the words follow the objective's name,
    # not the free-text objective line); within a budget it ranks by goodput per $/h, higher is better
    result = replace(plan_result(), objective_key="cost", rate_target_rps=9.0)
    text = to_markdown(result)
    assert "ranks first on cost per hour: $36.00 against $42.00" in text
    assert "lower is better" in text
    budget = to_markdown(replace(plan_result(), objective_key="cost"))
    assert "ranks first on goodput per $/h (req/s per $/h)" in budget


def test_table_text() -> None:
    text = to_text(optimize_renderable(plan_result()), width=220)
    assert "objective: gpus; 4,312 candidates" in text
    assert "disaggregated / colocated = 1.81x goodput per GPU" in text
    assert "baseline" in text
    assert "3*" in text
    assert "screened estimate" in text
    assert "Pareto front" in text
    assert "recommended" in text
    assert "warning: h20 has no price" in text


def test_table_top_limits_plans() -> None:
    text = to_text(optimize_renderable(plan_result(), top=1), width=220)
    assert runner_up().label not in text.split("Pareto front")[0]
    assert pick().label in text


def test_json_document() -> None:
    doc = json.loads(render_optimize(plan_result(), "json"))  # type: ignore[arg-type]
    assert doc["plans"][0]["goodput_rps"] == 9.6
    assert doc["search"]["candidates"] == 4312
    assert doc["rate_curve"][-1]["ttft_at_percentile_s"] is None  # inf → null
    assert doc["baseline_ratio"] == pytest.approx(0.8 / (5.3 / 12))


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "n/a"), (float("nan"), "n/a"), (float("inf"), "inf"), (1234.567, "1,234.57"), (-0.004, "-0.00")],
)
def test_fixed(value: float | None, text: str) -> None:
    assert c.fixed(value, 2) == text


def test_unit_formatters() -> None:
    assert c.ms(0.87424) == "874.2"
    assert c.pct(0.9003) == "90.0%"
    assert c.gib(6.25 * 2**30) == "6.2 GiB"  # round-half-even of 6.25
    assert c.usd(None) == "n/a"
    assert c.usd(3.0) == "$3.00"
    assert c.times(1.8113) == "1.81x"
    assert c.signed_pct(0.155) == "+15.5%"
    assert c.signed_pct(-0.03) == "-3.0%"
    assert c.signed_pct(None) == "n/a"
    assert c.relative_change(1.0, 0.0) is None
