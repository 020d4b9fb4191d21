"""A few runs of the real ``pdplan`` console script (exit codes and streams as a shell sees them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PDPLAN = shutil.which("pdplan")
pytestmark = pytest.mark.skipif(PDPLAN is None, reason="the pdplan console script is not installed")


def pdplan(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert PDPLAN is not None
    full_env = {k: v for k, v in os.environ.items() if k != "PDPLAN_HARDWARE_DB"}
    full_env.update(env or {})
    return subprocess.run([PDPLAN, *argv], capture_output=True, text=True, timeout=60, env=full_env, check=False)


def test_console_script_bad_file_exit_2_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "junk.yaml"
    bad.write_bytes(b"\x00\x01\x02 not yaml \xff")
    proc = pdplan("validate", str(bad), "--format", "json")
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "junk.yaml" in lines[0]
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["ok"] is False


def test_console_script_json_to_pipe_with_env_catalogue(tmp_path: Path, repo_root: Path) -> None:
    gpus = tmp_path / "db" / "gpus"
    gpus.mkdir(parents=True)
    text = (repo_root / "hardware_db" / "gpus" / "h100-sxm.yaml").read_text()
    (gpus / "my-gpu.yaml").write_text(text.replace("name: h100-sxm", "name: my-gpu"))
    proc = pdplan("hardware", "list", "--format", "json", env={"PDPLAN_HARDWARE_DB": str(tmp_path / "db")})
    assert proc.returncode == 0, proc.stderr
    names = [item["name"] for item in json.loads(proc.stdout)]
    assert "my-gpu" in names
    assert "h100-sxm" in names
