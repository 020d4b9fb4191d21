"""PrfaaS plans export both clusters (issue #25): the local prefill/decode deployment and the remote prefill cluster,
with the prompt-length threshold named where no router can apply it (pdplan/report/export/routing.py).

The golden prfaas-h200-h100 report's rank 1: 1P3D H100 TP4 locally, 2 x H200 TP4 remote prefill over a 100 Gb/s DCI,
threshold 28,992.04 tokens (prompts of 28,993 tokens or more go remote, so the rule reads "more than 28992"; 28,926.25
before issue #23 item 2 fitted the vllm step_s jointly on H100 and H200 rows).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.export_plans import GOLDEN, export

from pdplan.errors import SpecError
from pdplan.io.export_data import read_plan_document
from pdplan.report.export import ExportResult, plan_gpus
from pdplan.specs.export import PlanDocument

PRFAAS = GOLDEN / "prfaas-h200-h100.json"


def _doc() -> PlanDocument:
    return read_plan_document(str(PRFAAS))


def _request_doc(tmp_path: Path) -> PlanDocument:
    """The same plan priced request-wise (what vLLM's connector and TensorRT-LLM run)."""
    doc = json.loads(PRFAAS.read_text())
    doc["plans"][0]["granularity"] = "request"
    path = tmp_path / "prfaas-request.json"
    path.write_text(json.dumps(doc))
    return read_plan_document(str(path))


def _flags(result: ExportResult, role: str) -> dict[str, str | None]:
    return dict(next(c for c in result.commands if c.role == role).flags)


def test_the_remote_cluster_is_a_prefill_role_on_its_own_gpus() -> None:
    doc = _doc()
    assert plan_gpus(doc, 1, "t") == ["h100-sxm", "h200-sxm"]
    result = export(doc, 1, "sglang")
    remote, local = _flags(result, "remote-prefill"), _flags(result, "prefill")
    assert remote["--disaggregation-mode"] == "prefill"
    assert remote["--tp-size"] == "4"
    assert "--max-running-requests" not in remote  # a prefill role: no decode batch cap
    assert remote["--mem-fraction-static"] != local["--mem-fraction-static"]  # SGLang's rule at H200's 141 GB
    assert "remote-prefill: 2 x TP4 (4 GPUs each) on h200-sxm" in result.text
    assert "# PrfaaS: prompts of more than 28992 tokens are prefilled on the remote-prefill cluster" in result.text


def test_two_fronts_and_one_line_for_the_length_rule() -> None:
    result = export(_doc(), 1, "sglang")
    router, remote = _flags(result, "router"), _flags(result, "remote-router")
    assert (router["--port"], remote["--port"]) == ("8000", "8001")
    assert "REMOTE_PREFILL_HOSTS" in result.text
    lines = [w for w in result.warnings if "prompt length" in w]
    assert len(lines) == 1
    assert "more than 28992 tokens to the remote-router (port 8001" in lines[0]
    assert "\n" not in lines[0]


def test_vllm_runs_a_second_proxy_over_the_remote_cluster(tmp_path: Path) -> None:
    result = export(_request_doc(tmp_path), 1, "vllm")
    remote = next(c for c in result.commands if c.role == "remote-prefill")
    flags = dict(remote.flags)
    assert json.loads(str(flags["--kv-transfer-config"]))["kv_role"] == "kv_producer"
    assert flags["--port"] == '"$((8100 + SLOT))"'
    assert _flags(result, "remote-proxy")["--port"] == "8193"
    assert sum("remote-proxy (port 8193" in w for w in result.warnings) == 1


def test_dynamo_writes_both_clusters_pinned_to_their_gpus() -> None:
    result = export(_doc(), 1, "dynamo", "sglang")
    services = yaml.safe_load(result.text)["spec"]["services"]
    remote = services["remote-prefill"]
    assert (remote["subComponentType"], remote["replicas"]) == ("prefill", 2)
    assert remote["extraPodSpec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    args = remote["extraPodSpec"]["mainContainer"]["args"]
    assert args[args.index("--disaggregation-mode") + 1] == "prefill"
    assert sum("dynamo.global_router" in w for w in result.warnings) == 1


def test_trtllm_refuses_a_prfaas_plan_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="Prefill-as-a-Service") as err:
        export(_request_doc(tmp_path), 1, "trtllm")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("prfaas", "message"),
    [
        ({"threshold_tokens": float("inf")}, "threshold_tokens"),
        ({"threshold_tokens": -5}, "threshold_tokens"),
        ({"remote": {"gpu": "h200-sxm", "tp": 0, "count": 2}}, "tp"),
        ({"remote": {"gpu": "no-such-gpu", "tp": 4, "count": 2}}, "no-such-gpu"),
    ],
)
def test_a_malformed_prfaas_record_is_refused(tmp_path: Path, prfaas: dict[str, Any], message: str) -> None:
    doc = json.loads(PRFAAS.read_text())
    doc["plans"][0]["prfaas"] |= prfaas
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecError, match=message):
        export(read_plan_document(str(path)), 1, "sglang")
