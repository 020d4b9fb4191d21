"""`cache: read_paths: dual` (DualPath) through the CLI: the bundled agent example's report (split, busiest
resource, GB/PFLOP, gain against prefill-only reads in the same model), the search dimension offered only behind a
storage NIC, and the bad inputs (one line, exit 2)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pdplan.cli import run
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.cache_options import cache_variants, colocated_caches

EXAMPLE = Path(__file__).parents[2] / "examples" / "agent-dualpath.yaml"


def _example() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return doc


def _write(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_example_reports_the_split_binding_ratio_and_gain(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["evaluate", str(EXAMPLE), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    dual = doc["cache"]["dual_path"]
    assert dual["tier"] == "remote-3fs-100g"
    assert dual["de_fraction"] == pytest.approx(2 / 3)  # 2P4D nodes: both SNIC pools balanced
    assert dual["binding_resource"] == "PE SNIC"
    assert dual["read_limit_gain"] == pytest.approx(3.0)  # six nodes' storage NICs instead of two
    assert 4 < dual["cache_compute_gb_per_pflop"] < 5.5  # DeepSeek-V3 (dense MLA), Table 1: 4.8-5.8
    assert dual["gain_vs_prefill_only"] > 1.5  # the prefill-only plan is bound by the PE storage NICs
    assert doc["goodput_rps"] == pytest.approx(dual["gain_vs_prefill_only"] * dual["goodput_prefill_only_rps"])


def test_prefill_only_document_has_no_dual_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _example()
    doc["cache"]["read_paths"] = "prefill"
    assert run(["evaluate", _write(tmp_path, doc), "--format", "json"]) == 0
    assert "dual_path" not in json.loads(capsys.readouterr().out)["cache"]


def test_read_paths_are_searched_only_behind_a_storage_nic(tmp_path: Path) -> None:
    catalog = open_catalog([], [])
    sc = load_scenario(EXAMPLE)
    assert [c.read_paths for c in cache_variants(sc, catalog) if c is not None] == ["prefill", "dual"]
    assert {c.read_paths for c in colocated_caches(cache_variants(sc, catalog)) if c is not None} == {"prefill"}
    dram = copy.deepcopy(_example())
    dram["cache"]["tiers"] = [{"storage": "host-dram-pcie5", "capacity": "1 TiB"}]
    dram["cache"]["read_paths"] = "prefill"
    variants = cache_variants(load_scenario(Path(_write(tmp_path, dram))), catalog)
    assert [c.read_paths for c in variants if c is not None] == ["prefill"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dual_split": -0.2}, "dual_split"),
        ({"tiers": [{"storage": "host-dram-pcie5", "capacity": "1 TiB"}]}, "tier behind a storage NIC"),
        ({"staging_dram": "no-such-dram"}, "no-such-dram"),
    ],
)
def test_bad_dual_path_inputs_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], message: str
) -> None:
    doc = _example()
    doc["cache"] |= change
    doc.pop("search")
    assert run(["evaluate", _write(tmp_path, doc)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert "\n" not in err
