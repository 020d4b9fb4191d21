"""`pdplan optimize` flags for the search block (--max-instances, --pp, --percentile) and the capacity-review flags
(--headroom, --redundancy, --price, --budget-usd-per-hour) on the command line, with their bad-input exits."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli_result import CliResult

SMALL = str(Path(__file__).parents[1] / "data" / "small_scenario.yaml")
Cli = Callable[..., CliResult]


def _doc(cli: Cli, *args: str) -> dict[str, Any]:
    result = cli("optimize", SMALL, "--format", "json", *args)
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(result.out)
    return doc


def test_max_instances_flag_bounds_the_search(cli: Cli) -> None:
    doc = _doc(cli, "--max-instances", "2")
    assert doc["inputs"]["search_space"]["max_instances"] == 2
    for plan in doc["plans"]:
        for role in ("prefill", "decode", "colocated"):
            assert plan[role] is None or plan[role]["count"] <= 2


@pytest.mark.xdist_group("optimize-small-p99")
def test_percentile_flag_sets_the_slo_percentile(cli_shared: Cli) -> None:
    doc = _doc(cli_shared, "--percentile", "99", "--max-instances", "2")
    assert doc["inputs"]["slo"]["percentile"] == 99
    assert doc["slo_percentile"] == 99


def test_pp_flag_searches_only_that_degree(cli: Cli) -> None:
    doc = _doc(cli, "--pp", "2", "--max-instances", "2")
    for plan in doc["plans"]:
        for role in ("prefill", "decode", "colocated"):
            assert plan[role] is None or plan[role]["pp"] == 2


def test_headroom_redundancy_price_and_budget_flags(cli: Cli) -> None:
    doc = _doc(cli, "--headroom", "0.2", "--redundancy", "n+1", "--price", "h100-sxm=2", "--budget-usd-per-hour", "16")
    assert doc["planning"]["headroom"] == 0.2
    assert doc["planning"]["redundancy"] == "n+1"
    assert doc["planning"]["budget_usd_per_hour"] == 16
    assert doc["inputs"]["gpus"]["h100-sxm"]["price_usd_per_gpu_hour"] == 2
    for plan in doc["plans"]:
        assert plan["cost_usd_per_hour"] == plan["num_gpus"] * 2
        assert plan["cost_usd_per_hour"] <= 16


def test_table_prints_the_planning_margins(cli: Cli) -> None:
    result = cli("optimize", SMALL, "--headroom", "0.2", "--max-instances", "2")
    assert result.code == 0
    assert "headroom 20%" in result.out
    assert "$/h" in result.out


def test_bad_planning_values_exit_2(cli: Cli) -> None:
    for args in (
        ("--price", "h100-sxm"),
        ("--price", "h100-sxm=-1"),
        ("--price", "nosuchgpu=2"),
        ("--redundancy", "n+2"),
        ("--headroom", "-0.5"),
    ):
        result = cli("optimize", SMALL, *args)
        assert result.code == 2, (args, result.err)


def test_max_instances_is_refused_by_evaluate(cli: Cli) -> None:
    result = cli("evaluate", SMALL, "--max-instances", "2")
    assert result.code == 2
    assert "--max-instances" in result.err


def test_percentile_and_pp_apply_to_evaluate(cli: Cli) -> None:
    result = cli("evaluate", SMALL, "--percentile", "99", "--format", "json")
    assert result.code == 0, result.err
    assert '"percentile": 99' in result.out


def test_evaluate_takes_price_and_reports_the_cost(cli: Cli) -> None:
    """#12 (cost): ``--price`` on evaluate as on optimize; the $/h in the JSON, the table and the Markdown."""
    result = cli("evaluate", SMALL, "--format", "json", "--price", "h100-sxm=2")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["cost_usd_per_hour"] == doc["num_gpus"] * 2
    assert doc["price_usd_per_gpu_hour"] == {"h100-sxm": 2}
    assert doc["goodput_rps_per_usd_hour"] == doc["goodput_rps"] / (doc["num_gpus"] * 2)
    table = cli("evaluate", SMALL, "--price", "h100-sxm=2")
    assert table.code == 0, table.err
    assert "cost_usd_per_hour" in table.out
    assert f"${doc['num_gpus'] * 2:,.2f}" in table.out
    markdown = cli("evaluate", SMALL, "--format", "markdown", "--price", "h100-sxm=2")
    assert f"${doc['num_gpus'] * 2:,.2f} per hour" in markdown.out


def test_evaluate_price_flag_is_optimize_s(cli: Cli) -> None:
    import typer.main

    from pdplan.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    helps = set()
    for name in ("optimize", "evaluate"):
        ctx = commands[name].make_context(name, [], resilient_parsing=True)
        helps |= {p.get_help_record(ctx) for p in commands[name].params if "--price" in p.opts}
    assert len(helps) == 1
    for args in (("--price", "h100-sxm"), ("--price", "nosuchgpu=2")):
        assert cli("evaluate", SMALL, *args).code == 2, args


@pytest.mark.slow
@pytest.mark.xdist_group("optimize-small-p99")
def test_latency_columns_follow_the_slo_percentile(cli_shared: Cli) -> None:
    """#12 item 2: at ``--percentile 99`` the binding reads "TTFT at P99", so the latency columns are the P99 ones (one
    run per format, shared with the other tests of the same command line)."""
    doc = _doc(cli_shared, "--percentile", "99", "--max-instances", "2")
    p99_ms = f"{doc['plans'][0]['ttft_s']['p99'] * 1e3:,.1f}"
    for fmt in ("table", "markdown"):
        result = cli_shared("optimize", SMALL, "--percentile", "99", "--max-instances", "2", "--format", fmt)
        assert result.code == 0, result.err
        text = result.out.replace("\n", " ")
        assert "P90" not in text.replace("P90 TTFT", "").replace(", P90 ", ""), fmt
        assert p99_ms in result.out, fmt
    markdown = cli_shared("optimize", SMALL, "--percentile", "99", "--max-instances", "2", "--format", "markdown").out
    assert "TTFT P99 ms" in markdown


def test_a_gpu_of_your_own_says_whose_kernel_table_it_borrows(cli: Cli, tmp_path: Path) -> None:
    """#12 item 8: an uncatalogued GPU borrows the nearest measured table, and every report says from which GPU."""
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    h100 = (Path(__file__).parents[2] / "hardware_db" / "gpus" / "h100-sxm.yaml").read_text()
    (gpus / "h100-nvl.yaml").write_text(h100.replace("name: h100-sxm", "name: h100-nvl", 1))
    said = "kernel table for h100-nvl is not calibrated: its efficiencies are derived from h100-sxm's"
    db = ("--hardware-db", str(tmp_path), "--gpu", "h100-nvl")
    evaluated = cli("evaluate", SMALL, *db, "--format", "json")
    assert evaluated.code == 0, evaluated.err
    assert said in " ".join(json.loads(evaluated.out)["warnings"])
    optimized = cli("optimize", SMALL, *db, "--max-instances", "2")
    assert optimized.code == 0, optimized.err
    assert said in optimized.err
