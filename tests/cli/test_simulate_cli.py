"""``pdplan simulate``: JSON keys mirror ``evaluate`` plus closed_form / simulated / errors."""

from __future__ import annotations

import json

import pytest

from pdplan.cli import run

FAST = ["--model", "llama-3.1-8b", "--tp", "1", "--isl", "512", "--osl", "64", "--requests", "1000"]


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    code = run(["simulate", *args, "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0, out
    doc: dict[str, object] = json.loads(out)
    return doc


def test_rate_keys_mirror_evaluate(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, *FAST, "--rate", "4")
    for key in (
        "ttft_s",
        "tpot_s",
        "attainment",
        "utilisation",
        "goodput_rps",
        "closed_form",
        "simulated",
        "relative_error",
        "num_gpus",
    ):
        assert key in doc
    for side in ("closed_form", "simulated"):
        part = doc[side]
        assert isinstance(part, dict)
        for key in ("ttft_s", "tpot_s"):
            assert set(part[key]) >= {"mean", "p50", "p90", "p99"}
        assert 0.0 <= part["attainment"] <= 1.0
    err = doc["relative_error"]
    assert isinstance(err, dict)
    assert abs(err["tpot_s"]["mean"]) < 0.2  # fixed lengths, light load: near exact


def test_seeded_runs_are_deterministic(capsys: pytest.CaptureFixture[str]) -> None:
    first = _json(capsys, *FAST, "--rate", "4", "--seed", "3")
    second = _json(capsys, *FAST, "--rate", "4", "--seed", "3")
    assert first["simulated"] == second["simulated"]


def test_colocated_and_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, *FAST, "--colocated", "1", "--concurrency", "4")
    assert doc["mode"] == "colocated"
    assert float(doc["throughput_rps"]) > 0.0  # type: ignore[arg-type]


def test_goodput(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, *FAST, "--goodput")
    assert float(doc["goodput_simulated_rps"]) > 0.0  # type: ignore[arg-type]
    assert "goodput_rps" in doc["relative_error"]  # type: ignore[operator]


def test_roofline_step(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, *FAST[:-1], "300", "--rate", "4", "--step", "roofline")
    err = doc["relative_error"]
    assert isinstance(err, dict)
    assert abs(err["tpot_s"]["mean"]) < 0.2  # the linear fit is within a few % of the roofline


def test_needs_a_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["simulate", *FAST]) == 2
    assert "--rate" in capsys.readouterr().err


def test_bad_step_and_unstable_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["simulate", *FAST, "--rate", "1", "--step", "exact"]) == 2
    assert run(["simulate", *FAST, "--rate", "1e6"]) == 3
    capsys.readouterr()


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["simulate", *FAST, "--rate", "4"]) == 0
    assert "ttft_p99_ms" in capsys.readouterr().out
