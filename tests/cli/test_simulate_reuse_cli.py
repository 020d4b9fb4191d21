"""``pdplan simulate`` on a KV-reuse workload prints the prefix cache's hit ratios per tier, closed form beside the
simulation, and its JSON document carries both under ``cache``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

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
