"""The engine arguments that carry a plan's numbers into vLLM and SGLang (and their Dynamo workers).

vLLM (vllm-project/vllm ``vllm/engine/arg_utils.py``): ``--tensor-parallel-size``, ``--pipeline-parallel-size``,
``--data-parallel-size`` and ``--enable-expert-parallel`` (EP size = TP × DP), ``--max-num-seqs``,
``--max-num-batched-tokens``, ``--gpu-memory-utilization``, ``--quantization fp8`` (online FP8 weights,
docs/features/quantization/fp8.md), ``--kv-cache-dtype fp8``, ``--[no-]enable-chunked-prefill``.

SGLang (sgl-project/sglang ``docs/advanced_features/server_arguments.md``): ``--tp-size`` is the instance's GPU
count, so attention data parallelism is ``--tp-size TP×DP --dp-size DP --enable-dp-attention`` (as in
docs/advanced_features/pd_disaggregation.md's DeepSeek example); ``--pp-size``, ``--ep-size``,
``--max-running-requests`` (the batch limit), ``--mem-fraction-static`` (weights + KV pool, the nearest knob to vLLM's
``gpu_memory_utilization``), ``--chunked-prefill-size`` (``-1`` disables chunking; under attention DP SGLang divides
it by the DP size, so the per-rank budget × DP is written: :func:`sglang_chunk`), ``--quantization fp8``,
``--kv-cache-dtype fp8_e4m3``.

A plan whose KV block size was searched (``kv_block_tokens``) and differs from the engine profile's default
(``kv_connector.block_tokens``: vLLM 16, SGLang 1) gets vLLM's ``--block-size`` / SGLang's ``--page-size``.

Batch limits go where pdplan's model uses them: ``max_num_seqs`` bounds the decode batch (decode and colocated
roles); the token budget is ``max_num_batched_tokens`` for prefill and decode roles, and the colocated chunk
(``prefill_chunk_tokens``) for colocated chunked plans, whose TPOT pdplan priced with that chunk.
"""

from __future__ import annotations

import json

from pdplan.io.engines import load_engine
from pdplan.report.export.cache import cache_flags, plan_cache
from pdplan.report.export.common import Chosen, Engine, ExportContext, base_role
from pdplan.specs.export import PlanRole

Flags = list[tuple[str, str | None]]


def _parallel_vllm(role: PlanRole) -> Flags:
    out: Flags = [("--tensor-parallel-size", str(role.tp))]
    if role.pp > 1:
        out.append(("--pipeline-parallel-size", str(role.pp)))
    if role.dp > 1:
        out.append(("--data-parallel-size", str(role.dp)))
    if role.ep > 1:
        out.append(("--enable-expert-parallel", None))
    return out


def _parallel_sglang(role: PlanRole) -> Flags:
    out: Flags = [("--tp-size", str(role.tp * role.dp))]
    if role.dp > 1:
        out += [("--dp-size", str(role.dp)), ("--enable-dp-attention", None)]
    if role.pp > 1:
        out.append(("--pp-size", str(role.pp)))
    if role.ep > 1:
        out.append(("--ep-size", str(role.ep)))
    return out


def token_budget(chosen: Chosen, ctx: ExportContext, role_name: str) -> int | None:
    """Tokens per engine step the plan was priced with for this role: ``priced.roles.<role>.max_num_batched_tokens``,
    else (older documents) the colocated chunk or ``assumptions.engine_defaults``; None if the document does not say."""
    priced = chosen.plan.priced_role(role_name)
    if priced is not None and priced.max_num_batched_tokens is not None:
        return priced.max_num_batched_tokens
    if role_name == "colocated" and chosen.plan.scheduler == "chunked":
        return ctx.colocated_chunk_tokens
    return chosen.doc.assumptions.engine_defaults.max_num_batched_tokens


def vllm_max_num_seqs(max_num_seqs: int, dp: int, budget: int | None) -> int:
    """vLLM's ``--max-num-seqs`` for an instance the plan caps at ``max_num_seqs`` sequences: per data-parallel engine
    (vLLM starts ``dp`` engines, each with its own scheduler and cap: ``vllm/v1/engine/core.py``, one
    ``EngineCore`` per DP rank), so ``ceil(max_num_seqs / dp)``; and at most the step's token budget, which vLLM
    requires (``SchedulerConfig``: "max_num_batched_tokens must be greater than or equal to max_num_seqs"; a
    decoding sequence takes one token of the budget, so no more than ``budget`` can run in a step anyway)."""
    per_engine = -(-max_num_seqs // dp)
    return per_engine if budget is None else min(per_engine, budget)


def batch_cap_warnings(chosen: Chosen, ctx: ExportContext, engine: Engine) -> list[str]:
    """Where the vLLM batch cap written differs from the plan's: a cap above the step's token budget."""
    plan = chosen.plan
    if engine != "vllm" or plan.max_num_seqs is None:
        return []
    out = []
    for role_name, role in plan.roles():
        budget = token_budget(chosen, ctx, role_name)
        if base_role(role_name) != "prefill" and budget is not None and -(-plan.max_num_seqs // role.dp) > budget:
            out.append(
                f"{role_name}: the plan caps the batch at {plan.max_num_seqs} sequences but its step budget is "
                f"{budget} tokens; vLLM requires max-num-batched-tokens >= max-num-seqs, so --max-num-seqs "
                f"{vllm_max_num_seqs(plan.max_num_seqs, role.dp, budget)} is written (no step runs more sequences)"
            )
    return out


def _batching(chosen: Chosen, ctx: ExportContext, role_name: str, engine: Engine) -> Flags:
    plan, out = chosen.plan, Flags()
    budget = token_budget(chosen, ctx, role_name)
    if plan.max_num_seqs is not None and base_role(role_name) != "prefill":
        if engine == "vllm":
            role = dict(plan.roles())[role_name]
            out.append(("--max-num-seqs", str(vllm_max_num_seqs(plan.max_num_seqs, role.dp, budget))))
        else:
            out.append(("--max-running-requests", str(plan.max_num_seqs)))
    if engine == "vllm":
        if budget is not None:
            out.append(("--max-num-batched-tokens", str(budget)))
        if role_name == "colocated" and plan.scheduler is not None:
            out.append(
                ("--enable-chunked-prefill" if plan.scheduler == "chunked" else "--no-enable-chunked-prefill", None)
            )
    elif role_name == "colocated" and plan.scheduler == "prefill-first":
        out.append(("--chunked-prefill-size", "-1"))
    elif budget is not None:
        out.append(("--chunked-prefill-size", str(sglang_chunk(budget, dict(plan.roles())[role_name]))))
    return out


def sglang_chunk(budget: int, role: PlanRole) -> int:
    """SGLang's ``--chunked-prefill-size`` that gives each attention-DP rank the ``budget`` pdplan priced: SGLang
    0.5.11 divides the flag by the DP size under ``--enable-dp-attention`` (``sglang/srt/server_args.py``,
    ``ServerArgs._handle_data_parallelism``: ``chunked_prefill_size // dp_size``; ``engines.sglang.sources.
    dp_attention_chunk`` in pdplan/data/export/targets.yaml), while pdplan prices each attention-DP rank, which
    prefills its own requests, with the budget (``priced.roles.<role>.max_num_batched_tokens``: the transfer chunk,
    the per-GPU workspace and SGLang's memory-fraction rule in pdplan/serving/engine_bind.py), so ``budget × dp`` is
    written (``budget`` at DP 1)."""
    return budget * role.dp


def sglang_mem_fraction(ctx: ExportContext, role: PlanRole) -> float | None:
    """SGLang's own ``mem_fraction_static`` for one instance of ``role``: ``(M − reserved) / M`` with its reserve
    rule (python/sglang/srt/server_args.py; the packaged SGLang profile's ``kv_memory``,
    pdplan/data/engines/sglang.yaml, :meth:`pdplan.specs.engine.KvMemory.usable_fraction`, at the GPU's memory
    class: chunk budget and CUDA-graph batch) over TP × PP GPUs and with attention DP where DP > 1, as pdplan prices
    an SGLang instance (:func:`pdplan.serving.engine_bind.with_engine`); None without the
    profile or the GPU's memory."""
    facts = ctx.gpus[role.gpu]
    if ctx.sglang is None or facts.memory_bytes <= 0:
        return None
    cls = ctx.sglang.limits.for_gpu(role.gpu, facts.memory_bytes)
    return ctx.sglang.kv_memory.usable_fraction(
        facts.memory_bytes,
        chunk_tokens=cls.max_batched_tokens,
        graph_seqs=cls.cuda_graph_max_seqs or 0,
        gpus=role.tp * role.pp,
        dp_attention=role.dp > 1,
    )


def memory_fraction(chosen: Chosen, ctx: ExportContext, role_name: str, engine: Engine) -> float | None:
    """The memory share to write: the priced one (``priced.roles.<role>``, else ``assumptions.engine_defaults``);
    for SGLang, when the plan was priced with another engine, SGLang's own rule (:func:`sglang_mem_fraction`), not
    vLLM's ``gpu_memory_utilization`` (issue #25)."""
    priced_engine = chosen.plan.priced.engine if chosen.plan.priced is not None else chosen.doc.engine_name
    if engine == "sglang" and priced_engine != "sglang":
        return sglang_mem_fraction(ctx, dict(chosen.plan.roles())[role_name])
    priced = chosen.plan.priced_role(role_name)
    if priced is not None and priced.gpu_memory_utilization is not None:
        return priced.gpu_memory_utilization
    return chosen.doc.assumptions.engine_defaults.gpu_memory_utilization


def _memory_and_dtype(chosen: Chosen, ctx: ExportContext, role_name: str, engine: Engine) -> Flags:
    out = Flags()
    fraction = memory_fraction(chosen, ctx, role_name, engine)
    if fraction is not None:
        out.append(("--gpu-memory-utilization" if engine == "vllm" else "--mem-fraction-static", f"{fraction:.4g}"))
    priced = chosen.plan.priced_role(role_name)
    if priced is not None and priced.max_model_len is not None:
        out.append(("--max-model-len" if engine == "vllm" else "--context-length", str(priced.max_model_len)))
    dtype, kv_dtype = chosen.doc.input_str("dtype"), chosen.doc.input_str("kv_dtype")
    if dtype == "bf16":
        out.append(("--dtype", "bfloat16"))
    elif dtype == "fp8":
        out.append(("--quantization", "fp8"))
    if kv_dtype == "fp8":
        out.append(("--kv-cache-dtype", "fp8" if engine == "vllm" else "fp8_e4m3"))
    connector = load_engine(engine).kv_connector
    block = chosen.plan.kv_block_tokens
    if block is not None and connector is not None and block != connector.block_tokens:
        out.append(("--block-size" if engine == "vllm" else "--page-size", str(block)))
    return out


def moe_flags(chosen: Chosen, role_name: str, role: PlanRole, engine: Engine) -> Flags:
    """The MoE mechanisms the role was priced with, in the engine's terms (module docstring of
    pdplan/search/priced.py; flags: pdplan/data/export/engine_flags.yaml). DeepEP (``deepgemm_wideep``): SGLang
    ``--moe-a2a-backend deepep --deepep-mode normal|low_latency|auto`` (normal in prefill, low latency in decode, as
    the SGLang profile prices it), vLLM ``--all2all-backend deepep_high_throughput|deepep_low_latency``; two-batch
    overlap: SGLang ``--enable-two-batch-overlap``, vLLM ``--enable-dbo`` (dual batch overlap); redundant experts:
    SGLang ``--enable-eplb --ep-num-redundant-experts N``, vLLM ``--enable-eplb --eplb-config
    '{"num_redundant_experts":N}'``."""
    priced = chosen.plan.priced_role(role_name)
    if priced is None or role.ep <= 1:
        return []
    out = Flags()
    if priced.moe_kernel == "deepgemm_wideep":
        if engine == "sglang":
            mode = {"prefill": "normal", "decode": "low_latency"}.get(base_role(role_name), "auto")
            out += [("--moe-a2a-backend", "deepep"), ("--deepep-mode", mode)]
        else:
            backend = "deepep_low_latency" if role_name == "decode" else "deepep_high_throughput"
            out.append(("--all2all-backend", backend))
    if priced.two_batch_overlap:
        out.append(("--enable-two-batch-overlap" if engine == "sglang" else "--enable-dbo", None))
    if priced.redundant_experts > 0:
        out.append(("--enable-eplb", None))
        if engine == "sglang":
            out.append(("--ep-num-redundant-experts", str(priced.redundant_experts)))
        else:
            config = json.dumps({"num_redundant_experts": priced.redundant_experts}, separators=(",", ":"))
            out.append(("--eplb-config", config))
    return out


def role_engine_flags(chosen: Chosen, ctx: ExportContext, role_name: str, role: PlanRole, engine: Engine) -> Flags:
    """Parallelism, batching, memory, dtype, MoE and cache flags for one role on ``engine``."""
    parallel = _parallel_vllm(role) if engine == "vllm" else _parallel_sglang(role)
    flags = parallel + _batching(chosen, ctx, role_name, engine) + _memory_and_dtype(chosen, ctx, role_name, engine)
    flags += moe_flags(chosen, role_name, role, engine)
    return flags + cache_flags(plan_cache(chosen, ctx), role_name, role, engine)
