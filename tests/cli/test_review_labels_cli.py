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


def test_cost_why_not_reasons_are_in_dollars(cli: Cli) -> None:
    # Catalogue midpoints: A100-SXM-80GB (0.80 + 3.00) / 2 = $1.90/GPU-h, H100-SXM (1.90 + 5.00) / 2 = $3.45/GPU-h.
    # The pick is one colocated A100 ($1.90/h); colocated H100 TP2 costs at least 2 x $3.45 = $6.90/h.
    out = cli(
        "optimize", SMALL, "--gpu", "h100-sxm,a100-sxm-80gb", "--rate", "2", "--objective", "cost", "--format", "json"
    )
    assert out.code == 0, out.err
    doc = json.loads(out.out)
    assert doc["plans"][0]["cost_usd_per_hour"] == pytest.approx(1.90)
    rows = {(r["role"], r["gpu"], r["tp"]): r["reason"] for r in doc["why_not"]}
    assert rows[("colocated", "h100-sxm", 2)] == (
        "feasible but outranked: cheapest $6.90/h (screened) against the pick's $1.90/h"
    )


def test_moe_why_not_rows_name_their_dp_and_ep() -> None:
    # one row per instance type: DeepSeek-V3's types of one GPU and TP differ in attention DP and EP
    report = json.loads((ROOT / "tests" / "golden" / "examples" / "deepseek-v3-wide-ep.json").read_text())
    keys = [
        (r["role"], r["gpu"], r["tp"], r["pp"], r["dp"], r["ep"], r.get("expert_gather")) for r in report["why_not"]
    ]
    assert len(keys) == len(set(keys))
    assert any(r["dp"] == 8 and r["ep"] == 8 and r["stage"] == "space" for r in report["why_not"])  # TP1 DP8 EP8


def test_exit_3_names_the_closest_plan_and_its_miss(cli: Cli) -> None:
    import re

    slow = cli("optimize", SMALL, "--ttft-slo", "10ms")
    assert slow.code == 3
    found = re.search(
        r"closest: (.+?), TTFT P90 ([\d.,]+) ms against the SLO's 10\.0 ms .*\(([\d.]+) % over\)", slow.err
    )
    assert found is not None, slow.err
    assert "TP" in found.group(1)
    ttft_ms, over = float(found.group(2).replace(",", "")), float(found.group(3))
    assert over == pytest.approx(
        (ttft_ms / 10.0 - 1.0) * 100.0, abs=0.6
    )  # 75.9 ms (shown to 0.05 ms) against 10 ms: 659 % over
    far = cli("optimize", SMALL, "--rate", "500")
    assert far.code == 3
    found = re.search(r"closest: .+ at ([\d.]+) req/s, ([\d.]+) % short", far.err)
    assert found is not None, far.err
    assert float(found.group(2)) == pytest.approx((1.0 - float(found.group(1)) / 500.0) * 100.0, abs=0.06)
