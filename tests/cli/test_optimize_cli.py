"""`pdplan optimize` (docs/architecture.md §4): JSON contract, CLI equals the library, exit codes, reports written
whole."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli_result import CliResult
from support.optimized import Optimized

from pdplan.cli import run
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.optimize import optimize

SMALL = str(Path(__file__).parents[1] / "data" / "small_scenario.yaml")
PLAN_KEYS = {
    "mode",
    "prefill",
    "decode",
    "granularity",
    "goodput_rps",
    "goodput_rps_per_gpu",
    "num_gpus",
    "ttft_p90_s",
    "tpot_p90_s",
}


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert run(["optimize", SMALL, *args, "--format", "json"]) == 0
    doc: dict[str, object] = json.loads(capsys.readouterr().out)
    return doc


def test_json_has_the_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys)
    plans = doc["plans"]
    assert isinstance(plans, list)
    assert plans
    for plan in plans:
        assert set(plan) >= PLAN_KEYS
        for role in ("prefill", "decode"):
            if plan["mode"] == "disaggregated":
                assert {"gpu", "tp", "count"} <= set(plan[role])
    assert {"candidates", "seconds"} <= set(doc["search"])  # type: ignore[arg-type]
    assert doc["baseline"] is not None


@pytest.mark.slow
def test_cli_equals_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "--gpus", "8")
    api = optimize(load_scenario(SMALL), catalog=open_catalog(), budget_gpus=8).to_document()
    for cli_plan, api_plan in zip(doc["plans"], api["plans"], strict=True):  # type: ignore[arg-type]
        assert cli_plan["label"] == api_plan["label"]
        assert cli_plan["goodput_rps"] == pytest.approx(api_plan["goodput_rps"], rel=1e-9)
        assert cli_plan["ttft_p90_s"] == pytest.approx(api_plan["ttft_p90_s"], rel=1e-9)
    assert doc["search"]["candidates"] == api["search"]["candidates"]  # type: ignore[index]


@pytest.mark.slow
def test_results_are_identical_run_to_run(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = _json(capsys, "--rate", "40"), _json(capsys, "--rate", "40")
    for doc in (first, second):
        doc["search"]["seconds"] = 0.0  # type: ignore[index]
    assert first == second


def test_rate_objective_meets_the_target_at_the_fewest_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "--rate", "60")
    plans = doc["plans"]
    assert all(p["goodput_rps"] >= 60.0 for p in plans)  # type: ignore[union-attr]
    gpus = [p["num_gpus"] for p in plans]  # type: ignore[union-attr]
    assert gpus == sorted(gpus)


def test_no_feasible_plan_is_exit_3_naming_the_constraint(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["optimize", SMALL, "--ttft-slo", "1ms"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "TTFT" in err[0]


def test_unreachable_rate_names_the_closest_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["optimize", SMALL, "--rate", "100000"]) == 3
    err = capsys.readouterr().err
    assert "closest" in err


@pytest.mark.parametrize(
    "args", [["--objective", "speed"], ["--gpus", "8", "--rate", "3"], ["--rate", "-1"], ["--gpu", "h1OO"]]
)
def test_bad_input_is_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["optimize", SMALL, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error:")


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_reports_are_written_whole(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"report.{fmt}"
    assert run(["optimize", SMALL, "--format", fmt, "-o", str(out)]) == 0
    text = out.read_text()
    assert "h100-sxm" in text
    assert not list(tmp_path.glob(".*tmp"))
    capsys.readouterr()


@pytest.mark.xdist_group("optimize-small-markdown")
def test_markdown_is_a_capacity_review(cli_shared: Callable[..., CliResult]) -> None:
    result = cli_shared("optimize", SMALL, "--format", "markdown")  # the run test_report_plot.py reads too
    assert result.code == 0
    text = result.out
    for heading in ("Question", "Inputs", "Recommended plan", "Alternatives", "Pareto", "Sensitivity"):
        assert heading in text


EXAMPLE_DIR = Path(__file__).parents[2] / "examples"
EXAMPLES = sorted(EXAMPLE_DIR.glob("*.yaml"))
"""Every example, the PrfaaS ones included (their search is pdplan.search.prfaas)."""


@pytest.mark.slow
def test_optimize_searches_a_prfaas_block(capsys: pytest.CaptureFixture[str]) -> None:
    """A prfaas: block is searched (issue #14): every plan carries the prfaas object, the table shows its section."""
    example = EXAMPLE_DIR / "prfaas-h200-h20.yaml"
    assert run(["optimize", str(example), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for plan in doc["plans"]:
        assert {
            "threshold_tokens",
            "offload_fraction",
            "link_utilization",
            "remote_instances",
            "remote_ttft_p90_s",
            "local_ttft_p90_s",
        } <= set(plan["prfaas"])
    assert run(["optimize", str(example)]) == 0
    out = capsys.readouterr().out
    assert "Prefill-as-a-Service" in out
    assert "vs homogeneous PD" in out


def test_optimize_prfaas_refuses_what_it_does_not_model(capsys: pytest.CaptureFixture[str]) -> None:
    example = EXAMPLE_DIR / "prfaas-h200-h20.yaml"
    assert run(["optimize", str(example), "--objective", "cost"]) == 2
    assert "not supported with PrfaaS" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.xdist_group("optimized")
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_cli_equals_the_library_for_every_example(
    example: Path, capsys: pytest.CaptureFixture[str], optimized: Optimized
) -> None:
    """`pdplan optimize EXAMPLE --format json` is a view of `pdplan.search.optimize` (same plans, same numbers): the
    command runs here, the library's run of the same example is the one the golden and other tests read."""
    assert run(["optimize", str(example), "--format", "json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = json.loads(json.dumps(optimized(example).to_document()))
    for doc in (cli, api):
        doc["search"]["seconds"] = 0.0
    assert cli == api


@pytest.mark.slow
def test_xpyd_and_colocated_fix_the_instance_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """The shared overrides `--xpyd` / `--colocated` (docs/architecture.md §4) narrow optimize to those counts."""
    doc = _json(capsys, "--xpyd", "2P1D")
    assert {(p["prefill"]["count"], p["decode"]["count"]) for p in doc["plans"]} == {(2, 1)}  # type: ignore[index]
    assert doc["baseline"] is not None  # the baseline still comes from the whole colocated search
    doc = _json(capsys, "--colocated", "2")
    assert {(p["mode"], p["colocated"]["count"]) for p in doc["plans"]} == {("colocated", 2)}  # type: ignore[index]
    assert run(["optimize", SMALL, "--xpyd", "2P1D", "--colocated", "2"]) == 2
