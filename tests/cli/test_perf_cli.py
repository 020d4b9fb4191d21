"""CLI contract of `pdplan roofline` and `pdplan calibrate` (docs/architecture.md §4): JSON keys, exit codes, -o, and
the roofline's memory fit (the pass's own KV counted)."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pdplan.cli import run

Cli = Callable[..., Any]

ROOFLINE = [
    "roofline",
    "--model",
    "llama-3.1-70b",
    "--gpu",
    "h100-sxm",
    "--tp",
    "4",
    "--phase",
    "decode",
    "--batch",
    "64",
    "--tokens",
    "2048",
]


def test_roofline_json_has_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert run([*ROOFLINE, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"time_s", "bound", "ops"} <= set(doc)
    assert doc["bound"] in {"compute", "memory", "communication", "overhead"}
    assert sum(op["time_s"] for op in doc["ops"]) == pytest.approx(doc["time_s"], rel=1e-9)
    assert {op["op"] for op in doc["ops"]} >= {"attn.qkv_proj", "attn.core", "mlp.gate_up", "tp.allreduce"}


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_roofline_other_formats(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([*ROOFLINE, "--format", fmt]) == 0
    assert "attn.core" in capsys.readouterr().out


def test_roofline_warns_when_the_model_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(
        [
            "roofline",
            "--model",
            "llama-3.1-405b",
            "--gpu",
            "l4",
            "--phase",
            "decode",
            "--batch",
            "1",
            "--tokens",
            "128",
            "--format",
            "json",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert json.loads(captured.out)["fits_in_memory"] is False
    assert "does not fit" in captured.err


def test_roofline_fp8_on_ampere_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(
        [
            "roofline",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "a100-sxm-80gb",
            "--phase",
            "prefill",
            "--batch",
            "1",
            "--tokens",
            "128",
            "--dtype",
            "fp8",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert "fp8" in err[0]


def test_roofline_unknown_model_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run(
            [
                "roofline",
                "--model",
                "llama-3.1-7b",
                "--gpu",
                "h100-sxm",
                "--phase",
                "decode",
                "--batch",
                "1",
                "--tokens",
                "1",
            ]
        )
        == 2
    )
    assert "did you mean" in capsys.readouterr().err


def _measurements(tmp_path: Path) -> Path:
    path = tmp_path / "m.csv"
    path.write_text(
        "gpu,model,tp,phase,batch,tokens,time_ms\n"
        "h100-sxm,llama-3.1-8b,1,prefill,1,2048,70\n"
        "h100-sxm,llama-3.1-8b,1,prefill,4,1024,140\n"
        "h100-sxm,llama-3.1-8b,1,decode,1,1024,7.5\n"
        "h100-sxm,llama-3.1-8b,1,decode,64,1024,12\n"
    )
    return path


def test_calibrate_check_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["calibrate", str(_measurements(tmp_path)), "--check", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"mape", "n", "rows"} <= set(doc)
    assert doc["n"] == 4
    assert {"gpu", "model", "tp", "phase", "batch", "tokens", "time_ms", "predicted_ms", "error_pct"} <= set(
        doc["rows"][0]
    )


def test_calibrate_fit_writes_a_table_that_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fitted.yaml"
    assert run(["calibrate", str(_measurements(tmp_path)), "-o", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert out.is_file()
    # the fitted table is usable by every predicting command
    assert (
        run(["calibrate", str(_measurements(tmp_path)), "--check", "--kernel-table", str(out), "--format", "json"]) == 0
    )
    again = json.loads(capsys.readouterr().out)
    assert again["mape"] == pytest.approx(doc["mape"], rel=1e-6)
    assert run([*ROOFLINE, "--kernel-table", str(out), "--format", "json"]) == 0


def test_calibrate_bad_csv_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("gpu,model,tp\nh100-sxm,llama-3.1-8b,1\n")
    assert run(["calibrate", str(bad), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "missing column" in err[0]


def test_every_predicting_command_takes_a_user_kernel_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A table whose GEMMs run at half the shipped efficiency must lower evaluate's goodput and be accepted by
    optimize and simulate too (the table applies to the GPU its `gpu:` field names)."""
    import yaml

    from pdplan.calibrate.phase_times import scaled_table
    from pdplan.io.kernel_tables import load_kernel_table

    slow = scaled_table(load_kernel_table("h100-sxm"), {"gemm_scale": 0.5, "prefill_attention_scale": 0.5})
    path = tmp_path / "slow-h100.yaml"
    path.write_text(yaml.safe_dump(slow.model_dump(mode="json"), sort_keys=False))
    assert run(["evaluate", "--format", "json"]) == 0
    base = json.loads(capsys.readouterr().out)["goodput_rps"]
    assert run(["evaluate", "--kernel-table", str(path), "--format", "json"]) == 0
    slower = json.loads(capsys.readouterr().out)["goodput_rps"]
    assert slower < base * 0.9
    small = str(Path(__file__).parents[1] / "data" / "small_scenario.yaml")
    assert run(["optimize", small, "--kernel-table", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["plans"]


def test_roofline_counts_the_pass_kv_in_the_memory_fit(cli: Cli) -> None:
    argv = ("roofline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--phase", "decode", "--format", "json")
    huge = cli(*argv, "--batch", "100000", "--tokens", "100000")
    assert huge.code == 0
    doc = json.loads(huge.out)
    assert doc["fits_in_memory"] is False
    assert doc["kv_tokens_needed"] == 10**10 > doc["kv_capacity_tokens"]
    assert "KV tokens" in huge.err
    small = json.loads(cli(*argv, "--batch", "8", "--tokens", "1000").out)
    assert small["fits_in_memory"] is True  # 8,000 tokens against ~460k
