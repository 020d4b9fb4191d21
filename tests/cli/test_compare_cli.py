"""`pdplan compare`: chosen plans side by side from plan files and from one search per `--gpu` (issue #25)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.plan_fixture import plan_result

from pdplan.report import render_optimize

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "data" / "small_scenario.yaml"
Cli = Callable[..., Any]


def _plan_file(folder: Path) -> Path:
    path = folder / "plan.json"
    path.write_text(str(render_optimize(plan_result(), "json")), encoding="utf-8")
    return path


def test_compare_plan_files_side_by_side(cli: Cli, tmp_path: Path) -> None:
    # The fixture's pick: 2P1D on 12 H100 at $3/GPU-h = $36/h, x 730 h = $26,280/month, x 8,760 h = $315,360/year.
    plan = _plan_file(tmp_path)
    result = cli("compare", plan, plan, "--rank", "1", "--format", "markdown")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == f"| quantity | {plan} | {plan} #2 |"
    assert "| $/month (730 h) | $26,280.00 | $26,280.00 |" in lines
    assert "| $/year (8,760 h) | $315,360.00 | $315,360.00 |" in lines
    assert "| GPUs | 12 | 12 |" in lines
    assert "| headroom | 0% | 0% |" in lines


def test_compare_csv_and_json_rank_two(cli: Cli, tmp_path: Path) -> None:
    # Rank 2 of the fixture: 3P2D on 14 H100 = $42/h = $30,660/month.
    plan = _plan_file(tmp_path)
    out = cli("compare", plan, "--rank", "2", "--format", "csv")
    assert out.code == 0, out.err
    row = next(csv.DictReader(io.StringIO(out.out)))
    assert row["rank"] == "2"
    assert row["num_gpus"] == "14"
    assert float(row["cost_usd_per_month"]) == 30660.0
    doc = json.loads(cli("compare", plan, "--format", "json").out)
    assert doc["plans"][0]["cost_usd_per_year"] == 315360.0
    assert doc["plans"][0]["status"] == "ok"


def test_compare_bad_inputs_exit_2(cli: Cli, tmp_path: Path) -> None:
    assert cli("compare").code == 2
    plan = _plan_file(tmp_path)
    result = cli("compare", plan, "--rank", "9")
    assert result.code == 2
    assert "has 3 plans" in result.err
    (tmp_path / "x.json").write_text("{}", encoding="utf-8")
    assert cli("compare", tmp_path / "x.json").code == 2


def test_compare_gpu_searches_and_exit_3(cli: Cli, tmp_path: Path) -> None:
    plan = _plan_file(tmp_path)
    ok = cli("compare", plan, "--gpu", "h100-sxm", "--scenario", SMALL, "--rate", "2", "--format", "json")
    assert ok.code == 0, ok.err
    searched = json.loads(ok.out)["plans"][1]
    assert searched["source"] == "--gpu h100-sxm"
    assert searched["operating_rate_rps"] == 2.0
    alone = json.loads(cli("optimize", SMALL, "--gpu", "h100-sxm", "--rate", "2", "--format", "json").out)["plans"][0]
    assert (searched["label"], searched["num_gpus"]) == (alone["label"], alone["num_gpus"])  # the same search
    none = cli("compare", "--gpu", "h100-sxm", "--scenario", SMALL, "--rate", "100000")
    assert none.code == 3
    assert "--gpu h100-sxm: no candidate reaches" in none.err


def test_optimize_growth_replans_with_the_same_search(cli: Cli) -> None:
    # +100 % of 2 req/s is a target of 4 req/s: the row is optimize --rate 4's own pick.
    grown = cli("optimize", SMALL, "--rate", "2", "--growth", "100", "--format", "json")
    assert grown.code == 0, grown.err
    row = json.loads(grown.out)["growth"][0]
    assert row["rate_rps"] == 4.0
    alone = json.loads(cli("optimize", SMALL, "--rate", "4", "--format", "json").out)["plans"][0]
    assert (row["label"], row["num_gpus"]) == (alone["label"], alone["num_gpus"])
    assert cli("optimize", SMALL, "--rate", "2", "--growth", "x").code == 2
