"""Dynamo's TensorRT-LLM workers (``pdplan export --to dynamo --backend trtllm``): the worker command of each role.

Format followed: ai-dynamo 1.2.1 (PyPI wheel) ``dynamo/trtllm/backend_args.py`` (``DynamoTrtllmArgGroup``: the
worker's flags), ``dynamo/trtllm/args.py`` (``parse_args``: the runtime and worker groups only, then every word left
must be a ``--trtllm.<key>`` override) and ``dynamo/trtllm/workers/llm_worker.py`` (``init_llm_worker``: the flags
become LLM-API arguments in ``arg_map`` — ``--tensor-parallel-size`` → ``tensor_parallel_size``,
``--pipeline-parallel-size``, ``--expert-parallel-size`` → ``moe_expert_parallel_size``, ``--enable-attention-dp``,
``--max-batch-size``, ``--max-num-tokens``, ``--max-seq-len`` — then ``--extra-engine-args`` (a YAML file) and
``--override-engine-args`` (a JSON object, merged with ``deep_update``) are applied over them, and the result is
TensorRT-LLM's ``LLM`` arguments); ai-dynamo/dynamo ``examples/backends/trtllm/deploy/disagg_router.yaml`` and
``agg.yaml`` @ 0044eb90 (services ``TRTLLMPrefillWorker`` / ``TRTLLMDecodeWorker`` / ``TRTLLMWorker``,
``python3 -m dynamo.trtllm``, ``--disaggregation-mode prefill|decode``, ``--publish-events-and-metrics`` on the prefill
workers of a KV-routed graph) and ``disagg-multinode.yaml`` @ 0044eb90 (``spec.backendFramework: trtllm``, and
``OMPI_ALLOW_RUN_AS_ROOT`` / ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM`` for an instance over nodes, which the operator starts
with MPI).

The role's numbers are those of ``pdplan export --to trtllm`` (:func:`pdplan.report.export.trtllm.llm_api_options`,
one source for both targets): the keys the worker has a flag for are written as flags (checked against the worker's
parser, ``pdplan/data/export/engine_args/dynamo-1.2.1.json`` group ``trtllm_worker``); the others —
``enable_chunked_prefill``, ``dtype``, ``kv_cache_config.dtype``, ``moe_config`` and, on prefill and decode workers,
``cache_transceiver_config`` (the KV transfer between them: ``backend`` from ``pdplan/data/export/trtllm.yaml``,
NIXL; ai-dynamo/dynamo ``docs/backends/trtllm/kv-cache-transfer.md`` @ 0a99511b: NIXL with UCX is TensorRT-LLM's
default method in Dynamo) — go in one ``--override-engine-args`` JSON object, so the manifest needs no ConfigMap
(checked against the TensorRT-LLM LLM-API models, ``engine_args/trtllm-unpinned.json``). ``deep_update`` merges
only dicts into dicts: the worker builds ``kv_cache_config`` as a ``KvCacheConfig`` object, so an override's
``kv_cache_config`` (FP8 KV: ``{"dtype": "fp8"}``) replaces it whole, and ``--free-gpu-memory-fraction`` then has no
effect (TensorRT-LLM's ``KvCacheConfig`` default, 0.9, applies, as the worker's own default is). The worker has no
``--disaggregation-strategy`` in 1.2.1 (the flag is not in its parser): Dynamo's frontend routes each request to a
prefill worker, then to a decode worker (``dynamo.sources.sglang_prefill_router`` in
``pdplan/data/export/targets.yaml``: the automatic prefill router serves vLLM and TensorRT-LLM workers).

Not written, and said so: ``--free-gpu-memory-fraction`` (TensorRT-LLM's share of the memory left after weights,
:func:`pdplan.report.export.trtllm.trtllm_warnings`); the plan's prefix caching and host tier (TensorRT-LLM's block
reuse and host cache keys are not in the snapshot the keys are checked against); only the KV router's events are
(``--publish-events-and-metrics`` on the caching role of a plan priced with prefix affinity).
"""

from __future__ import annotations

import json
from typing import Any

from pdplan.errors import SpecError
from pdplan.report.export.cache import plan_cache
from pdplan.report.export.common import Chosen, ExportContext, LaunchCommand
from pdplan.report.export.trtllm import llm_api_options

PROGRAM = "python3 -m dynamo.trtllm"
SERVICE_NAMES = {"prefill": "TRTLLMPrefillWorker", "decode": "TRTLLMDecodeWorker", "colocated": "TRTLLMWorker"}
WORKER_FLAGS = {
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "moe_expert_parallel_size": "--expert-parallel-size",
    "max_batch_size": "--max-batch-size",
    "max_num_tokens": "--max-num-tokens",
    "max_seq_len": "--max-seq-len",
}
"""LLM-API argument → the Dynamo 1.2.1 TensorRT-LLM worker's flag that sets it (``arg_map`` in
``dynamo/trtllm/workers/llm_worker.py``); ``enable_attention_dp`` is the switch ``--enable-attention-dp``."""
MPI_ROOT_ENVS = [
    {"name": "OMPI_ALLOW_RUN_AS_ROOT", "value": "1"},
    {"name": "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "value": "1"},
]
"""Open MPI refuses to run as root without both (ai-dynamo/dynamo ``examples/backends/trtllm/deploy/
disagg-multinode.yaml`` @ 0044eb90 sets them for its workers over two nodes); written on a service whose instances
span nodes."""


def worker_command(chosen: Chosen, ctx: ExportContext, role_name: str) -> LaunchCommand:
    """``python3 -m dynamo.trtllm`` for one role (module docstring)."""
    options: dict[str, Any] = llm_api_options(chosen, ctx, role_name)
    flags: list[tuple[str, str | None]] = [("--model", ctx.model_id), ("--served-model-name", ctx.model_id)]
    if role_name != "colocated":
        flags.append(("--disaggregation-mode", role_name))
    for key, flag in WORKER_FLAGS.items():
        if key in options:
            flags.append((flag, str(options.pop(key))))
    if options.pop("enable_attention_dp", False):
        flags.append(("--enable-attention-dp", None))
    if options:
        flags.append(("--override-engine-args", json.dumps(options, separators=(",", ":"))))
    cache = plan_cache(chosen, ctx)
    if cache is not None and cache.affinity and role_name == cache.role:
        flags.append(("--publish-events-and-metrics", None))
    return LaunchCommand(role=role_name, program=PROGRAM, flags=tuple(flags))


def dynamo_trtllm_warnings(chosen: Chosen, ctx: ExportContext) -> list[str]:
    """What Dynamo's TensorRT-LLM workers do not run as the plan was priced (module docstring)."""
    out = [
        "Dynamo's TensorRT-LLM worker runs its scheduler with dynamic batch-size tuning (dynamo/trtllm/workers/"
        "llm_worker.py: DynamicBatchConfig enable_batch_size_tuning=True, GUARANTEED_NO_EVICT): --max-batch-size is "
        "a ceiling the runtime may batch below, so decode batches may be smaller than the plan's"
    ]
    cache = plan_cache(chosen, ctx)
    if cache is not None:
        tiers = [*cache.unwritten, *(["host-DRAM"] if cache.host_bytes > 0 else [])]
        out.append(
            "the plan's prefix caching"
            + (f" and cache tiers ({', '.join(tiers)})" if tiers else "")
            + " are not written for TensorRT-LLM (its kv_cache_config block reuse and host cache stay at the "
            "release's defaults)"
            + ("; the KV router's events are (--publish-events-and-metrics)" if cache.affinity else "")
        )
    return out


def engine_line(chosen: Chosen, ctx: ExportContext) -> str:
    """The header's engine line: the release the workers run and the profile the plan was priced with."""
    if ctx.trtllm is None:
        raise SpecError("the TensorRT-LLM export data (pdplan/data/export/trtllm.yaml) was not loaded")
    version = ctx.trtllm.version
    priced = chosen.doc.engine_name
    return (
        f"engine: targets TensorRT-LLM {version} (pinned by Dynamo {ctx.targets.dynamo.release}; the worker's flags: "
        "pdplan/data/export/engine_args/dynamo-1.2.1.json, its --override-engine-args keys: trtllm-*.json); the plan "
        "was priced with " + (f"the {priced} engine profile" if priced else "an unrecorded profile")
    )
