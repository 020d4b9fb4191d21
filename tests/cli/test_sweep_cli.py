"""``pdplan sweep`` (docs/sweep.md): the tidy table, failing points recorded, resume after an interrupt (a real SIGINT),
the same table whatever the parallelism, and the Ray executor (a stand-in module; a real one when installed)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.signals import default_sigint

from pdplan.cli import run
from pdplan.sweep.point import COLUMNS

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "examples/default.yaml"

EVALUATE_GRID = f"""
base: {BASE}
slo_tiers:
  chat: {{ttft: 2s, tpot: 100ms}}
  tight: {{ttft: 1s, tpot: 50ms, percentile: 99, attainment: 0.95}}
list:
  - {{rate: 5, slo: chat}}
  - {{rate: 5, slo: tight, engine: sglang}}
  - {{rate: 1000}}
  - {{model: no-such-model, rate: 5}}
  - {{model: llama-3.1-8b, gpu: h200-sxm, rate: 8}}
"""


def _sweep(tmp_path: Path, text: str, *args: str, name: str = "grid") -> tuple[int, Path]:
    grid = tmp_path / f"{name}.yaml"
    grid.write_text(text)
    prefix = tmp_path / f"{name}-out"
    return run(["sweep", str(grid), "-o", str(prefix), *args]), prefix


def _csv(prefix: Path) -> list[dict[str, str]]:
    with prefix.with_name(prefix.name + ".csv").open() as handle:
        return list(csv.DictReader(handle))


def _jsonl(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".jsonl")


def test_an_evaluate_sweep_writes_one_tidy_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, prefix = _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--workers", "1")
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == ""
    header = prefix.with_name("grid-out.csv").read_text().splitlines()[0]
    assert header.split(",") == list(COLUMNS)
    rows = _csv(prefix)
    assert [r["status"] for r in rows] == ["ok", "ok", "infeasible", "error", "ok"]
    assert [r["point"] for r in rows] == ["0", "1", "2", "3", "4"]
    first, tight, beyond, bad, small = rows
    assert (first["model"], first["gpus"], first["engine"], first["rate_rps"]) == (
        "llama-3.1-70b",
        "h100-sxm",
        "vllm",
        "5.0",
    )
    assert (tight["engine"], tight["slo_tier"], tight["ttft_slo_s"], tight["slo_percentile"]) == (
        "sglang",
        "tight",
        "1.0",
        "99.0",
    )
    assert first["plan"] == "2P1D h100-sxm TP4 / h100-sxm TP4 request"
    assert first["num_gpus"] == "12"
    assert float(first["attainment"]) > float(tight["attainment"])
    assert beyond["error"]
    assert beyond["binding_constraint"]
    assert "unknown model 'no-such-model'" in bad["error"]
    assert (small["model"], small["gpus"], small["prefill_gpu"]) == ("llama-3.1-8b", "h200-sxm", "h200-sxm")
    assert len({r["point_id"] for r in rows}) == 5
    assert len({r["sweep_id"] for r in rows}) == 1
    summary = prefix.with_name("grid-out.md").read_text()
    assert "## 1. Best plan per scenario" in summary
    assert "## 2. $/h against the forecast" in summary
    assert "5 points: 3 ok, 1 infeasible, 1 error" in summary
    assert "1 point(s) failed, e.g. point 3" in err


def test_a_rerun_skips_the_points_done_and_resumes_after_a_cut_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, prefix = _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--workers", "1")
    assert code == 0
    table = prefix.with_name("grid-out.csv").read_bytes()
    capsys.readouterr()
    assert _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--workers", "1")[0] == 0
    assert "0 points run, 5 already in" in capsys.readouterr().err
    lines = _jsonl(prefix).read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    kept = [line for line in lines if json.loads(line)["point_id"] != last["point_id"]]
    cut = [line for line in lines if json.loads(line)["point_id"] == last["point_id"]]
    assert len(cut) == 1
    _jsonl(prefix).write_bytes(b"".join(kept) + lines[-1][:40])  # an interrupt cut the last write short
    prefix.with_name("grid-out.csv").unlink()
    assert _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--workers", "1")[0] == 0
    assert "1 points run, 4 already in" in capsys.readouterr().err
    assert prefix.with_name("grid-out.csv").read_bytes() == table
    assert all(line.endswith(b"}\n") for line in _jsonl(prefix).read_bytes().splitlines(keepends=True))


def test_rows_of_another_sweep_are_not_mixed_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--workers", "1")[0] == 0
    capsys.readouterr()
    edited = EVALUATE_GRID.replace("ttft: 2s", "ttft: 3s")
    code, _ = _sweep(tmp_path, edited, "--command", "evaluate", "--workers", "1")
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "grid-out.jsonl: line 1: a row of another sweep" in err


def test_dry_run_lists_the_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, prefix = _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--dry-run")
    out, err = capsys.readouterr()
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 5
    assert lines[4].endswith("model=llama-3.1-8b gpu=h200-sxm rate=8.0")
    assert "5 points, 0 already in" in err
    assert not _jsonl(prefix).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--executor", "slurm"], "--executor: 'slurm' is not one of local, ray"),
        (["--address", "ray://head:10001"], "--address: an address is for --executor ray"),
        (["--command", "simulate"], "--command: 'simulate' is not one of optimize, evaluate"),
    ],
)
def test_bad_flags_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _ = _sweep(tmp_path, EVALUATE_GRID, *args)
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"error: {message}\n"


def test_ray_not_installed_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    code, prefix = _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--executor", "ray")
    assert code == 2
    assert capsys.readouterr().err == (
        "error: --executor: Ray is not installed; install the optional extra: pip install 'pdplan[ray]'\n"
    )
    assert not _jsonl(prefix).exists()


class _Ref:
    def __init__(self, value: Any) -> None:
        self.value = value


def _fake_ray(calls: list[str]) -> ModuleType:
    """The part of Ray's API the executor uses, running each task at once in this process (finished in reverse
    order of submission, as a cluster may)."""
    ray = ModuleType("ray")

    def remote(**options: Any) -> Any:
        assert options == {"num_cpus": 1}

        def wrap(fn: Any) -> Any:
            task = ModuleType("task")
            task.remote = lambda *args: _Ref(fn(*(a.value if isinstance(a, _Ref) else a for a in args)))  # type: ignore[attr-defined]
            return task

        return wrap

    ray.init = lambda address=None, **kw: calls.append(f"init {address}")  # type: ignore[attr-defined]
    ray.remote = remote  # type: ignore[attr-defined]
    ray.put = _Ref  # type: ignore[attr-defined]
    ray.wait = lambda refs, num_returns=1: (refs[-num_returns:], refs[:-num_returns])  # type: ignore[attr-defined]
    ray.get = lambda ref: ref.value  # type: ignore[attr-defined]
    ray.cancel = lambda ref: calls.append("cancel")  # type: ignore[attr-defined]
    ray.shutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    return ray


def test_the_ray_executor_writes_the_same_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "ray", _fake_ray(calls))
    code, on_ray = _sweep(
        tmp_path, EVALUATE_GRID, "--command", "evaluate", "--executor", "ray", "--address", "ray://head:10001"
    )
    assert code == 0
    assert calls == ["init ray://head:10001", "shutdown"]
    code, local = _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--workers", "1", name="local")
    assert code == 0
    assert on_ray.with_name("grid-out.csv").read_bytes() == local.with_name("local-out.csv").read_bytes()


@pytest.mark.slow
def test_a_real_local_ray_runs_the_sweep(tmp_path: Path) -> None:
    """Needs ``pip install 'pdplan[ray]'`` (not a dependency); skipped without Ray."""
    pytest.importorskip("ray")
    code, on_ray = _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--executor", "ray")
    assert code == 0
    code, local = _sweep(tmp_path, EVALUATE_GRID, "--command", "evaluate", "--workers", "1", name="local")
    assert on_ray.with_name("grid-out.csv").read_bytes() == local.with_name("local-out.csv").read_bytes()


@pytest.mark.slow
def test_one_or_two_workers_write_the_same_table(tmp_path: Path) -> None:
    grid = EVALUATE_GRID + "".join(f"  - {{rate: {r}, slo: chat, model: llama-3.1-8b}}\n" for r in (1, 2, 3))
    code, one = _sweep(tmp_path, grid, "--command", "evaluate", "--workers", "1", name="one")
    assert code == 0
    code, two = _sweep(tmp_path, grid, "--command", "evaluate", "--workers", "2", name="two")
    assert code == 0
    assert one.with_name("one-out.csv").read_bytes() == two.with_name("two-out.csv").read_bytes()
    assert one.with_name("one-out.md").read_text().replace("one.yaml", "") == two.with_name(
        "two-out.md"
    ).read_text().replace("two.yaml", "")


OPTIMIZE_GRID = f"""
base: {BASE}
objective: cost
top: 2
grid:
  model: [llama-3.1-8b]
  gpu: [[h100-sxm], [h100-sxm, l40s]]
  rate: [4, 8, 12]
"""


@pytest.mark.slow
@pytest.mark.parametrize("executor", [["--workers", "2"], ["--executor", "ray"]], ids=["pool", "ray"])
def test_ctrl_c_keeps_whole_points_and_a_rerun_resumes_to_the_same_table(tmp_path: Path, executor: list[str]) -> None:
    """A real SIGINT in the middle of a pool sweep (or a local Ray one, where ``pip install 'pdplan[ray]'`` put Ray
    in): exit 130, one line, no CSV, whole points kept; the rerun runs only the rest and its table equals an
    uninterrupted run's."""
    if executor[-1] == "ray":
        pytest.importorskip("ray")
    grid = tmp_path / "grid.yaml"
    grid.write_text(OPTIMIZE_GRID)
    log = tmp_path / "grid.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pdplan", "sweep", str(grid), *executor],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 120
    while not (log.exists() and log.read_bytes().count(b"\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err
    assert err.splitlines()[-1] == "error: aborted"
    assert out == ""
    assert not (tmp_path / "grid.csv").exists()
    assert not (tmp_path / "grid.md").exists()
    kept = [json.loads(line) for line in log.read_text().splitlines()]
    points = {row["point_id"] for row in kept}
    assert 1 <= len(points) < 6
    assert all(
        sum(r["point_id"] == p for r in kept) == next(r["rows_in_point"] for r in kept if r["point_id"] == p)
        for p in points
    )

    resumed = subprocess.run(
        [sys.executable, "-m", "pdplan", "sweep", str(grid), "--workers", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{6 - len(points)} points run, {len(points)} already in grid.jsonl" in resumed.stderr
    code, whole = _sweep(tmp_path, OPTIMIZE_GRID, "--workers", "1", name="whole")
    assert code == 0
    assert (tmp_path / "grid.csv").read_bytes() == whole.with_name("whole-out.csv").read_bytes()
    rows = _csv(whole)
    assert {r["status"] for r in rows} == {"ok"}
    assert [(r["point"], r["rank"], r["rows_in_point"]) for r in rows[:2]] == [("0", "1", "3"), ("0", "2", "3")]
    assert rows[0]["objective"] == "cost"
    assert rows[0]["gpus"] == "h100-sxm"
    assert rows[-1]["gpus"] == "h100-sxm+l40s"
