"""Dynamo's TensorRT-LLM workers (``pdplan export --to dynamo --backend trtllm``, issue #25 item 3): each worker's
command line parses as ai-dynamo 1.2.1's ``dynamo.trtllm`` parses it (``tests/support/engine_args.py``: the worker's
flags from ``pdplan/data/export/engine_args/dynamo-1.2.1.json``; the LLM-API arguments its flags and
``--override-engine-args`` make, against TensorRT-LLM's models), carries the plan's numbers, and the manifest
validates against the DynamoGraphDeployment CRD excerpt (``tests/unit/test_export_crd.py``).

Plans: the default example and the wide-EP example (DP8 instances, no two-batch overlap) priced with the TensorRT-LLM
engine profile (``tests/support/export_plans.py``: ``default-trtllm``, ``wide-ep-trtllm``), the wide-EP example with
DP16 instances over two nodes, the colocated OPT-13B golden and the KV-aware chat-sessions rank 3.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
import yaml
from support.dynamo_crd import problems
from support.engine_args import EngineRefusal, check
from support.export_argv import manifest_argvs
from support.export_plans import GOLDEN, document, export
from support.optimized import Optimized

from pdplan.io.export_data import engine_flags, read_plan_document
from pdplan.report.export import ExportResult
from pdplan.report.export import dynamo_trtllm as target

WORKER = "python3 -m dynamo.trtllm"


def _parsed(result: ExportResult) -> tuple[dict[str, Any], dict[str, argparse.Namespace]]:
    """(the manifest, service name → its command line as the program parses it), checked against the CRD, the
    program's parser and rules, and the flags engine_flags.yaml lists."""
    manifest: dict[str, Any] = yaml.safe_load(result.text)
    assert problems(manifest) == []
    lines = dict(zip(manifest["spec"]["services"], manifest_argvs(result.text), strict=True))
    parsed = {name: check(program, argv) for name, (program, argv) in lines.items()}
    accepted = set(engine_flags().programs[WORKER].flags)
    assert all(flag in accepted for cmd in result.commands if cmd.program == WORKER for flag, _ in cmd.flags)
    return manifest, parsed


def _overrides(ns: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(ns.override_engine_args)
    return out


@pytest.mark.xdist_group("optimized")
def test_a_dense_disaggregated_plan_runs_its_numbers_on_trtllm_workers(optimized: Optimized) -> None:
    """default priced with TensorRT-LLM: rank 1 is 10P2D, TP2 prefill / TP4 decode, 256 sequences per decode batch,
    8,192-token budget; least-work prefill routing → Dynamo's least-loaded."""
    doc = document("default-trtllm", optimized)
    plan = doc.plans[0]
    priced = plan["priced"]["roles"]  # type: ignore[index]
    manifest, parsed = _parsed(export(doc, 1, "dynamo", "trtllm"))
    assert manifest["spec"]["backendFramework"] == "trtllm"
    services = manifest["spec"]["services"]
    assert (services["TRTLLMPrefillWorker"]["replicas"], services["TRTLLMDecodeWorker"]["replicas"]) == (10, 2)
    prefill, decode = parsed["TRTLLMPrefillWorker"], parsed["TRTLLMDecodeWorker"]
    assert (prefill.disaggregation_mode, decode.disaggregation_mode) == ("prefill", "decode")
    assert (prefill.tensor_parallel_size, decode.tensor_parallel_size) == (2, 4)
    assert decode.max_batch_size == plan["max_num_seqs"] == 256
    assert prefill.max_batch_size is None  # the prefill pool's batch is its token budget: the worker's default
    assert prefill.max_num_tokens == priced["prefill"]["max_num_batched_tokens"] == 8192
    assert prefill.max_seq_len == priced["prefill"]["max_model_len"]
    for ns in (prefill, decode):
        assert _overrides(ns)["cache_transceiver_config"] == {"backend": "NIXL"}
        assert _overrides(ns)["dtype"] == "bfloat16"
        assert ns.publish_events_and_metrics is None  # no prefix affinity priced: no KV events
    assert parsed["Frontend"].router_mode == "least-loaded"
    image = services["TRTLLMDecodeWorker"]["extraPodSpec"]["mainContainer"]["image"]
    assert image == "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.2.1"


@pytest.mark.xdist_group("optimized")
def test_a_moe_plan_runs_attention_dp_expert_parallel_and_its_load_balancer(optimized: Optimized) -> None:
    """wide-EP priced with TensorRT-LLM, rank 1: DP8 EP8 TP1 instances → TensorRT-LLM's world of 8 ranks with
    attention DP, EP8, and 256 routed experts + 32 redundant = 288 load-balancer slots (36 per EP rank)."""
    doc = document("wide-ep-trtllm", optimized)
    _, parsed = _parsed(export(doc, 1, "dynamo", "trtllm"))
    workers = [ns for name, ns in parsed.items() if name != "Frontend"]
    assert len(workers) == 2
    for ns in workers:
        assert (ns.tensor_parallel_size, ns.enable_attention_dp, ns.expert_parallel_size) == (8, True, 8)
        assert _overrides(ns)["moe_config"] == {"load_balancer": {"num_slots": 288}}
        assert _overrides(ns)["kv_cache_config"] == {"dtype": "fp8"}


@pytest.mark.xdist_group("optimized")
def test_an_instance_over_two_nodes_is_one_mpi_world_with_root_allowed(optimized: Optimized) -> None:
    """DP16 EP16 instances of 8-GPU nodes: two nodes each (multinode.nodeCount 2, 8 GPUs per node), Open MPI allowed
    to run as root, and the world of 16 ranks in the worker's flags."""
    doc = document("wide-ep-request-2node-no-tbo", optimized)
    manifest, parsed = _parsed(export(doc, 1, "dynamo", "trtllm"))
    for name in ("TRTLLMPrefillWorker", "TRTLLMDecodeWorker"):
        service = manifest["spec"]["services"][name]
        assert service["multinode"] == {"nodeCount": 2}
        assert service["resources"]["limits"]["gpu"] == "8"
        assert {e["name"] for e in service["envs"]} == {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"}
        assert parsed[name].tensor_parallel_size == 16


def test_a_colocated_plan_runs_aggregated_workers_without_a_transceiver() -> None:
    doc = read_plan_document(str(GOLDEN / "opt-13b-a100-distserve.json"))
    manifest, parsed = _parsed(export(doc, 1, "dynamo", "trtllm"))
    assert set(manifest["spec"]["services"]) == {"Frontend", "TRTLLMWorker"}
    worker = parsed["TRTLLMWorker"]
    assert worker.disaggregation_mode is None  # the worker's default, prefill_and_decode
    assert "cache_transceiver_config" not in _overrides(worker)


@pytest.mark.xdist_group("optimized")
def test_a_kv_aware_plan_routes_by_kv_events_from_its_caching_workers(optimized: Optimized) -> None:
    """chat-sessions rank 3 (prefix affinity on the prefill pool): the frontend's KV router, KV events from the
    prefill workers only, and a warning that the prefix cache settings and the host tier are not written."""
    doc = document("chat-sessions", optimized)
    result = export(doc, 3, "dynamo", "trtllm")
    _, parsed = _parsed(result)
    assert parsed["Frontend"].router_mode == "kv"
    assert parsed["TRTLLMPrefillWorker"].publish_events_and_metrics is True
    assert parsed["TRTLLMDecodeWorker"].publish_events_and_metrics is None
    assert any("prefix caching and cache tiers (host-DRAM)" in w for w in result.warnings)


def test_a_wrong_flag_or_engine_key_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole path, export to check, catches a worker flag or an LLM-API key written wrongly."""
    doc = read_plan_document(str(GOLDEN / "default.json"))
    _parsed(export(doc, 1, "dynamo", "trtllm"))
    monkeypatch.setitem(target.WORKER_FLAGS, "max_batch_size", "--max-num-seqs")  # vLLM's name for it
    with pytest.raises(EngineRefusal, match="unrecognized arguments: --max-num-seqs"):
        _parsed(export(doc, 1, "dynamo", "trtllm"))
    monkeypatch.undo()
    real = target.llm_api_options
    monkeypatch.setattr(target, "llm_api_options", lambda *a: {**real(*a), "max_num_seqs": 256})
    with pytest.raises(EngineRefusal, match="max_num_seqs: not a field of BaseLlmArgs"):
        _parsed(export(doc, 1, "dynamo", "trtllm"))


def test_trtllm_workers_refuse_what_tensorrt_llm_cannot_run() -> None:
    wide_ep = read_plan_document(str(GOLDEN / "deepseek-v3-wide-ep.json"))  # priced with SGLang's two-batch overlap
    with pytest.raises(Exception, match="two-batch overlap, for which pdplan knows no TensorRT-LLM") as err:
        export(wide_ep, 1, "dynamo", "trtllm")
    assert "\n" not in str(err.value)
    default = read_plan_document(str(GOLDEN / "default.json"))
    layer = default.model_copy(
        update={"plans": [{**p, "granularity": "layer"} for p in default.plans]}
    )  # the default plan priced with layer-wise KV transfer
    with pytest.raises(Exception, match="TensorRT-LLM transfers KV per request") as err:
        export(layer, 1, "dynamo", "trtllm")
    assert "\n" not in str(err.value)
