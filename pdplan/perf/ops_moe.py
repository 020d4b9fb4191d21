"""MoE operators of a forward pass: the FFN block (dense MLP, routed experts, shared experts, router) and the
expert-parallel communication, per GPU.

Split out of :mod:`pdplan.perf.ops` (sharding rules in its docstring), which assembles the whole pass.
"""

from __future__ import annotations

import numpy as np

from pdplan.perf.moe import MoeLayerShape, moe_shape
from pdplan.perf.op_types import AllToAllOp, MoeOp, Op, PassShape, WeightGatherOp, fused_gemms, gemm_op
from pdplan.specs.model import ModelSpec
from pdplan.specs.model_parts import GemmShape
from pdplan.types import ArrayLike, FloatArray


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


def ffn_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[Op]:
    moe = model.moe
    n_moe = float(len(model.moe_layer_indices))
    n_dense = float(model.num_layers) - n_moe
    dense = (
        [gemm_op(f"mlp.{g.name}", n_dense, g, m, s.tp) for g in model.mlp_gemms(model.intermediate_size)]
        if n_dense
        else []
    )
    ops: list[Op] = [*fused_gemms(dense, ("gate", "up"), "mlp.gate_up")]
    if moe is None:
        return ops
    ops += expert_ops(model, s, m)
    if moe.num_shared_experts:
        width = moe.shared_expert_intermediate_size * moe.num_shared_experts
        shared = [gemm_op(f"moe.shared_{g.name}", n_moe, g, m, s.tp) for g in model.mlp_gemms(width)]
        ops += fused_gemms(shared, ("shared_gate", "shared_up"), "moe.shared_gate_up")
    router = GemmShape("router", model.hidden_size, moe.num_experts)
    # never quantized (pdplan.specs.model_parts.unquantized_bytes)
    ops.append(gemm_op("moe.router", n_moe, router, m, s.tp, bf16=True))
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
        dispatched=0.0 if gather else np.asarray(s.ep, dtype=np.float64) > 1.0,
    )
    weights = layer.routing().hit * layer.matrices * layer.hidden * layer.inter_per_gpu * layer.weight_bytes
    experts = MoeOp("moe.experts", n_moe, layer, weight_bytes=weights + 0.0 * s.tp)
    return [experts, *_ep_comm_ops(model, s, layer, total, gather=gather)]


def _ep_comm_ops(model: ModelSpec, s: PassShape, layer: MoeLayerShape, total: FloatArray, *, gather: bool) -> list[Op]:
    """The EP communication of each MoE layer (see :func:`expert_ops`): the ZeRO-Prefill weight all-gather, or the
    dispatch + combine all-to-all when EP > 1 spreads the tokens over DP ranks; none otherwise."""
    moe = model.moe
    assert moe is not None
    n_moe = float(len(model.moe_layer_indices))
    group = s.tp * s.dp
    wide = bool(np.any(np.asarray(s.ep) > 1.0))
    ep = np.asarray(s.ep, dtype=np.float64) + 0.0 * s.tp
    if gather:
        layer_bytes = np.asarray(float(model.layer_param_counts().expert * moe.num_experts) * layer.weight_bytes)
        return [WeightGatherOp("ep.weight_gather", n_moe, ep, group, layer_bytes)]
    if wide and float(np.max(np.asarray(s.dp))) > 1.0:  # tokens spread over DP ranks: dispatch + combine
        return [
            AllToAllOp(
                "ep.all_to_all",
                n_moe,
                tokens=total / group,
                ep=ep,
                group_gpus=group,
                hidden=model.hidden_size,
                top_k=moe.experts_per_token,
                num_experts=moe.num_experts,
                low_latency=s.phase == "decode",  # DeepEP's low-latency mode decodes
            )
        ]
    return []
