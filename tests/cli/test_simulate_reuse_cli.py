"""``pdplan simulate`` on a KV-reuse workload prints the prefix cache's hit ratios per tier, closed form beside the
simulation, and its JSON document carries both under ``cache``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from support.cli_result import CliResult

SCENARIO = {
    "schema_version": 1,
    "name": "sessions-reuse",
    "model": "llama-3.1-8b",
    "mode": "disaggregated",
    "prefill": {"gpu": "h100-sxm", "tp": 1, "count": 1},
    "decode": {"gpu": "h100-sxm", "tp": 1, "count": 1},
    "link": "ib-ndr",
    "routing": "least-work",
    "workload": {
        "sessions": {
            "turns": {"dist": "fixed", "value": 3},
            "new_tokens": {"dist": "fixed", "value": 300},
            "output_tokens": {"dist": "fixed", "value": 100},
            "think_time": {"dist": "fixed", "value": 2},
        },
    },
    "cache": {"tiers": [{"storage": "host-dram-pcie5", "capacity": "2 TiB"}]},
    "slo": {"ttft": "2s", "tpot": "100ms"},
}


@pytest.mark.slow
def test_simulate_prints_hit_ratios_per_tier(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    path = tmp_path / "reuse.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    table = cli("simulate", path, "--rate", "4", "--requests", "1000", "--format", "csv")
    assert table.code == 0, table.err
    rows = {line.split(",")[0]: line.split(",")[1:] for line in table.out.splitlines()}
    assert {"token_hit_ratio", "token_hit_ratio_hbm", "token_hit_ratio_host-dram-pcie5"} <= rows.keys()
    closed, simulated = (float(v) for v in rows["token_hit_ratio_hbm"][:2])
    assert 0.0 < closed <= 1.0
    assert 0.0 < simulated <= 1.0
    doc = json.loads(cli("simulate", path, "--rate", "4", "--requests", "1000", "--format", "json").out)
    assert [t["name"] for t in doc["cache"]["simulated"]["tiers"]] == ["hbm", "host-dram-pcie5"]
    assert [t["name"] for t in doc["cache"]["closed_form"]["tiers"]] == ["hbm", "host-dram-pcie5"]
    assert doc["simulation"]["arrivals"] == "sessions"


@pytest.mark.slow
def test_simulate_sessions_start_at_their_own_turn_latency(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    """A sessions run starts its sessions in progress placed with the run's own mean turn latency by default (the
    library's ``turn_latency_s=None``), ``--session-start zero`` as if turns took no time; the rate the counted
    requests offered is a row beside the nominal rate the closed form is evaluated at."""
    from pdplan.io.catalog import open_catalog
    from pdplan.io.scenario import load_scenario
    from pdplan.sim.compare import simulate_scenario

    path = tmp_path / "reuse.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    args = ("simulate", path, "--rate", "4", "--requests", "1000", "--format", "json")
    measured = json.loads(cli(*args).out)
    zero = json.loads(cli(*args, "--session-start", "zero").out)
    assert measured["simulation"]["session_start"] == "measured"
    assert zero["simulation"]["session_start"] == "zero"
    assert measured["simulation"]["rate_rps"] == 4.0
    sc = load_scenario(path)
    for doc, latency in ((measured, None), (zero, 0.0)):
        lib = simulate_scenario(sc, catalog=open_catalog(), rate=4.0, n_requests=1000, turn_latency_s=latency)
        assert lib.reuse is not None
        assert doc["cache"]["simulated"]["offered_rps"] == pytest.approx(lib.reuse["offered_rps"], rel=1e-12)
    table = cli("simulate", path, "--rate", "4", "--requests", "1000", "--format", "csv")
    rows = {line.split(",")[0]: line.split(",")[1:] for line in table.out.splitlines()}
    assert float(rows["offered_rps"][0]) == 4.0
    assert float(rows["offered_rps"][1]) == pytest.approx(measured["cache"]["simulated"]["offered_rps"], rel=1e-9)
    bad = cli(*args, "--session-start", "warm")
    assert bad.code != 0
    assert "measured, zero" in bad.err


def test_offered_rate_gap_is_warned() -> None:
    from typing import Any, cast

    from pdplan.cli.simulate import offered_gap

    def result(offered: float | None, rate: float | None) -> Any:
        return cast(
            Any, SimpleNamespace(reuse={"offered_rps": offered}, settings={"rate_rps": rate, "session_start": "zero"})
        )

    assert offered_gap(result(14.1, 20.0)) is not None
    assert "14.1 req/s against the nominal 20 req/s" in str(offered_gap(result(14.1, 20.0)))
    assert offered_gap(result(19.2, 20.0)) is None  # within 5 %
    assert offered_gap(result(None, 20.0)) is None
    assert offered_gap(result(14.1, None)) is None
