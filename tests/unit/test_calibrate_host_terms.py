"""pdplan calibrate names the host terms it fitted into a kernel table, and warns when the engine profile the table
will run under adds the same host time again (issue #25 item 7; pdplan.calibrate.host_terms)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pdplan.calibrate.phase_times import scaled_table
from pdplan.io.catalog import open_catalog
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.perf.roofline import phase_time

CATALOG = open_catalog()
ROOT = Path(__file__).resolve().parents[2]
STEP_S = 1.12e-3  # the user stack: 1.12 ms of host time per step on top of the shipped H100 kernels
POINTS = [("prefill", 1, 1024), ("prefill", 2, 2048), ("decode", 8, 1024), ("decode", 64, 2048), ("decode", 32, 4096)]


def _steps_csv(path: Path, points: list[tuple[str, int, int]] = POINTS) -> Path:
    """Phase times of Llama-3.1-8B at TP 1: the shipped table's kernels plus exactly ``STEP_S`` per pass."""
    truth = scaled_table(load_kernel_table("h100-sxm"), {"decode_step_overhead_s": STEP_S})
    lines = ["gpu,model,tp,phase,batch,tokens,time_ms"]
    for phase, batch, tokens in points:
        t = phase_time(CATALOG.model("llama-3.1-8b"), CATALOG.gpu("h100-sxm"), truth, phase=phase, batch=batch,  # type: ignore[arg-type]
                       tokens=tokens)  # fmt: skip
        lines.append(f"h100-sxm,llama-3.1-8b,1,{phase},{batch},{tokens},{float(t.time_s[()]) * 1e3!r}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_fit_names_its_step_time_and_the_default_profile_would_add_its_step_s(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """The fit finds the 1.12 ms per step the rows were made with; vLLM's profile (the default) adds its fitted step_s
    of 2.16 ms (pdplan/data/engines/vllm.yaml, fitted jointly on H100 and H200 rows) to every step: 1.12 + 2.16 =
    3.28 ms of host time where the stack has 1.12 ms."""
    table_path = tmp_path / "my-table.yaml"
    result = cli("calibrate", _steps_csv(tmp_path / "runs.csv"), "-o", table_path)
    assert result.code == 0, result.err
    assert "host terms fitted into the table: 1.12 ms per step; not fitted: per all-reduce (needs rows at TP > 1)" in (
        " ".join(result.err.split())
    )
    warning = " ".join(result.err.split()).split("warning: ")[1]
    assert warning.startswith("the vllm (default) engine profile adds its step_s of 2.16 ms to this table's fitted "
                              "1.12 ms per step")  # fmt: skip
    assert CATALOG.engine("vllm").overheads.step_s.value == 2.16e-3
    table = yaml.safe_load(table_path.read_text())
    assert table["framework"]["decode_step_overhead_s"] == pytest.approx(STEP_S, rel=1e-3)
    assert table["sources"]["framework"].startswith("FITTED by pdplan calibrate to 5 phase rows: 1.12 ms per step")


def test_no_warning_under_a_profile_without_host_terms(tmp_path: Path, cli: Callable[..., Any]) -> None:
    result = cli("calibrate", _steps_csv(tmp_path / "runs.csv"), "--engine", "kernels")
    assert result.code == 0, result.err
    assert "1.12 ms per step" in result.err
    assert "warning" not in result.err


def test_prefill_rows_leave_the_step_time_unfitted(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """No decode rows: the per-step time is not a knob; the per-kernel launch gap is, and takes the 1.12 ms per pass
    (1.12 ms / 3.86 µs = 290 kernels: about 9 per layer over 32 layers); vLLM's profile has no launch gap (0 s per
    layer: CUDA graphs), so nothing is counted twice."""
    rows = _steps_csv(tmp_path / "runs.csv", [("prefill", 1, 512), ("prefill", 1, 2048), ("prefill", 4, 1024)])
    result = cli("calibrate", rows, "-o", tmp_path / "t.yaml")
    assert result.code == 0, result.err
    text = " ".join(result.err.split())
    assert (
        "host terms fitted into the table: 3.86 µs per kernel launch; not fitted: per step (needs decode rows)" in text
    )
    assert "ms per step" not in text
    assert "warning" not in text
    assert yaml.safe_load((tmp_path / "t.yaml").read_text())["sources"]["framework"].startswith("ASSUMPTION")


def test_a_profile_fitted_over_a_table_with_host_time_says_they_go_together(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    table_path = tmp_path / "my-table.yaml"
    assert cli("calibrate", _steps_csv(tmp_path / "runs.csv"), "-o", table_path, "--engine", "kernels").code == 0
    run = ROOT / "examples" / "benchmarks" / "vllm-h100" / "vllm-llama-3.1-8b-tp1-c1.json"
    result = cli("calibrate", run, "--gpu", "h100-sxm", "--check", "--kernel-table", table_path)
    assert result.code == 0, result.err
    text = " ".join(result.err.split())
    assert f"the kernel table {table_path} carries 1.12 ms of host time per step" in text
