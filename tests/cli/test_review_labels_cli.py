"""optimize and evaluate label the same deployment the same way, and the engine settings are flags (issue #25)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "data" / "small_scenario.yaml"
Cli = Callable[..., Any]


def _deployment_flags(plan: dict[str, Any]) -> list[str]:
    """The evaluate flags of an optimize plan: its deployment and its batch cap."""
    seats = ["--max-num-seqs", str(plan["max_num_seqs"])]
    if plan["mode"] == "colocated":
        co = plan["colocated"]
        return ["--colocated", str(co["count"]), "--tp", str(co["tp"]), "--scheduler", plan["scheduler"], *seats]
    pre, dec = plan["prefill"], plan["decode"]
    return [
        "--xpyd",
        f"{pre['count']}P{dec['count']}D",
        "--prefill-tp",
        str(pre["tp"]),
        "--decode-tp",
        str(dec["tp"]),
        "--granularity",
        plan["granularity"],
        *seats,
    ]


@pytest.mark.parametrize("rate", ["3", "6"])
def test_optimize_and_evaluate_agree_on_binding_and_goodput(cli: Cli, rate: str) -> None:
    # binding_constraint is read at the goodput by both commands; the operating rate's own constraint is
    # operating_binding_constraint in both (optimize used to give the target rate's under binding_constraint)
    opt = cli("optimize", SMALL, "--rate", rate, "--format", "json")
    assert opt.code == 0, opt.err
    for plan in json.loads(opt.out)["plans"][:2]:
        ev = cli("evaluate", SMALL, *_deployment_flags(plan), "--rate", rate, "--format", "json")
        assert ev.code == 0, ev.err
        doc = json.loads(ev.out)
        assert doc["binding_constraint"] == plan["binding_constraint"]
        assert doc["operating_binding_constraint"] == plan["operating_binding_constraint"]
        assert doc["goodput_rps"] == pytest.approx(plan["goodput_rps"], rel=1e-6)
        assert plan["operating_rate_rps"] == float(rate)


def test_the_table_says_which_rate_each_figure_is_at(cli: Cli) -> None:
    out = cli("optimize", SMALL, "--rate", "3").out
    assert "rates: latencies and attainment at the target 3.00 req/s; goodput, output tok/s and the binding" in out


def test_engine_flags_set_the_scenario_keys(cli: Cli) -> None:
    ev = json.loads(cli("evaluate", SMALL, "--max-num-seqs", "64", "--format", "json").out)
    assert ev["assumptions"]["max_num_seqs"] == 64
    opt = cli(
        "optimize",
        SMALL,
        "--rate",
        "2",
        "--max-num-seqs",
        "128",
        "--max-num-batched-tokens",
        "4096",
        "--gpu-memory-utilization",
        "0.8",
        "--format",
        "json",
    )
    assert opt.code == 0, opt.err
    doc = json.loads(opt.out)
    assert {p["max_num_seqs"] for p in doc["plans"]} == {128}  # the export writes each plan's own
    assert doc["assumptions"]["engine_defaults"]["max_num_batched_tokens"] == 4096
    assert doc["assumptions"]["engine_defaults"]["gpu_memory_utilization"] == 0.8
    assert cli("evaluate", SMALL, "--max-num-seqs", "64,128").code == 2  # a list is for optimize


def test_max_model_len_clips_the_workload(cli: Cli) -> None:
    # 1,000 prompt + 100 output tokens = 1,100: every request exceeds 1,050 (exit 2) and none exceeds 1,200
    fixed = ("--isl", "1000", "--osl", "100")
    over = cli("evaluate", SMALL, *fixed, "--max-model-len", "1050")
    assert over.code == 2
    assert "max_model_len 1050" in over.err
    fits = cli("evaluate", SMALL, *fixed, "--max-model-len", "1200")
    assert fits.code == 0, fits.err
    assert "clipped" not in fits.err
