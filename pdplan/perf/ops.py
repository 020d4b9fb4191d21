"""The operators of one forward pass, with their shapes per GPU under tensor parallelism.

A forward pass of a decoder-only model is enumerated as a short list of :class:`Op` records, each a kernel
family (GEMM, attention, elementwise, all-reduce, linear-attention scan) with its shape arrays and how many
times it runs per pass. Shapes broadcast over candidate arrays (``tokens``, ``tp`` ...), so one enumeration
serves thousands of configurations; :mod:`pdplan.perf.roofline` prices the ops with the kernel table.

Sharding follows Megatron-style tensor parallelism as vLLM/SGLang implement it (Shoeybi et al. 2019,
arXiv 1909.08053): Q/K/V, gate/up and expert gate/up are column-parallel (output features / tp), O, down and
expert down are row-parallel (input features / tp), each row-parallel layer ends in an all-reduce of the
activations (two per layer). K/V heads are split across ranks while tp <= n_kv_heads; beyond that each rank
keeps ceil(n_kv/tp) = 1 head, i.e. KV is replicated (docs/architecture.md §2). MLA's down-projections (q_a, kv_a) are
replicated and its latent cache is not sharded (vLLM DeepSeek-V2/V3 implementation). The LM head is
column-parallel over the vocabulary; in prefill it runs on the last token of each prompt only.
"""

from __future__ import annotations

import numpy as np

from pdplan.perf.op_types import AllReduceOp, ElementwiseOp, Op, PassShape, gemm_op
from pdplan.perf.ops_attention import attention_core_ops, attention_projection_ops
from pdplan.perf.ops_moe import ffn_ops
from pdplan.specs.model import ModelSpec
from pdplan.specs.model_parts import GemmShape
from pdplan.types import FloatArray


def _elementwise_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[ElementwiseOp]:
    """Norms with their residual adds, rotary embedding and the MLP activation: memory-bound kernels, one launch each.

    As vLLM runs a layer (fused add + RMSNorm twice, rotary once, SiLU·mul once), per token with b bytes/element:
    each norm reads x and the residual and writes both, 4·h·b; rotary reads and writes q and k, ≈ 4·(h/tp)·b;
    the activation reads gate and up and writes their product, 3·(I/tp)·b, with I the dense width or, for MoE, the
    top-k experts' widths plus the shared experts'. Separate launches matter at small batches, where each kernel
    costs its launch overhead regardless of bytes.
    """
    h = float(model.hidden_size)
    moe = model.moe
    layers = float(model.num_layers)
    ops = [ElementwiseOp("norm", 2.0 * layers, s.act_bytes * m * 4.0 * h + 0.0 * s.tp)]
    if moe is None:
        ops.append(ElementwiseOp("activation", layers, s.act_bytes * m * 3.0 * model.intermediate_size / s.tp))
    else:  # the routed experts' activation runs inside the fused MoE kernel (its measured time)
        n_moe = float(len(model.moe_layer_indices))
        if layers > n_moe:
            dense = s.act_bytes * m * 3.0 * model.intermediate_size / s.tp
            ops.append(ElementwiseOp("activation", layers - n_moe, dense))
        if moe.num_shared_experts:
            shared = s.act_bytes * m * 3.0 * moe.num_shared_experts * moe.shared_expert_intermediate_size / s.tp
            ops.append(ElementwiseOp("moe.shared_activation", n_moe, shared))
    if model.position_embedding == "rope":
        layers = float(model.num_kv_layers + model.num_swa_layers)
        ops.append(ElementwiseOp("rotary", layers, s.act_bytes * m * 4.0 * h / s.tp))
    return ops


def _head_ops(model: ModelSpec, s: PassShape) -> list[Op]:
    lm_tokens = s.batch / s.dp + 0.0 * s.tp  # prefill: last token of each prompt; decode: every sequence (per rank)
    head = GemmShape("lm_head", model.hidden_size, model.vocab_size)
    # vocabulary-parallel, never quantized (pdplan.specs.model_parts.unquantized_bytes)
    lm_head = gemm_op("lm_head", 1.0, head, lm_tokens, s.tp, bf16=True, n=np.ceil(model.vocab_size / s.tp))
    embed = s.new_tokens / s.dp * model.hidden_size * s.act_bytes * 2.0 + 0.0 * s.tp
    return [lm_head, ElementwiseOp("embedding", 1.0, embed)]


QK_NORM_VARIANCE_BYTES_PER_TOKEN = 8.0
"""A q/k RMSNorm over the whole projection (``qk_norm_span: layer``, MiniMax-M2) under TP: each GPU holds
heads/TP of the channels, so the mean square is a sum over GPUs. vLLM (``MiniMaxText01RMSNormTP.forward_qk``,
vllm/model_executor/layers/mamba/linear_attn.py) concatenates q's and k's local variances and all-reduces them once
per layer: 2 fp32 per token = 8 bytes. The message is tiny, so the
all-reduce costs its latency; at TP 1 it is free."""


def _allreduce_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[AllReduceOp]:
    """Two all-reduces per layer (after O and after down), message = tokens·h·act_bytes; a q/k norm spanning the
    whole projection adds one per attention layer (:data:`QK_NORM_VARIANCE_BYTES_PER_TOKEN`)."""
    message = m * model.hidden_size * s.act_bytes + 0.0 * s.tp
    ops = [AllReduceOp("tp.allreduce", 2.0 * model.num_layers, message, s.tp)]
    if model.qk_norm and model.qk_norm_span == "layer":
        layers = float(model.num_kv_layers + model.num_swa_layers)
        var = m * QK_NORM_VARIANCE_BYTES_PER_TOKEN + 0.0 * s.tp
        ops.append(AllReduceOp("attn.qk_norm_allreduce", layers, var, s.tp))
    # DP attention without EP: the MoE layers are TP over all tp·dp GPUs (token all-gather + reduce-scatter)
    if s.dp > 1.0 and not bool(np.any(np.asarray(s.ep) > 1.0)) and model.moe is not None:
        whole = m * s.moe_dp * model.hidden_size * s.act_bytes + 0.0 * s.tp
        n_moe = float(len(model.moe_layer_indices))
        ops.append(AllReduceOp("dp.moe_allreduce", n_moe, whole, s.tp * s.dp))
    return ops


def forward_ops(model: ModelSpec, shape: PassShape) -> list[Op]:
    """Every operator of one forward pass of ``model`` for ``shape`` (per GPU of one TP group)."""
    m = shape.new_tokens / shape.dp + 0.0 * shape.tp  # tokens of one DP rank
    return [
        *attention_projection_ops(model, shape, m),
        *attention_core_ops(model, shape),
        *ffn_ops(model, shape, m),
        *_elementwise_ops(model, shape, m),
        *_head_ops(model, shape),
        *_allreduce_ops(model, shape, m),
    ]
