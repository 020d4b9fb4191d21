"""`pdplan optimize` with KV reuse: the cache settings of `search: cache:` searched beside the deployment, and the
plans' cache reported (JSON `cache`, the terminal table); the variants (pdplan.search.cache_options)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.chat_sessions import CHAT_SESSIONS
from typer.testing import CliRunner

from pdplan.cli.app import app
from pdplan.errors import SpecError
from pdplan.search.cache_options import cache_variants, colocated_caches
from pdplan.specs.cache import CacheSpec
from pdplan.specs.scenario import Scenario

SESSIONS: dict[str, Any] = {**CHAT_SESSIONS, "think_time": {"dist": "exponential", "mean": "10s"}}


def _doc(search_cache: dict[str, Any] | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "chat",
        "model": "llama-3.1-8b",
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "decode": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "link": "ib-ndr",
        "granularity": "layer",
        "workload": {"name": "chat", "sessions": SESSIONS},
        "slo": {"ttft": "1s", "tpot": "60ms"},
        "cache": {"routing": "affinity", "tiers": [{"storage": "host-dram-pcie5", "capacity": "512 GiB"}]},
        "search": {"tp": [1], "max_instances": 4, "granularities": ["layer"]},
    }
    if search_cache is not None:
        doc["search"]["cache"] = search_cache
    return doc


def test_variants_are_the_product_with_caching_off_once() -> None:
    sc = Scenario.model_validate(
        _doc(
            {
                "prefix_caching": [True, False],
                "routing": ["affinity", "load-balance"],
                "tier_capacities": [[0, "1 TiB"]],
            }
        )
    )
    variants = cache_variants(sc)
    assert len(variants) == 1 + 2 * 2
    assert variants.count(CacheSpec(prefix_caching=False)) == 1
    on = [v for v in variants if v is not None and v.prefix_caching]
    assert {(v.routing, len(v.tiers)) for v in on} == {
        ("affinity", 0),
        ("affinity", 1),
        ("load-balance", 0),
        ("load-balance", 1),
    }
    assert all(v.tiers[0].capacity == 2.0**40 for v in on if v.tiers)
    assert len(colocated_caches(variants)) == 3  # load-balance buys a colocated deployment nothing


def test_no_reuse_or_no_search_block_is_one_variant() -> None:
    plain = _doc({"prefix_caching": [True, False]})
    plain["workload"] = {
        "name": "w",
        "input_tokens": {"dist": "fixed", "value": 1000},
        "output_tokens": {"dist": "fixed", "value": 100},
    }
    assert cache_variants(Scenario.model_validate(plain)) == (Scenario.model_validate(plain).cache,)
    assert len(cache_variants(Scenario.model_validate(_doc(None)))) == 1


def test_tier_sizes_must_match_the_tiers() -> None:
    sc = Scenario.model_validate(_doc({"tier_capacities": [[0], ["1 TiB"]]}))
    with pytest.raises(SpecError, match="gives sizes for 2 tier"):
        cache_variants(sc)


@pytest.mark.slow
def test_optimize_searches_and_reports_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "chat.yaml"
    path.write_text(
        yaml.safe_dump(
            _doc({"prefix_caching": [True, False], "routing": ["affinity"], "tier_capacities": [[0, "1 TiB"]]})
        )
    )
    out = CliRunner().invoke(app, ["optimize", str(path), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)  # stdout only: a long search writes progress lines to stderr
    settings = {(p["cache"]["prefix_caching"], len(p["cache"]["tier_sizes"])) for p in doc["plans"]}
    assert settings  # every plan states its setting
    pick = doc["plans"][0]["cache"]
    if pick["prefix_caching"]:
        report = pick["report"]
        assert report["tiers"][0]["name"] == "hbm"
        assert 0.0 <= report["token_hit_ratio"] <= 1.0
        assert report["gain_vs_no_cache"] >= 1.0 - 1e-9  # the search would pick caching off otherwise
    table = CliRunner().invoke(app, ["optimize", str(path)])
    assert table.exit_code == 0
    assert "Prefix cache (by rank)" in table.output
