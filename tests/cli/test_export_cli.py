"""``pdplan export``: file or stdin in, text to stdout or (atomically) to ``-o``; bad input is one line, exit 2."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "tests" / "golden" / "examples" / "default.json"
REQUEST_RANK = "5"  # the default report's first request-wise plan: vLLM refuses its layer-wise rank 1

Cli = Callable[..., Any]  # the `cli` fixture of tests/conftest.py


def test_writes_the_manifest_to_stdout_and_warnings_to_stderr(cli: Cli) -> None:
    res = cli("export", PLAN, "--to", "dynamo", "--rank", REQUEST_RANK)
    assert res.code == 0, res.err
    assert yaml.safe_load(res.out)["kind"] == "DynamoGraphDeployment"
    assert "warning:" in res.err  # least-work routing priced: Dynamo writes least-loaded, the nearest
    assert "warning:" not in res.out


def test_reads_the_plan_from_stdin(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(PLAN.read_text()))
    res = cli("export", "-", "--to", "SGLang", "--rank", "2")
    assert res.code == 0, res.err
    assert res.out.startswith("#!/usr/bin/env bash\n# pdplan export --to sglang: plan 2 of 5 from <stdin>")


def test_output_file_is_written_whole(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "launch.sh"
    res = cli("export", PLAN, "--to", "vllm", "--rank", REQUEST_RANK, "-o", out)
    assert res.code == 0, res.err
    assert res.out == ""
    assert out.read_text().startswith("#!/usr/bin/env bash")
    assert [p.name for p in tmp_path.iterdir()] == ["launch.sh"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["missing.json", "--to", "vllm"], "file not found"),
        ([str(ROOT / "README.md"), "--to", "vllm"], "not JSON"),
        ([str(ROOT / "examples" / "default.yaml"), "--to", "vllm"], "not JSON"),
        ([str(PLAN), "--to", "vllm", "--rank", "6"], "plans 1..5"),
        ([str(PLAN), "--to", "vllm", "--rank", "0"], "out of range"),
        ([str(PLAN), "--to", "tgi"], "'--to'"),
        ([str(PLAN)], "Missing option '--to'"),
        ([str(PLAN), "--to", "dynamo", "--backend", "tensorrt"], "'--backend'"),
        ([str(PLAN), "--to", "vllm", "--rank", "5", "-o", "/no/such/folder/x.sh"], "output folder does not exist"),
        ([str(PLAN), "--to", "sglang", "--gpus-per-node", "0"], "--gpus-per-node must be at least 1"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli: Cli, args: list[str], needle: str) -> None:
    res = cli("export", *args)
    assert res.code == 2
    errors = [line for line in res.err_lines if line.startswith("error:")]
    assert len(errors) == 1, res.err
    assert needle in errors[0]


def test_empty_stdin_is_bad_input(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    res = cli("export", "-", "--to", "vllm")
    assert res.code == 2
    assert res.err_lines == [
        "error: <stdin>: empty input; expected the JSON that `pdplan optimize --format json` writes"
    ]


@pytest.mark.skipif(shutil.which("pdplan") is None, reason="the pdplan console script is not installed")
def test_console_script_reads_a_pipe() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PDPLAN_HARDWARE_DB"}
    proc = subprocess.run(
        ["pdplan", "export", "-", "--to", "vllm", "--rank", REQUEST_RANK],
        input=PLAN.read_text(),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "exec vllm serve meta-llama/Llama-3.1-70B-Instruct" in proc.stdout


def test_a_layer_wise_plan_is_refused_for_vllm(cli: Cli, tmp_path: Path) -> None:
    """A plan priced with layer-wise KV transfer (a scenario that sets it): vLLM's connector moves KV per request."""
    doc = json.loads(PLAN.read_text())
    for plan in doc["plans"]:
        plan["granularity"] = "layer"
    layered = tmp_path / "layer.json"
    layered.write_text(json.dumps(doc))
    res = cli("export", str(layered), "--to", "vllm")
    assert res.code == 2
    errors = [line for line in res.err_lines if line.startswith("error:")]
    assert len(errors) == 1, res.err
    assert "layer-granularity KV transfer, but vllm transfers KV per request" in errors[0]
