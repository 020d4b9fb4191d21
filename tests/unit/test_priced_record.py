"""``priced`` records (pdplan/search/priced.py) of PrfaaS plans and the KV transfer backend (issue #25): hand-worked
values on Llama-3.1-70B, whose TP2 H100 KV capacity tests/unit/test_export.py works out (35,089 tokens)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.search.priced import prfaas_priced_record, priced_record
from pdplan.serving import resolve
from pdplan.serving.prfaas.build import prfaas_local, prfaas_setup

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "examples"


def _scenario(**overrides: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {
        "schema_version": 1,
        "name": "priced-prfaas",
        "model": "llama-3.1-70b",
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 2, "count": 2},
        "decode": {"gpu": "h100-sxm", "tp": 4, "count": 1},
        "link": "ib-ndr",
        "granularity": "request",
        "routing": "round-robin",
        "workload": "chat",
        "slo": {"ttft": "2s", "tpot": "100ms", "percentile": 90, "attainment": 0.9},
        "dtype": "bf16",
        "kv_dtype": "bf16",
        "prfaas": {"gpu": "h100-sxm", "tp": 2, "count": 1, "link": "dci-100g"},
    }
    return sc | overrides


def _prfaas_record(**overrides: Any) -> dict[str, Any]:
    sc = scenario_from_dict(_scenario(**overrides), source="test", base_dir=ROOT)
    res, _ = prfaas_local(resolve(sc, open_catalog()))
    setup = prfaas_setup(res)
    return prfaas_priced_record(res, setup.remote_hw, setup.routing)


def test_a_prfaas_plan_records_its_remote_prefill_role() -> None:
    priced = _prfaas_record()
    # remote TP2 H100 = the local TP2 prefill's arithmetic: 5,749,071,872 B a GPU × 2 / 327,680 B a token = 35,089.3
    remote = priced["roles"]["remote-prefill"]
    assert remote["max_model_len"] == 35089
    assert remote["kv_capacity_tokens"] == 35089
    assert remote["gpu_memory_utilization"] == 0.9  # vLLM profile's share (pdplan/data/engines/vllm.yaml)
    assert priced["roles"]["prefill"]["max_model_len"] == 35089
    assert priced["roles"]["decode"]["max_model_len"] == 131072  # TP4 holds more: the model's window
    assert priced["routing"] == {"prefill": "round-robin", "decode": "random", "remote-prefill": "round-robin"}
    assert priced["transfer_backend"] == "nixl-ucx"  # vLLM's NIXL connector over UCX (engines/vllm.yaml)
    assert "moe_kernel" not in remote  # dense model: no MoE settings


def test_the_remote_role_is_priced_on_its_own_gpu() -> None:
    # an H200 (141 GB) remote TP2 holds more KV than the local H100 TP2: its window is the model's
    remote = _prfaas_record(prfaas={"gpu": "h200-sxm", "tp": 2, "count": 1, "link": "dci-100g"})["roles"]
    assert remote["remote-prefill"]["kv_capacity_tokens"] > remote["prefill"]["kv_capacity_tokens"]
    assert remote["remote-prefill"]["max_model_len"] == 131072


@pytest.mark.parametrize(
    ("overrides", "backend"),
    [({}, "nixl-ucx"), ({"engine": "sglang"}, "mooncake-te"), ({"kv_backend": "none"}, None)],
)
def test_the_transfer_backend_priced_is_recorded(overrides: dict[str, Any], backend: str | None) -> None:
    sc = _scenario(**overrides)
    del sc["prfaas"]
    res = resolve(scenario_from_dict(sc, source="test", base_dir=ROOT), open_catalog())
    assert priced_record(res)["transfer_backend"] == backend


def test_prfaas_reports_carry_the_record_exports_read() -> None:
    for name in ("prfaas-h200-h100", "prfaas-h200-h20"):
        for plan in json.loads((GOLDEN / f"{name}.json").read_text())["plans"]:
            roles = plan["priced"]["roles"]
            assert set(roles) == {"prefill", "decode", "remote-prefill"}
            assert plan["priced"]["routing"]["remote-prefill"] == "least-loaded"  # the examples' routing
    colocated = json.loads((GOLDEN / "opt-13b-a100-distserve.json").read_text())["plans"]
    assert all(p["priced"]["transfer_backend"] is None for p in colocated if p["mode"] == "colocated")
