"""``pdplan evaluate``: JSON keys (docs/architecture.md §4), overrides, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdplan.cli import run

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--model", "llama-3.1-8b", "--tp", "1", "--isl", "1024", "--osl", "128"]


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    code = run(["evaluate", *args, "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0, out
    doc: dict[str, object] = json.loads(out)
    return doc


def test_default_scenario_keys(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys)
    for key in (
        "goodput_rps",
        "goodput_rps_per_gpu",
        "num_gpus",
        "binding_constraint",
        "convention",
        "warnings",
        "utilisation",
    ):
        assert key in doc
    assert doc["num_gpus"] == 12


def test_rate_adds_latency_objects(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, *FAST, "--rate", "5")
    for key in ("ttft_s", "tpot_s"):
        summary = doc[key]
        assert isinstance(summary, dict)
        assert set(summary) >= {"mean", "p50", "p90", "p99"}
        assert summary["p50"] <= summary["p90"] <= summary["p99"]
    assert 0.0 <= float(doc["attainment"]) <= 1.0  # type: ignore[arg-type]


def test_concurrency_closed_loop(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, *FAST, "--concurrency", "8")
    assert {"ttft_s", "tpot_s", "attainment", "throughput_rps"} <= set(doc)


def test_overrides_reach_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(
        capsys, *FAST, "--xpyd", "2P1D", "--ttft-slo", "400ms", "--link", "roce-100g", "--granularity", "request"
    )
    assert doc["num_gpus"] == 3
    assert doc["link"] == "roce-100g"
    co = _json(capsys, *FAST, "--colocated", "2", "--scheduler", "prefill-first")
    assert co["mode"] == "colocated"
    assert co["num_gpus"] == 2


def test_example_file_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["evaluate", str(ROOT / "examples/fp8-h200.yaml")]) == 0
    assert "goodput_rps" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ["--xpyd", "2X1D"],
        ["--gpu", "h1000"],
        ["--granularity", "page"],
        ["--ttft-slo", "2 parsec"],
        ["--rate", "-1"],
        [str(ROOT / "pyproject.toml")],
        ["--dtype", "fp4"],
    ],
)
def test_bad_input_exits_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["evaluate", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:")
    assert "Traceback" not in err


def test_infeasible_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["evaluate", "--gpu", "h100-sxm", "--tp", "1"]) == 3  # 70B does not fit one GPU
    assert "does not fit" in capsys.readouterr().err
    assert run(["evaluate", *FAST, "--ttft-slo", "1ms"]) == 3
    assert run(["evaluate", *FAST, "--rate", "1e5"]) == 3


def test_concurrency_disaggregated_moe(capsys: pytest.CaptureFixture[str]) -> None:
    """``--concurrency`` on an xPyD MoE deployment (attention DP + EP prefill, TP + EP decode): the benchmark closed
    loop of benchmark/disaggregated_loop.py reports the engine's tool, C, and TTFT ≥ the prompt's own prefill."""
    doc = _json(
        capsys,
        *("--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--xpyd", "1P1D", "--isl", "2048", "--osl", "256"),
        *("--prefill-tp", "1", "--prefill-dp", "2", "--prefill-ep", "2", "--decode-tp", "2", "--decode-ep", "2"),
        *("--dtype", "fp8", "--kv-dtype", "fp8", "--engine", "sglang", "--concurrency", "32"),
    )
    loop = doc["closed_loop"]
    assert isinstance(loop, dict)
    assert loop["tool"] == "sglang.bench_serving"
    assert loop["concurrency"] == 32
    assert doc["prefill"] == {"gpu": "h100-sxm", "tp": 1, "pp": 1, "count": 1, "dp": 2, "ep": 2, "expert_gather": False}
    assumptions = doc["assumptions"]
    assert isinstance(assumptions, dict)
    assert loop["mean_ttft_s"] >= assumptions["mean_prefill_s"]
    assert doc["ttft_s"]["mean"] == loop["mean_ttft_s"]  # type: ignore[index]
    assert 0.0 < loop["mean_tpot_s"] < 1.0


def test_constant_arrivals_lower_the_ttft_near_saturation(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A workload with ``arrival: constant``: at the same rate near the prefill pool's limit its P90 TTFT is below
    Poisson's (no bursts to queue behind), and the report states the process; a Poisson report does not."""
    small = (ROOT / "tests/data/small_scenario.yaml").read_text()
    assert "routing: least-work\nworkload:\n" in small
    for arrival in ("poisson", "constant"):
        text = small.replace("routing: least-work\n", "routing: random\n").replace(
            "workload:\n", f"workload:\n  arrival: {arrival}\n"
        )
        (tmp_path / f"{arrival}.yaml").write_text(text)
    poisson = _json(capsys, str(tmp_path / "poisson.yaml"), "--xpyd", "1P4D")
    assert poisson["stability_binding"] == "prefill utilisation"
    rate = str(0.9 * float(poisson["stability_limit_rps"]))  # type: ignore[arg-type]
    at = {
        a: _json(capsys, str(tmp_path / f"{a}.yaml"), "--xpyd", "1P4D", "--rate", rate) for a in ("poisson", "constant")
    }
    p90 = {a: float(doc["ttft_s"]["p90"]) for a, doc in at.items()}  # type: ignore[index]
    assert p90["constant"] < 0.8 * p90["poisson"], p90
    assert "arrival_process" not in at["poisson"]["assumptions"]  # type: ignore[operator]
    words = at["constant"]["assumptions"]["arrival_process"]  # type: ignore[index]
    assert words.startswith("constant spacing (c_a² 0); prefill waits G/G-corrected"), words
    assert run(["evaluate", str(tmp_path / "constant.yaml"), "--xpyd", "1P4D", "--rate", rate, "-f", "markdown"]) == 0
    assert "| arrival_process | constant spacing (c_a² 0)" in capsys.readouterr().out
