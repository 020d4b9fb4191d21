"""The routing each target's router runs (``routers`` in pdplan/data/export/targets.yaml): written as priced, or the
nearest with a warning, and checked against the routers' own argument snapshots."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from pdplan.io.catalog import open_catalog
from pdplan.io.export_data import export_targets
from pdplan.report.export import ExportResult, export_plan, plan_gpus
from pdplan.report.export.context import export_context
from pdplan.specs.base import validate_spec
from pdplan.specs.export import PlanDocument
from pdplan.types import Routing

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "pdplan" / "data" / "export" / "engine_args"


def _doc(policy: str) -> PlanDocument:
    plan: dict[str, Any] = {
        "mode": "disaggregated",
        "label": "3P1D h100-sxm TP2 / h100-sxm TP4 request",
        "prefill": {"gpu": "h100-sxm", "tp": 2, "pp": 1, "count": 3},
        "decode": {"gpu": "h100-sxm", "tp": 4, "pp": 1, "count": 1},
        "granularity": "request",
        "routing": policy,
        "max_num_seqs": 128,
        "num_gpus": 10,
        "goodput_rps": 12.5,
        "priced": {"engine": "vllm", "routing": {"prefill": policy, "decode": "random"}, "roles": {}},
    }
    data = {
        "plans": [plan],
        "inputs": {"model": {"name": "llama-3.1-70b"}, "dtype": "bf16", "kv_dtype": "bf16"},
        "assumptions": {"engine_defaults": {"gpu_memory_utilization": 0.85, "max_num_batched_tokens": 4096}},
    }
    return validate_spec(PlanDocument, data, "test")


def _export(doc: PlanDocument, target: str) -> ExportResult:
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, 1, "test"), source="test")
    return export_plan(doc, target=target, rank=1, ctx=ctx, source="test", backend="vllm")


def _flag(text: str, flag: str) -> str:
    """The value after ``flag`` in the script's commands (comment lines skipped)."""
    commands = [line for line in text.replace("\\\n", " ").splitlines() if not line.lstrip().startswith("#")]
    values = [args[args.index(flag) + 1] for args in map(shlex.split, commands) if flag in args]
    assert len(values) == 1, values
    return values[0]


def _router_mode(result: ExportResult) -> str:
    frontend = yaml.safe_load(result.text)["spec"]["services"]["Frontend"]["extraPodSpec"]["mainContainer"]["args"]
    return str(frontend[frontend.index("--router-mode") + 1])


@pytest.mark.parametrize("policy", ["least-loaded", "power-of-two", "random", "round-robin"])
def test_dynamo_writes_the_count_based_modes_as_priced(policy: str) -> None:
    result = _export(_doc(policy), "dynamo")
    assert _router_mode(result) == policy  # Dynamo's own names
    assert not [w for w in result.warnings if "routing" in w]
    if policy in ("least-loaded", "power-of-two"):  # router_args.py: no bootstrap overlap in disaggregated mode
        assert "no bootstrap overlap" in result.text
    else:
        assert "no bootstrap overlap" not in result.text


def test_dynamo_least_work_is_the_nearest_and_warned() -> None:
    result = _export(_doc("least-work"), "dynamo")
    assert _router_mode(result) == "least-loaded"
    assert any("has no least-work mode" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("policy", "written", "warned"),
    [
        ("power-of-two", "power_of_two", "compares the token loads it polls"),
        ("least-loaded", "power_of_two", "has no least-loaded policy"),
        ("least-work", "power_of_two", "has no least-work policy"),
        ("round-robin", "round_robin", None),
        ("random", "random", None),
    ],
)
def test_sglang_router_policy(policy: str, written: str, warned: str | None) -> None:
    result = _export(_doc(policy), "sglang")
    assert _flag(result.text, "--prefill-policy") == written
    routing = [w for w in result.warnings if "routing" in w]
    if warned is None:
        assert not routing
    else:
        assert any(warned in w for w in routing)


@pytest.mark.parametrize("policy", ["least-loaded", "power-of-two", "least-work"])
def test_vllm_proxy_warns_for_every_policy_but_round_robin(policy: str) -> None:
    assert any("toy proxy round-robins" in w for w in _export(_doc(policy), "vllm").warnings)


def _choices(snapshot: str, flag: str) -> set[str]:
    """The choices of ``flag`` in an argument snapshot (pdplan/data/export/engine_args/README.md)."""
    found: list[list[str]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if flag in node and isinstance(node[flag], dict) and node[flag].get("choices"):
                found.append(node[flag]["choices"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads((SNAPSHOTS / snapshot).read_text(encoding="utf-8")))
    assert found, f"{flag} has no choices in {snapshot}"
    return set(found[0])


@pytest.mark.parametrize(
    ("target", "snapshot"), [("sglang", "sglang-router-0.3.2.json"), ("dynamo", "dynamo-1.2.1.json")]
)
def test_router_data_matches_the_routers_own_choices(target: str, snapshot: str) -> None:
    data = export_targets().routers[target]  # type: ignore[index]
    assert data.flag is not None
    choices = _choices(snapshot, data.flag)
    named = set(data.runs.values()) | set(data.nearest.values()) | set(data.other)
    assert named == choices  # every choice named once: priced (runs), written for another (nearest) or not priced
    assert set(data.runs) | set(data.nearest) == set(get_args(Routing))  # every priced policy has a value


@pytest.mark.parametrize(("policy", "warned"), [("least-loaded", False), ("power-of-two", True), ("least-work", True)])
def test_trtllm_load_balancing_router(policy: str, warned: bool) -> None:
    # TensorRT-LLM's load_balancing router pops the server with the fewest active requests: least-loaded exactly
    result = _export(_doc(policy), "trtllm")
    assert "context_servers:\\n  num_instances: 3\\n  router:\\n    type: load_balancing" in result.text
    assert any("no such router" in w for w in result.warnings) == warned
