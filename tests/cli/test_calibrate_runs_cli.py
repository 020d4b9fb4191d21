"""`pdplan calibrate` on benchmark results (docs/architecture.md §4, "calibrate from benchmarks"): the round trip (runs
generated from a known engine profile → the fit recovers its terms → the written profile works as --engine FILE),
--check keys, refusals and exit codes."""

import json
from pathlib import Path

import pytest
import yaml

from pdplan.calibrate.benchmarks import engines_wired, predict_runs, profile_yaml, with_terms
from pdplan.cli import run
from pdplan.io.catalog import open_catalog
from pdplan.specs.benchmark import BenchmarkRun

DATA = Path(__file__).parents[1] / "data" / "benchmarks"
needs_engines = pytest.mark.skipif(not engines_wired(), reason="scenarios carry no engine profile in this build")
TRUTH = {"step_s": 1.5e-3, "collective_s": 1.5e-5, "launch_gap_s_per_layer": 1.0e-5, "request_s": 0.04}
# (model, tp, isl, osl, concurrency): three depths (32, 64, 80 layers), TP 1 and TP > 1
POINTS = [
    ("llama-3.1-8b", 1, 1024, 128, 4),
    ("llama-3.1-8b", 2, 2048, 256, 16),
    ("qwen3-32b", 2, 1024, 256, 8),
    ("qwen3-32b", 4, 4096, 128, 32),
    ("llama-3.1-70b", 4, 1024, 512, 4),
    ("llama-3.1-70b", 8, 2048, 128, 16),
]


def _synthetic_csv(path: Path, tmp_path: Path) -> None:
    """Benchmark rows 'measured' on a vLLM whose overheads are TRUTH (pdplan's own predictions, so the fit's only
    unknowns are the four terms)."""
    catalog = open_catalog()
    truth = tmp_path / "truth.yaml"
    truth.write_text(profile_yaml(with_terms(catalog.engine("vllm"), TRUTH)))
    runs = [
        BenchmarkRun(
            engine="vllm", gpu="h100-sxm", model=m, tp=tp, isl=i, osl=o, concurrency=c, ttft_s=1, tpot_s=1, source="x"
        )
        for m, tp, i, o, c in POINTS
    ]
    ttft, tpot = predict_runs(runs, str(truth), catalog)
    lines = ["engine,gpu,model,tp,isl,osl,concurrency,ttft_ms,tpot_ms"]
    for (m, tp, i, o, c), a, b in zip(POINTS, ttft, tpot, strict=True):
        lines.append(f"vllm,h100-sxm,{m},{tp},{i},{o},{c},{float(a) * 1e3!r},{float(b) * 1e3!r}")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
@needs_engines
def test_round_trip_recovers_the_terms_and_the_profile_works_as_engine_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path, out = tmp_path / "runs.csv", tmp_path / "my-vllm.yaml"
    _synthetic_csv(csv_path, tmp_path)
    capsys.readouterr()
    assert run(["calibrate", str(csv_path), "-o", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n"] == len(POINTS)
    assert doc["mape"] < 1.0  # predicted back
    for name, value in TRUTH.items():
        term = doc["terms"][name]
        assert term["status"] == "fitted"
        assert term["value_s"] == pytest.approx(value, rel=0.1), name
        assert term["std_s"] is not None
    profile = yaml.safe_load(out.read_text())
    assert profile["fitted"] is True
    assert profile["name"] == "my-vllm"
    assert "fitted by pdplan calibrate on" in profile["overheads"]["step_s"]["source"]
    assert f"{len(POINTS)} rows" in profile["overheads"]["step_s"]["source"]
    # usable as --engine FILE, and --check with it predicts the runs back
    argv = ["evaluate", "--engine", str(out), "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--colocated", "1"]
    assert run([*argv, "--isl", "1024", "--osl", "128", "--concurrency", "4", "--format", "json"]) == 0
    capsys.readouterr()
    assert run(["calibrate", str(csv_path), "--check", "--engine", str(out), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["mape"] < 1.0


@needs_engines
def test_check_of_a_vllm_json_reports_per_row_predictions(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["calibrate", str(DATA / "vllm_bench_serve.json"), "--check", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"mape", "n", "rows", "ttft", "tpot", "engine"} <= set(doc)
    row = doc["rows"][0]
    assert {"predicted_ttft_ms", "predicted_tpot_ms", "ttft_error_pct", "tpot_error_pct"} <= set(row)
    assert row["ttft_error_pct"] == pytest.approx((row["predicted_ttft_ms"] / row["ttft_ms"] - 1) * 100)
    assert doc["engine"]["name"] == "vllm"


def test_a_fit_with_fewer_runs_than_terms_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["calibrate", str(DATA / "vllm_bench_serve.json")]) == 2
    assert "1 benchmark run(s) cannot fit 6 closed-loop terms" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["vllm_bench_serve_no_gpu.json", "--check", "--engine", "vllm"], "gpu: record 1"),
        (["vllm_open_loop.json", "--check", "--gpu", "h100-sxm", "--tp", "1", "--engine", "vllm"], "open-loop"),
        (["sglang_bench_serving.jsonl", "--check", "--engine", "no-such-engine", "--gpu", "h100-sxm"], "engine"),
    ],
)
def test_bad_benchmark_inputs_are_exit_2(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["calibrate", str(DATA / argv[0]), *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert words in err
    assert "Traceback" not in err


def test_fitting_runs_of_two_engines_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["calibrate", str(DATA / "benchmarks.csv")]) == 2
    assert "one engine" in capsys.readouterr().err
