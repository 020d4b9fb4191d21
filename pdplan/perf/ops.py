"""The operators of one forward pass, with their shapes per GPU under tensor parallelism.

A forward pass of a decoder-only model is enumerated as a short list of :class:`Op` records, each a kernel
family (GEMM, attention, elementwise, all-reduce, linear-attention scan) with its shape arrays and how many
times it runs per pass. Shapes broadcast over candidate arrays (``tokens``, ``tp`` ...), so one enumeration
serves thousands of configurations; :mod:`pdplan.perf.roofline` prices the ops with the kernel table.

Sharding follows Megatron-style tensor parallelism as vLLM/SGLang implement it (Shoeybi et al. 2019,
arXiv 1909.08053): Q/K/V, gate/up and expert gate/up are column-parallel (output features / tp), O, down and
expert down are row-parallel (input features / tp), each row-parallel layer ends in an all-reduce of the
activations (two per layer). K/V heads are split across ranks while tp <= n_kv_heads; beyond that each rank
keeps ceil(n_kv/tp) = 1 head, i.e. KV is replicated (ARCHITECTURE §2). MLA's down-projections (q_a, kv_a) are
replicated and its latent cache is not sharded (vLLM DeepSeek-V2/V3 implementation). The LM head is
column-parallel over the vocabulary; in prefill it runs on the last token of each prompt only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from pdplan.perf.moe import MoeLayerShape, moe_flops_bytes, moe_shape
from pdplan.perf.moe_routing import UNIFORM, RoutingLaw
from pdplan.perf.sliding_window import window_decode_context, window_prefill_shape
from pdplan.specs.model import ModelSpec
from pdplan.specs.model_parts import GemmShape
from pdplan.types import ArrayLike, FloatArray

OpKind = Literal[
    "gemm", "attn_prefill", "attn_decode", "linear_attn", "elementwise", "allreduce", "moe", "alltoall", "weight_gather"
]
Phase = Literal["prefill", "decode"]

# Column-parallel weights (output features split over tp); row-parallel ones split input features.
_COLUMN_PARALLEL = {"q", "k", "v", "q_b", "kv_b", "gate", "up", "in_proj_qkvz", "in_proj_ba"}
_ROW_PARALLEL = {"o", "down", "out_proj"}
_REPLICATED = {"q_a", "kv_a"}


@dataclass(frozen=True)
class Op:
    """One operator of a forward pass: kernel family, shape arrays, and runs per pass (per GPU)."""

    name: str
    kind: OpKind
    count: float
    dims: dict[str, FloatArray] = field(default_factory=dict)
    moe: MoeLayerShape | None = None  # kind "moe": the grouped expert GEMM's per-GPU shape


@dataclass(frozen=True)
class PassShape:
    """What one forward pass processes, as broadcastable arrays.

    prefill: ``batch`` prompts of ``tokens`` tokens each (new tokens; ``context`` = tokens).
    decode: one step for ``batch`` sequences at mean context ``tokens`` (one new token each).
    """

    phase: Phase
    batch: FloatArray
    tokens: FloatArray
    tp: FloatArray
    act_bytes: float = 2.0
    weight_bytes: float = 2.0
    kv_bytes: float = 2.0
    # MoE layers (pdplan.perf.moe): expert-parallel size, moe-TP split of the expert intermediate size
    # (None: tp, i.e. experts TP-sharded like dense layers), tokens of how many attention-DP ranks meet in
    # one MoE layer, and the routing law. Defaults reproduce plain tensor parallelism.
    ep: FloatArray | float = 1.0
    moe_tp: FloatArray | float | None = None
    moe_dp: FloatArray | float = 1.0
    routing: RoutingLaw = UNIFORM
    dp: float = 1.0
    """Attention data-parallel ranks; ``batch`` is the instance's, split evenly over them (:mod:`.expert_parallel`)."""
    expert_gather: bool = False
    """ZeRO-Prefill: all-gather expert weights instead of the EP all-to-all (prefill only)."""

    @property
    def new_tokens(self) -> FloatArray:
        """Tokens entering the GEMMs: batch·tokens in prefill, batch in decode (the whole instance)."""
        if self.phase == "prefill":
            return np.asarray(self.batch * self.tokens, dtype=np.float64)
        return np.asarray(self.batch, dtype=np.float64)


def _gemm_dims(shape: GemmShape, m: FloatArray, tp: FloatArray) -> dict[str, FloatArray]:
    """(m, n, k) per GPU for one weight under tensor parallelism."""
    n = np.full_like(tp, float(shape.out_features))
    k = np.full_like(tp, float(shape.in_features))
    if shape.name in _COLUMN_PARALLEL:
        n = np.ceil(n / tp)
    elif shape.name in _ROW_PARALLEL:
        k = np.ceil(k / tp)
    return {"m": m if tp.ndim == 0 else m + 0.0 * tp, "n": n, "k": k}


def kv_heads_per_gpu(model: ModelSpec, tp: FloatArray) -> FloatArray:
    """ceil(n_kv / tp): KV heads each rank holds (replicated once tp > n_kv)."""
    return np.ceil(model.num_kv_heads / tp)


def _fused(ops: list[Op], names: tuple[str, ...], fused_name: str) -> list[Op]:
    """Merge GEMMs that read the same input into one wider GEMM (n summed), as engines do.

    vLLM/SGLang run Q, K, V as one ``QKVParallelLinear`` and gate/up as one ``MergedColumnParallelLinear``;
    a single wide GEMM is more efficient than three narrow ones, so pricing them separately would overstate time.
    """
    parts = [op for op in ops if op.name.rsplit(".", 1)[-1].removesuffix("_proj") in names]
    if len(parts) < 2:
        return ops
    first = parts[0]
    dims = {**first.dims, "n": sum((op.dims["n"] for op in parts), np.zeros_like(first.dims["n"]))}
    merged = Op(fused_name, first.kind, first.count, dims)
    rest = [op for op in ops if op not in parts]
    return [merged, *rest]


def _attention_projection_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[Op]:
    ops: list[Op] = []
    n_full = float(model.num_kv_layers)
    for g in model.attention_gemms():
        dims = _gemm_dims(g, m, s.tp)
        if g.name in ("k", "v"):  # replicated heads when tp > n_kv
            dims["n"] = kv_heads_per_gpu(model, s.tp) * model.head_dim
        ops.append(Op(f"attn.{g.name}_proj", "gemm", n_full, dims))
    ops = _fused(ops, ("q", "k", "v"), "attn.qkv_proj")
    for g in model.linear_attention_gemms():
        n_lin = float(model.num_layers - model.num_kv_layers)
        ops.append(Op(f"linear_attn.{g.name}", "gemm", n_lin, _gemm_dims(g, m, s.tp)))
    return ops


def _window_dims(s: PassShape, dims: dict[str, FloatArray], model: ModelSpec) -> dict[str, FloatArray]:
    window = float(model.sliding_window or 0)
    if s.phase == "decode":
        return {**dims, "context": window_decode_context(dims["context"], window)}
    batch, context = window_prefill_shape(dims["batch"], dims["context"], window)
    return {**dims, "batch": batch, "context": context}


def _attention_core_ops(model: ModelSpec, s: PassShape) -> list[Op]:
    heads = np.ceil(model.num_attention_heads / s.tp)
    n_full = float(model.num_kv_layers)
    kv_full_layer = model.kv_bytes_per_token_per_layer(s.kv_bytes)
    # per-GPU share of a token's KV in one layer: its local heads (MLA's latent is not sharded)
    kv_share = 1.0 if model.mla is not None else kv_heads_per_gpu(model, s.tp) / model.num_kv_heads
    kv_per_token_layer = kv_full_layer * kv_share
    dims = {
        "batch": s.batch / s.dp + 0.0 * s.tp,
        "context": s.tokens + 0.0 * s.tp,
        "heads": heads,
        "kv_heads": kv_heads_per_gpu(model, s.tp),
        "head_dim": np.full_like(s.tp, model.head_dim),
        "kv_bytes_per_token": kv_per_token_layer + 0.0 * s.tp,
    }
    kind: OpKind = "attn_prefill" if s.phase == "prefill" else "attn_decode"
    ops = [Op("attn.core", kind, n_full - model.sliding_window_layers, dims)]
    if model.sliding_window is not None:  # the window layers' equivalent shape (pdplan.perf.sliding_window)
        ops.append(Op("attn.core_window", kind, float(model.sliding_window_layers), _window_dims(s, dims, model)))
    la = model.linear_attention
    if la is not None:
        state = la.num_value_heads * la.key_head_dim * la.value_head_dim * la.state_dtype_bytes
        lin = {
            "tokens": s.new_tokens / s.dp + 0.0 * s.tp,
            "batch": s.batch / s.dp + 0.0 * s.tp,
            "state_bytes": state / s.tp,
            "flops_per_token": 4.0 * la.num_value_heads * la.key_head_dim * la.value_head_dim / s.tp,
        }
        ops.append(Op("linear_attn.scan", "linear_attn", float(model.num_layers - n_full), lin))
    return ops


def expected_distinct_experts(num_experts: int, top_k: int, tokens: FloatArray) -> FloatArray:
    """E[# distinct experts hit] = E·(1 − (1 − k/E)^T) for T tokens routed uniformly to k of E experts.

    Uniform, independent routing is the maximum-entropy assumption; real routers are skewed, which touches
    fewer experts (so this is an upper bound on expert weight traffic). Example: E=8, k=2, T=1 → 2.0.
    """
    if top_k >= num_experts:  # every expert is hit by any token
        every: FloatArray = np.where(np.asarray(tokens) > 0.0, float(num_experts), 0.0)
        return every
    result: FloatArray = num_experts * -np.expm1(tokens * np.log1p(-top_k / num_experts))  # (1-k/E)^T, one exp
    return result


def _ffn_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[Op]:
    moe = model.moe
    n_moe = float(len(model.moe_layer_indices))
    n_dense = float(model.num_layers) - n_moe
    ops = (
        [Op(f"mlp.{g.name}", "gemm", n_dense, _gemm_dims(g, m, s.tp)) for g in model.mlp_gemms(model.intermediate_size)]
        if n_dense
        else []
    )
    ops = _fused(ops, ("gate", "up"), "mlp.gate_up")
    if moe is None:
        return ops
    ops += expert_ops(model, s, m)
    if moe.num_shared_experts:
        width = moe.shared_expert_intermediate_size * moe.num_shared_experts
        shared = [Op(f"moe.shared_{g.name}", "gemm", n_moe, _gemm_dims(g, m, s.tp)) for g in model.mlp_gemms(width)]
        ops += _fused(shared, ("shared_gate", "shared_up"), "moe.shared_gate_up")
    router = GemmShape("router", model.hidden_size, moe.num_experts)
    ops.append(Op("moe.router", "gemm", n_moe, _gemm_dims(router, m, s.tp)))
    return ops


def parallel_fields(tp: FloatArray, dp: int, ep: ArrayLike, moe_tp: ArrayLike | None = None) -> dict[str, object]:
    """The :class:`PassShape` DP/EP fields of an instance of ``tp × dp`` GPUs with expert parallelism ``ep``: the
    expert split ``moe_tp`` as given, else ``tp·dp/ep`` once DP or EP is in use (None: plain ``tp``), and the DP
    ranks whose tokens meet in each MoE layer (``moe_dp = dp``)."""
    e = np.asarray(ep, dtype=np.float64)
    split: FloatArray | None = None if moe_tp is None else np.asarray(moe_tp, dtype=np.float64)
    if split is None and (dp > 1 or bool(np.any(e > 1.0))):
        split = np.asarray(tp * dp / e, dtype=np.float64)
    return {"ep": e, "moe_tp": split, "moe_dp": np.asarray(float(dp)), "dp": float(dp)}


def expert_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[Op]:
    """The routed experts of the MoE layers as one grouped-GEMM op per layer (:mod:`pdplan.perf.moe`), plus the EP
    communication (:mod:`pdplan.perf.expert_parallel`).

    The ``m·moe_dp`` tokens of the instance's DP ranks meet in each MoE layer; each GPU holds E/ep experts split
    ``moe_tp`` ways. EP > 1 with attention DP (dp > 1: each rank holds its own tokens) adds the dispatch + combine
    all-to-all per layer; with dp = 1 the TP group's tokens are already on every GPU (the attention's all-reduce
    replicates them), each GPU runs its experts on all of them and the layer's TP all-reduce combines the outputs, so
    there is no all-to-all (vLLM ``FusedMoEParallelConfig.use_all2all_kernels = dp_size > 1 and use_ep``,
    vllm/model_executor/layers/fused_moe/config.py [P]; TensorRT-LLM and SGLang likewise run their all-to-all
    backends with attention DP [I]). With ``expert_gather`` (ZeRO-Prefill)
    each GPU instead runs all experts whole on its own ``T/(tp·dp)`` tokens after gathering the weights.
    """
    moe = model.moe
    assert moe is not None
    n_moe = float(len(model.moe_layer_indices))
    group = s.tp * s.dp
    total = m * s.moe_dp
    wide = bool(np.any(np.asarray(s.ep) > 1.0))
    gather = s.expert_gather and wide
    layer = moe_shape(
        total / group if gather else total,
        model.hidden_size,
        moe.expert_intermediate_size,
        moe.num_experts,
        moe.experts_per_token,
        ep=1.0 if gather else s.ep,
        moe_tp=1.0 if gather else (s.tp if s.moe_tp is None else s.moe_tp),
        weight_bytes=model.expert_bytes(s.weight_bytes),
        law=s.routing,
        gated=model.gated_mlp,
    )
    flops, _ = moe_flops_bytes(layer)
    weights = layer.routing().hit * layer.matrices * layer.hidden * layer.inter_per_gpu * layer.weight_bytes
    dims = {"tokens": layer.tokens + 0.0 * s.tp, "flops": flops + 0.0 * s.tp, "weight_bytes": weights + 0.0 * s.tp}
    ops = [Op("moe.experts", "moe", n_moe, dims, layer)]
    ep = np.asarray(s.ep, dtype=np.float64) + 0.0 * s.tp
    if gather:
        layer_bytes = np.asarray(float(model.layer_param_counts().expert * moe.num_experts) * layer.weight_bytes)
        dims = {"ep": ep, "group_gpus": group, "layer_expert_bytes": layer_bytes}
        ops.append(Op("ep.weight_gather", "weight_gather", n_moe, dims))
    elif wide and float(np.max(np.asarray(s.dp))) > 1.0:  # tokens spread over DP ranks: dispatch + combine
        routing = {
            "hidden": np.asarray(float(model.hidden_size)),
            "top_k": np.asarray(float(moe.experts_per_token)),
            "num_experts": np.asarray(float(moe.num_experts)),
            "low_latency": np.asarray(1.0 if s.phase == "decode" else 0.0),  # DeepEP low-latency mode decodes
        }
        dims = {"tokens": total / group, "ep": ep, "group_gpus": group, **routing}
        ops.append(Op("ep.all_to_all", "alltoall", n_moe, dims))
    return ops


def _elementwise_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[Op]:
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
    ops = [Op("norm", "elementwise", 2.0 * layers, {"bytes": s.act_bytes * m * 4.0 * h + 0.0 * s.tp})]
    if moe is None:
        ops.append(
            Op("activation", "elementwise", layers, {"bytes": s.act_bytes * m * 3.0 * model.intermediate_size / s.tp})
        )
    else:  # the routed experts' activation runs inside the fused MoE kernel (its measured time)
        n_moe = float(len(model.moe_layer_indices))
        if layers > n_moe:
            dense = s.act_bytes * m * 3.0 * model.intermediate_size / s.tp
            ops.append(Op("activation", "elementwise", layers - n_moe, {"bytes": dense}))
        if moe.num_shared_experts:
            shared = s.act_bytes * m * 3.0 * moe.num_shared_experts * moe.shared_expert_intermediate_size / s.tp
            ops.append(Op("moe.shared_activation", "elementwise", n_moe, {"bytes": shared}))
    if model.position_embedding == "rope":
        ops.append(Op("rotary", "elementwise", float(model.num_kv_layers), {"bytes": s.act_bytes * m * 4.0 * h / s.tp}))
    return ops


def _head_ops(model: ModelSpec, s: PassShape) -> list[Op]:
    lm_tokens = s.batch / s.dp + 0.0 * s.tp  # prefill: last token of each prompt; decode: every sequence (per rank)
    head = GemmShape("lm_head", model.hidden_size, model.vocab_size)
    dims = _gemm_dims(head, lm_tokens, s.tp)
    dims["n"] = np.ceil(model.vocab_size / s.tp)
    embed = {"bytes": s.new_tokens / s.dp * model.hidden_size * s.act_bytes * 2.0 + 0.0 * s.tp}
    return [Op("lm_head", "gemm", 1.0, dims), Op("embedding", "elementwise", 1.0, embed)]


def _allreduce_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[Op]:
    """Two all-reduces per layer (after O and after down), message = tokens·h·act_bytes."""
    message = m * model.hidden_size * s.act_bytes + 0.0 * s.tp
    ops = [Op("tp.allreduce", "allreduce", 2.0 * model.num_layers, {"bytes": message, "gpus": s.tp})]
    # DP attention without EP: the MoE layers are TP over all tp·dp GPUs (token all-gather + reduce-scatter)
    if s.dp > 1.0 and not bool(np.any(np.asarray(s.ep) > 1.0)) and model.moe is not None:
        whole = m * s.moe_dp * model.hidden_size * s.act_bytes + 0.0 * s.tp
        n_moe = float(len(model.moe_layer_indices))
        ops.append(Op("dp.moe_allreduce", "allreduce", n_moe, {"bytes": whole, "gpus": s.tp * s.dp}))
    return ops


def forward_ops(model: ModelSpec, shape: PassShape) -> list[Op]:
    """Every operator of one forward pass of ``model`` for ``shape`` (per GPU of one TP group)."""
    m = shape.new_tokens / shape.dp + 0.0 * shape.tp  # tokens of one DP rank
    return [
        *_attention_projection_ops(model, shape, m),
        *_attention_core_ops(model, shape),
        *_ffn_ops(model, shape, m),
        *_elementwise_ops(model, shape, m),
        *_head_ops(model, shape),
        *_allreduce_ops(model, shape, m),
    ]
