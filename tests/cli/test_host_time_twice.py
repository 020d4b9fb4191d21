"""A use-time warning (issue #25 item 7 follow-up): ``evaluate`` / ``optimize`` with a ``--kernel-table`` whose fit
holds host time per step (``framework.decode_step_overhead_s``, named in ``sources.framework``) under an engine
profile that adds its own fitted ``step_s`` (vLLM: 2.16 ms) say once, on stderr, that the host time is counted twice
and how to avoid it; ``--engine kernels`` (no host terms) or a shipped table (0 s) say nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support.cli_result import CliResult

from pdplan.io.engines import ENGINE_DIR
from pdplan.io.kernel_tables import TABLE_DIR, load_kernel_table
from pdplan.serving.engine_bind import host_time_counted_twice
from pdplan.specs.engine import EngineProfile

FAST = ("--isl", "512", "--osl", "64", "--rate", "1", "--format", "json")
PHRASE = "host time is counted twice"


def _fitted(tmp_path: Path, host_s: float) -> Path:
    """The shipped H100 table with a phase-time fit's per-step host time (the README calibrate example: 0.869 ms)."""
    doc = yaml.safe_load((TABLE_DIR / "h100-sxm.yaml").read_text())
    doc["framework"]["decode_step_overhead_s"] = host_s
    doc["sources"]["framework"] = "FITTED by pdplan calibrate to 40 phase rows: 0.869 ms per step (test copy)"
    path = tmp_path / "h100-fitted.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _profile(name: str) -> EngineProfile:
    return EngineProfile.model_validate(yaml.safe_load((ENGINE_DIR / f"{name}.yaml").read_text()))


def test_the_line_names_both_times_and_the_fix(tmp_path: Path) -> None:
    table = load_kernel_table(_fitted(tmp_path, 0.000869))
    text = host_time_counted_twice([("fitted.yaml", table)], _profile("vllm"), "vllm")
    assert text is not None
    assert "\n" not in text
    for part in ("fitted.yaml", "0.869 ms", "vllm", "2.16 ms", PHRASE, "--engine kernels"):
        assert part in text
    assert host_time_counted_twice([("fitted.yaml", table)], _profile("kernels"), "kernels") is None
    shipped = load_kernel_table(TABLE_DIR / "h100-sxm.yaml")
    assert host_time_counted_twice([("h100-sxm.yaml", shipped)], _profile("vllm"), "vllm") is None


@pytest.mark.parametrize("command", ["evaluate", "optimize"])
def test_evaluate_and_optimize_warn_once(cli: Callable[..., CliResult], tmp_path: Path, command: str) -> None:
    path = _fitted(tmp_path, 0.000869)
    extra = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1")
    if command == "optimize":
        extra += ("--max-instances", "2")
    result = cli(command, "--kernel-table", path, *extra, *FAST)
    assert result.code == 0, result.err
    assert sum(PHRASE in line for line in result.err_lines) == 1
    quiet = cli(command, "--kernel-table", path, "--engine", "kernels", *extra, *FAST)
    assert quiet.code == 0, quiet.err
    assert PHRASE not in quiet.err
    shipped = cli(command, *extra, *FAST)
    assert PHRASE not in shipped.err
