"""A plan's KV cache deploys as priced (issue #25, KV-aware plans): prefix caching and a host-DRAM tier as engine
flags on the caching role, prefix affinity as a router that keeps it (pdplan/report/export/cache.py).

The documents are the golden default report (rank 1: 8P2D Llama-3.1-70B, TP2 prefill on 8-GPU H100 nodes,
request-wise KV transfer, which every target runs) with a ``cache`` setting written into its plans, so each number is
checked by hand: a 1 TiB host-DRAM tier per node shared by ⌊8 / 2⌋ = 4 TP2 instances is 256 GiB = 274,877,906,944
bytes per instance; SGLang's ``--hicache-size`` is one rank's share in GB, ⌊274,877,906,944 / 2 / 10⁹⌋ = 137.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.export_plans import GOLDEN, export

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.export_data import read_plan_document
from pdplan.report.export import ExportResult, export_plan, plan_gpus
from pdplan.report.export.common import LaunchCommand
from pdplan.report.export.context import export_context
from pdplan.specs.export import PlanDocument

TIB = 2**40


def _doc(tmp_path: Path, **cache: Any) -> PlanDocument:
    doc = json.loads((GOLDEN / "default.json").read_text())
    setting = {"prefix_caching": True, "routing": "affinity", "tier_sizes": [], "report": None} | cache
    for plan in doc["plans"]:
        plan["cache"] = setting
    path = tmp_path / "cached.json"
    path.write_text(json.dumps(doc))
    return read_plan_document(str(path))


HOST_TIER = [{"storage": "host-dram-pcie5", "capacity_bytes": TIB}]


def _flags(result: ExportResult, role: str) -> dict[str, str | None]:
    cmd = next(c for c in result.commands if c.role == role)
    return dict(cmd.flags)


def _command(result: ExportResult, role: str) -> LaunchCommand:
    return next(c for c in result.commands if c.role == role)


def test_vllm_prefill_holds_the_host_tier_beside_nixl_and_caches_prefixes(tmp_path: Path) -> None:
    result = export(_doc(tmp_path, tier_sizes=HOST_TIER), 1, "vllm")
    prefill, decode = _flags(result, "prefill"), _flags(result, "decode")
    assert "--enable-prefix-caching" in prefill
    assert "--kv-offloading-size" not in prefill  # it would replace the NIXL connector
    config = json.loads(str(prefill["--kv-transfer-config"]))
    nixl, offload = config["kv_connector_extra_config"]["connectors"]
    assert (config["kv_connector"], config["kv_role"]) == ("MultiConnector", "kv_producer")
    assert (nixl["kv_connector"], nixl["kv_role"]) == ("NixlConnector", "kv_producer")
    assert offload == {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": 274_877_906_944},
    }
    assert json.loads(str(decode["--kv-transfer-config"]))["kv_connector"] == "NixlConnector"
    assert "--enable-prefix-caching" not in decode  # decode keeps the engine's default: pdplan caches on prefill
    affinity = [w for w in result.warnings if "affinity is not enforced" in w]
    assert len(affinity) == 1
    assert "\n" not in affinity[0]


def test_vllm_colocated_takes_the_offloading_size_in_gib(tmp_path: Path) -> None:
    doc = json.loads((GOLDEN / "opt-13b-a100-distserve.json").read_text())
    plan = next(p for p in doc["plans"] if p["mode"] == "colocated")
    doc["plans"] = [plan]
    plan["cache"] = {"prefix_caching": True, "routing": "load-balance", "tier_sizes": HOST_TIER}
    path = tmp_path / "colocated.json"
    path.write_text(json.dumps(doc))
    result = export(read_plan_document(str(path)), 1, "vllm")
    flags = _flags(result, "colocated")
    per_node = 8 // plan["colocated"]["tp"]  # A100 nodes of 8 GPUs
    assert flags["--kv-offloading-size"] == f"{1024 / per_node:.6g}"
    assert "--enable-prefix-caching" in flags
    assert not any("affinity" in w for w in result.warnings)  # priced load-balance: nothing to keep


def test_sglang_radix_cache_and_hicache_per_rank(tmp_path: Path) -> None:
    result = export(_doc(tmp_path, tier_sizes=HOST_TIER), 1, "sglang")
    prefill = _flags(result, "prefill")
    assert "--enable-hierarchical-cache" in prefill
    assert prefill["--hicache-size"] == "137"
    assert "--disable-radix-cache" not in prefill
    assert "--hicache-size" not in _flags(result, "decode")
    router = _flags(result, "router")
    assert router["--prefill-policy"] == "cache_aware"
    assert router["--decode-policy"] == "random"  # decode: the priced random split, unchanged
    assert not any("least-work" in w for w in result.warnings)  # cache_aware replaces the nearest-policy warning


def test_prefix_caching_off_is_written_off_and_drops_the_tier(tmp_path: Path) -> None:
    doc = _doc(tmp_path, prefix_caching=False, routing="load-balance", tier_sizes=HOST_TIER)
    vllm = _flags(export(doc, 1, "vllm"), "prefill")
    assert "--no-enable-prefix-caching" in vllm
    assert json.loads(str(vllm["--kv-transfer-config"]))["kv_connector"] == "NixlConnector"
    sglang = export(doc, 1, "sglang")
    assert "--disable-radix-cache" in _flags(sglang, "prefill")
    assert "--enable-hierarchical-cache" not in _flags(sglang, "prefill")
    assert _flags(sglang, "router")["--prefill-policy"] == "power_of_two"  # the priced least-loaded's nearest, warned


def test_dynamo_runs_the_kv_router_with_events_from_the_caching_workers(tmp_path: Path) -> None:
    doc = _doc(tmp_path, tier_sizes=HOST_TIER)
    result = export(doc, 1, "dynamo", "vllm")
    assert _flags(result, "frontend")["--router-mode"] == "kv"
    events = json.loads(str(_flags(result, "prefill")["--kv-events-config"]))
    assert events == {"publisher": "zmq", "topic": "kv-events", "endpoint": "tcp://*:20080"} | {
        "enable_kv_cache_events": True
    }
    assert "--kv-events-config" not in _flags(result, "decode")  # decode workers publish none (dynamo/vllm/args.py)
    prefill_config = json.loads(str(_flags(result, "prefill")["--kv-transfer-config"]))
    assert prefill_config["kv_connector"] == "MultiConnector"
    services = yaml.safe_load(result.text)["spec"]["services"]  # NIXL inside a MultiConnector: Dynamo does not set
    host = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    assert services["VllmPrefillWorker"]["envs"] == [host]  # the side-channel host itself
    assert "envs" not in services["VllmDecodeWorker"]  # plain NIXL: Dynamo's worker sets it
    assert not any("least-work" in w for w in result.warnings)
    sglang = export(doc, 1, "dynamo", "sglang")
    assert json.loads(str(_flags(sglang, "prefill")["--kv-events-config"]))["publisher"] == "zmq"
    assert sum("python -m dynamo.router" in w for w in sglang.warnings) == 1  # no automatic KV prefill router


def test_load_balance_routing_keeps_the_priced_policy(tmp_path: Path) -> None:
    doc = _doc(tmp_path, routing="load-balance")
    result = export(doc, 1, "dynamo", "vllm")
    assert "--kv-events-config" not in _flags(result, "prefill")
    assert _flags(result, "frontend")["--router-mode"] == "least-loaded"  # the priced least-loaded, as priced
    assert not any("prefill routing" in w for w in result.warnings)  # Dynamo runs it: no nearest-policy warning
    assert not any("affinity" in w for w in export(doc, 1, "vllm").warnings)


def test_a_tier_the_export_cannot_write_is_named_in_one_line(tmp_path: Path) -> None:
    tiers = [*HOST_TIER, {"storage": "nvme-gen4-x8", "capacity_bytes": 4 * TIB}]
    result = export(_doc(tmp_path, tier_sizes=tiers), 1, "sglang")
    assert _flags(result, "prefill")["--hicache-size"] == "137"  # the host tier alone
    lines = [w for w in result.warnings if "nvme-gen4-x8 (local-ssd)" in w]
    assert len(lines) == 1
    assert "--hicache-storage-backend" in lines[0]
    trtllm = export(_doc(tmp_path, tier_sizes=HOST_TIER), 1, "trtllm")
    assert sum("not written for TensorRT-LLM" in w for w in trtllm.warnings) == 1


def test_the_host_share_is_the_priced_one_whatever_the_packing(tmp_path: Path) -> None:
    """``--gpus-per-node`` changes how instances are packed, not the node share the tier was priced with."""
    doc = _doc(tmp_path, tier_sizes=HOST_TIER)
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, 1, "t"), source="t", gpus_per_node=4)
    result = export_plan(doc, target="sglang", rank=1, ctx=ctx, source="t")
    assert _flags(result, "prefill")["--hicache-size"] == "137"


def test_sglang_refuses_a_host_pool_no_larger_than_hbm(tmp_path: Path) -> None:
    priced_hbm = json.loads((GOLDEN / "default.json").read_text())["plans"][0]["priced"]["roles"]["prefill"]
    tiers = [{"name": "hbm", "capacity_tokens": 1.0}, {"name": "host-dram-pcie5", "capacity_tokens": 1.0}]
    doc = _doc(tmp_path, tier_sizes=HOST_TIER, report={"tiers": tiers})
    assert priced_hbm["kv_capacity_tokens"] > 1
    with pytest.raises(SpecError, match="larger") as err:
        export(doc, 1, "sglang")
    assert "\n" not in str(err.value)
    assert export(doc, 1, "vllm").text  # vLLM has no such rule
    small = _doc(tmp_path, tier_sizes=[{"storage": "host-dram-pcie5", "capacity_bytes": 4e9}])  # 0.5 GB a rank
    with pytest.raises(SpecError, match="whole GB"):
        export(small, 1, "sglang")


@pytest.mark.parametrize(
    ("cache", "message"),
    [
        ({"routing": "sticky"}, "routing"),
        ({"tier_sizes": [{"storage": "host-dram-pcie5", "capacity_bytes": -1}]}, "capacity_bytes"),
        ({"prefix_caching": "maybe"}, "prefix_caching"),
    ],
)
def test_a_malformed_cache_setting_is_refused(tmp_path: Path, cache: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        export(_doc(tmp_path, **cache), 1, "sglang")


def test_plans_without_a_cache_write_no_cache_flag() -> None:
    doc = read_plan_document(str(GOLDEN / "default.json"))
    for target in ("sglang", "dynamo"):
        for cmd in export(doc, 1, target, "sglang").commands:
            names = {flag for flag, _ in cmd.flags}
            assert not names & {"--disable-radix-cache", "--enable-hierarchical-cache", "--kv-events-config"}
    vllm = export(doc, 1, "vllm")
    assert all("--enable-prefix-caching" not in dict(c.flags) for c in vllm.commands)
    assert _command(vllm, "prefill").program == "vllm serve"
