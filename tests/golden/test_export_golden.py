"""``pdplan export`` output per target, byte for byte, from optimise reports made here (not read from the other
goldens, so one ``pytest tests/golden --update-golden`` run regenerates everything in any order).

Inputs: ``examples/default.yaml`` rank 1 (disaggregated, one GPU type, request-wise KV transfer: the one
granularity its default engine's connector runs, so every target takes it),
``examples/opt-13b-a100-distserve.yaml`` rank 1 (colocated: one instance; and with ``colocated_count=4``, four TP2
instances on one 8-GPU node, behind each target's front: vLLM's data parallelism, SGLang's router, Dynamo's frontend,
TensorRT-LLM's note), and the synthetic report fixture's rank 3 (H100
prefill, H20 decode: mixed GPU types) from a document that records no engine settings, engine or dtypes, on Dynamo's
SGLang workers (the plan is priced with chunk-granularity KV transfer, which vLLM workers cannot run: refused).
KV-aware plans (prefix caching, affinity routing): ``examples/chat-sessions.yaml`` rank 3 (3P4D with a 1 TiB host-DRAM
tier per node: vLLM's MultiConnector on the prefillers and Dynamo's KV router) under vLLM and Dynamo, and
``examples/shared-system-prompt.yaml`` rank 1 (the SGLang router's cache_aware prefill policy). A PrfaaS plan,
``examples/prfaas-h200-h100.yaml`` rank 1 (layer-wise: SGLang), with both clusters: as a script with a second router
over the remote prefill cluster, and as one Dynamo graph. Instances wider than a node: the wide-EP example searched
request-wise with DP16 instances (``tests/support/export_plans.py`` ``wide-ep-request-2node``) rank 2, 2P2D of two
8-GPU nodes each, as vLLM's data-parallel ranks over nodes; and with DP8 instances and no two-batch overlap
(``wide-ep-request-no-tbo``) rank 1 on TensorRT-LLM (attention DP, WIDEEP MoE, load-balancer slots); and with DP16
instances and no two-batch overlap (``wide-ep-request-2node-no-tbo``) rank 1 on TensorRT-LLM, each instance one Slurm
MPI world of 16 ranks over two nodes (``srun ... trtllm-llmapi-launch trtllm-serve``). Dynamo's TensorRT-LLM workers:
``examples/default.yaml`` priced with the TensorRT-LLM engine profile (``default-trtllm``, dense, disaggregated) rank 1,
and the wide-EP example priced with it with DP8 instances and no two-batch overlap (``wide-ep-trtllm``, MoE) rank 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from support.export_plans import VARIANTS, variant_path
from support.optimized import Optimized
from support.plan_fixture import plan_result

from pdplan.io.catalog import open_catalog
from pdplan.io.export_data import read_plan_document
from pdplan.report import render_optimize
from pdplan.report.export import export_plan, plan_gpus
from pdplan.report.export.context import export_context

CASES = [
    ("default", 1, "dynamo", "vllm", "export_default_dynamo.yaml"),
    ("default", 1, "dynamo", "sglang", "export_default_dynamo_sglang.yaml"),
    ("default", 1, "vllm", "vllm", "export_default_vllm.sh"),
    ("default", 1, "sglang", "vllm", "export_default_sglang.sh"),
    ("default", 1, "trtllm", "vllm", "export_default_trtllm.sh"),
    ("opt-13b-a100-distserve", 1, "vllm", "vllm", "export_colocated_vllm.sh"),
    ("opt-13b-a100-distserve", 1, "dynamo", "vllm", "export_colocated_dynamo.yaml"),
    ("opt-13b-a100-distserve@4", 1, "vllm", "vllm", "export_colocated4_vllm.sh"),
    ("opt-13b-a100-distserve@4", 1, "sglang", "vllm", "export_colocated4_sglang.sh"),
    ("opt-13b-a100-distserve@4", 1, "dynamo", "vllm", "export_colocated4_dynamo.yaml"),
    ("opt-13b-a100-distserve@4", 1, "trtllm", "vllm", "export_colocated4_trtllm.sh"),
    ("fixture", 3, "dynamo", "sglang", "export_mixed_gpu_dynamo.yaml"),
    ("chat-sessions", 3, "vllm", "vllm", "export_chat_sessions_vllm.sh"),
    ("chat-sessions", 3, "dynamo", "vllm", "export_chat_sessions_dynamo.yaml"),
    ("shared-system-prompt", 1, "sglang", "vllm", "export_shared_system_prompt_sglang.sh"),
    ("prfaas-h200-h100", 1, "sglang", "vllm", "export_prfaas_sglang.sh"),
    ("prfaas-h200-h100", 1, "dynamo", "sglang", "export_prfaas_dynamo_sglang.yaml"),
    ("wide-ep-request-2node", 2, "vllm", "vllm", "export_wide_ep_2node_vllm.sh"),
    ("wide-ep-request-2node", 2, "sglang", "vllm", "export_wide_ep_2node_sglang.sh"),
    ("opt-13b-a100-distserve@8", 1, "vllm", "vllm", "export_colocated8_vllm.sh"),
    ("wide-ep-request-no-tbo", 1, "trtllm", "vllm", "export_wide_ep_trtllm.sh"),
    ("wide-ep-request-2node-no-tbo", 1, "trtllm", "vllm", "export_wide_ep_2node_trtllm.sh"),
    ("default-trtllm", 1, "dynamo", "trtllm", "export_default_dynamo_trtllm.yaml"),
    ("wide-ep-trtllm", 1, "dynamo", "trtllm", "export_wide_ep_dynamo_trtllm.yaml"),
]


def _report(name: str, optimized: Optimized) -> str:
    """``optimize --format json`` of an example (search time zeroed, the run shared through ``optimized``), or of the
    synthetic fixture as a document that records no engine settings, engine or dtypes (:func:`_unrecorded`)."""
    if "@" in name:  # NAME@Z: the example with Z colocated instances (optimize --colocated Z)
        example, count = name.split("@")
        result = optimized(example, colocated_count=int(count))
    elif name in VARIANTS:  # an example with changes (tests/support/export_plans.py), optimised as export checks do
        result = optimized(variant_path(name), analyse=False)
    else:
        result = plan_result() if name == "fixture" else optimized(name)
    text = render_optimize(result, "json")
    assert isinstance(text, str)
    return _unrecorded(text) if name == "fixture" else text


def _unrecorded(text: str) -> str:
    """The document without ``assumptions.engine_defaults``, ``assumptions.engine``, ``inputs.dtype`` and
    ``inputs.kv_dtype`` (a document from before pdplan recorded them): the export says what it cannot know."""
    doc = json.loads(text)
    for section, key in (
        ("assumptions", "engine_defaults"),
        ("assumptions", "engine"),
        ("inputs", "dtype"),
        ("inputs", "kv_dtype"),
    ):
        del doc[section][key]
    return json.dumps(doc)


@pytest.mark.xdist_group("optimized")
@pytest.mark.parametrize(("plan", "rank", "target", "backend", "name"), CASES)
def test_export_matches_golden(
    plan: str,
    rank: int,
    target: str,
    backend: str,
    name: str,
    golden: Callable[[str, str], None],
    optimized: Optimized,
) -> None:
    source = "tests/support/plan_fixture.py" if plan == "fixture" else f"examples/{plan.split('@')[0]}.yaml"
    if plan in VARIANTS:
        source = f"examples/{VARIANTS[plan][0]}.yaml ({plan})"
    doc = read_plan_document("-", _report(plan, optimized))
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, rank, source), source=source)
    result = export_plan(doc, target=target, rank=rank, ctx=ctx, source=source, backend=backend)
    golden(name, result.text)
