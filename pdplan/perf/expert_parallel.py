"""Expert parallelism (EP) and attention data parallelism (DP) of one instance: widths, all-to-all, weight gather.

An instance of ``tp × dp`` GPUs per pipeline stage runs attention as ``dp`` data-parallel ranks of ``tp``-way
tensor parallelism (each rank its own batch and KV cache) and its MoE layers as ``moe_tp × ep`` over the same GPUs,

    moe_tp = tp · dp / ep                           (AIConfigurator: tp·attention_dp == moe_tp·moe_ep)

so every MoE layer sees the tokens of all ``dp`` ranks (AIConfigurator MoeOp: "every dp rank's tokens all-gather
into the SHARED expert pool"). Dense layers (the attention projections, dense FFNs, shared experts, LM head) are
replicated across DP ranks and tensor-parallel within one: vLLM's data-parallel + EP deployment (each DP rank a full
replica of the non-expert layers) and SGLang's ``--enable-dp-attention --moe-dense-tp-size 1`` (dense FFN and LM head
data-parallel; LMSYS large-scale EP blog 2025-05-05, docs/mission_features.md §5.2).

**All-to-all** (EP > 1 with attention DP; with dp = 1 the tokens are replicated over the TP group and the layer's TP
all-reduce combines the experts' outputs: :func:`pdplan.perf.ops.expert_ops`): per MoE layer a dispatch (tokens to
their experts' GPUs) and a combine (expert outputs back), each moving ``tokens_per_gpu · min(top_k, E, ep − 1) · h ·
b`` bytes per GPU, dispatch at b = 1 (FP8 with block scales) and combine at b = 2 (BF16); over NVLink (the GPU's
scale-up bandwidth) while the ``tp·dp`` GPUs stay in one node, else over the scale-out NIC (50 GB/s per GPU). This is
AIConfigurator's ``alltoall_sol_ms`` (docs/mission_features.md §5.1) plus a per-call latency from the measured DeepEP
tables; DeepEP's normal mode serves prefill and its low-latency mode decode (SGLang large-scale EP). Constants:
``pdplan/data/expert_parallel.yaml``, passed in as :class:`~pdplan.specs.perf_data.ExpertParallelDefaults` (or inside
:class:`~pdplan.specs.perf_data.PerfData`): this module reads no file.

**ZeRO-Prefill weight gather** (arXiv 2605.02960, docs/mission_features.md §4): instead of routing tokens, each prefill
GPU all-gathers the next MoE layer's experts (the ``(ep − 1)/ep`` it does not hold) while it computes the current
layer, then runs every expert on its own tokens. The gather hides behind compute when the layer's compute time is at
least ``γ·t_gather`` (the paper's saturation threshold ``T = t_EP·F_GPU·γ`` in FLOPs); the exposed part is
``max(0, γ·t_gather − t_layer)`` per MoE layer (:func:`exposed_gather_s`).
"""

from __future__ import annotations

import numpy as np

from pdplan.perf.block_quant import block_split_error
from pdplan.perf.kernels import allreduce_time_s
from pdplan.perf.moe_a2a import a2a_time_s as fitted_a2a_s
from pdplan.perf.op_types import AllToAllOp, WeightGatherOp
from pdplan.specs.kernel_table import A2aMode, GpuPeaks, KernelTable
from pdplan.specs.model import ModelSpec
from pdplan.specs.perf_data import ExpertParallelDefaults, PerfData
from pdplan.types import ArrayLike, FloatArray


def moe_tp_size(tp: ArrayLike, dp: ArrayLike, ep: ArrayLike) -> FloatArray:
    """Tensor-parallel width of each expert: ``tp·dp/ep``."""
    return np.asarray(np.asarray(tp, dtype=np.float64) * np.asarray(dp, dtype=np.float64) / np.asarray(ep), float)


def parallelism_error(
    model: ModelSpec, tp: int, dp: int, ep: int, redundant_experts: int = 0, weight_bytes: float | None = None
) -> str | None:
    """Why ``(tp, dp, ep)`` cannot shard ``model`` (None when it can): EP needs an MoE model, must divide ``tp·dp``
    (``moe_tp`` whole) and the expert slots ``E + redundant`` (whole experts per GPU); with ``weight_bytes``, an FP8
    block-scaled checkpoint's experts must split ``moe_tp`` ways into whole blocks
    (:func:`pdplan.perf.block_quant.block_split_error`: the engines refuse to load them otherwise)."""
    if ep == 1:
        return _block_error(model, tp * dp, weight_bytes)
    if model.moe is None:
        return f"EP {ep} needs an MoE model; {model.name} is dense (use ep 1)"
    if (tp * dp) % ep:
        return f"EP {ep} must divide tp·dp = {tp * dp} GPUs (MoE layers split as moe_tp × ep over them)"
    slots = model.moe.num_experts + redundant_experts
    if slots % ep:
        parts = f"{model.moe.num_experts} + {redundant_experts} redundant"
        return f"EP {ep} does not divide {model.name}'s {slots} expert slots ({parts})"
    return _block_error(model, tp * dp // ep, weight_bytes)


def _block_error(model: ModelSpec, moe_tp: int, weight_bytes: float | None) -> str | None:
    return None if weight_bytes is None else block_split_error(model, moe_tp, weight_bytes)


def _link_bytes_per_s(
    group_gpus: FloatArray, gpus_per_node: float, scale_up_bytes_per_s: float, inter_node_bytes_per_s: float
) -> FloatArray:
    """NVLink inside a node, the scale-out NIC (``inter_node_bytes_per_s`` per GPU) once the EP group spans nodes."""
    return np.asarray(
        np.where(group_gpus > gpus_per_node, inter_node_bytes_per_s, scale_up_bytes_per_s), dtype=np.float64
    )


def a2a_time_s(
    tokens_per_gpu: ArrayLike,
    *,
    hidden: int,
    top_k: int,
    num_experts: int,
    ep: ArrayLike,
    group_gpus: ArrayLike,
    gpus_per_node: float,
    scale_up_bytes_per_s: float,
    mode: str,
    defaults: ExpertParallelDefaults,
) -> FloatArray:
    """Dispatch + combine of one MoE layer (s), ``mode`` "normal" (prefill) or "low_latency" (decode); 0 at EP 1;
    latencies, element bytes and the NIC rate from ``defaults`` (``pdplan/data/expert_parallel.yaml``).

    Example: 128 tokens per GPU, h = 7168, top-8, EP 72 across nodes at 50 GB/s, low-latency mode: 8 destinations ·
    128 · 7168 · (1 + 2) B = 22.02 MB → 440.4 µs + 21 µs latency = 461.4 µs."""
    args = (tokens_per_gpu, hidden, top_k, num_experts, ep, group_gpus, gpus_per_node, scale_up_bytes_per_s, mode)
    dispatch = sol_a2a_phase_s(*args, "dispatch", defaults)
    return np.asarray(dispatch + sol_a2a_phase_s(*args, "combine", defaults), dtype=np.float64)


def sol_a2a_phase_s(
    tokens_per_gpu: ArrayLike,
    hidden: int,
    top_k: int,
    num_experts: int,
    ep: ArrayLike,
    group_gpus: ArrayLike,
    gpus_per_node: float,
    scale_up_bytes_per_s: float,
    mode: str,
    phase: str,
    defaults: ExpertParallelDefaults,
) -> FloatArray:
    """The dispatch or the combine (``phase``) of :func:`a2a_time_s`: its latency plus its bytes over the link."""
    d = defaults
    e = np.asarray(ep, dtype=np.float64)
    dest = np.minimum(float(min(top_k, num_experts)), e - 1.0)
    dispatch = phase == "dispatch"
    per_elem = d.dispatch_bytes_per_element if dispatch else d.combine_bytes_per_element
    latency = (d.dispatch_latency_s if dispatch else d.combine_latency_s)[mode]
    bytes_ = np.asarray(tokens_per_gpu, dtype=np.float64) * dest * hidden * per_elem
    group = np.asarray(group_gpus, dtype=np.float64)
    bw = _link_bytes_per_s(group, gpus_per_node, scale_up_bytes_per_s, d.inter_node_bytes_per_s_per_gpu)
    return np.asarray(np.where(e > 1.0, latency + bytes_ / bw, 0.0), dtype=np.float64)


def expert_gather_s(
    layer_expert_bytes: ArrayLike,
    *,
    ep: ArrayLike,
    group_gpus: ArrayLike,
    gpus_per_node: float,
    scale_up_bytes_per_s: float,
    inter_node_bytes_per_s: float,
) -> FloatArray:
    """One MoE layer's expert all-gather per GPU (s): the ``(ep − 1)/ep`` of the layer's expert bytes ``E·P_expert·b``
    it does not hold, over NVLink or the scale-out NIC (``inter_node_bytes_per_s`` per GPU)."""
    e = np.asarray(ep, dtype=np.float64)
    bytes_ = (e - 1.0) / e * np.asarray(layer_expert_bytes, dtype=np.float64)
    group = np.asarray(group_gpus, dtype=np.float64)
    bw = _link_bytes_per_s(group, gpus_per_node, scale_up_bytes_per_s, inter_node_bytes_per_s)
    return np.asarray(bytes_ / bw, dtype=np.float64)


def exposed_gather_s(gather_s: FloatArray, layer_compute_s: FloatArray, gamma: float) -> FloatArray:
    """Part of one layer's gather not hidden behind the previous layer's compute: ``max(0, γ·t_g − t_layer)`` (γ the
    overlap jitter of ``pdplan/data/expert_parallel.yaml``)."""
    return np.asarray(np.maximum(gamma * gather_s - layer_compute_s, 0.0), dtype=np.float64)


def saturation_tokens(
    gather_s: ArrayLike, flops_per_token_per_layer: float, peak_flops_per_s: float, gamma: float
) -> FloatArray:
    """Tokens per GPU from which a layer's compute hides its gather: ``T = γ·t_g·F_GPU / FLOPs per token``
    (ZeRO-Prefill's threshold in tokens at peak compute, γ the overlap jitter; more tokens never expose more)."""
    return np.asarray(gamma * np.asarray(gather_s) * peak_flops_per_s / flops_per_token_per_layer, dtype=np.float64)


def _node_shape(gpu: GpuPeaks) -> tuple[float, float]:
    """GPUs per node and scale-up bytes/s of ``gpu`` (a :class:`~pdplan.specs.hardware.GpuSpec` has both)."""
    try:
        return float(getattr(gpu, "gpus_per_node")), float(getattr(gpu, "scale_up_bytes_per_s"))  # noqa: B009
    except AttributeError:
        raise ValueError(f"expert parallelism on {gpu.name} needs gpus_per_node and scale_up_bytes_per_s") from None


def allreduce_s(
    message_bytes: ArrayLike, num_gpus: ArrayLike, gpu: GpuPeaks, table: KernelTable, data: PerfData
) -> FloatArray:
    """One all-reduce of ``message_bytes`` per GPU over ``num_gpus`` GPUs (s). Inside a node the kernel table's
    (:func:`pdplan.perf.kernels.allreduce_time_s`); over ``N`` whole nodes (a TP group or a DP-attention MoE group
    wider than a node) the hierarchical form NCCL runs: the node's own all-reduce (reduce-scatter + all-gather over
    NVLink, the same bytes) plus a ring over the nodes of each GPU's ``1/g`` shard through its own NIC,
    ``α + 2(N − 1)/N · (m/g)/BW_NIC`` with ``g`` GPUs per node, BW_NIC the scale-out bandwidth per GPU and α one
    small cross-node RDMA message: the measured DeepEP low-latency dispatch latency
    (``pdplan/data/expert_parallel.yaml``, ``data.expert_parallel``; NCCL runs small all-reduces with its low-latency
    protocol [I: the nearest measured cross-node small-message latency on these nodes; no cross-node all-reduce table
    is stored]).

    Example: 14,336 B (one token, h = 7168, BF16) over 16 H100s: 8-GPU NVLink all-reduce 3.6 µs + 10 µs + 2·½ ·
    1792 B / 50 GB/s = 0.04 µs → 13.6 µs."""
    n = np.asarray(num_gpus, dtype=np.float64)
    per_node = float(getattr(gpu, "gpus_per_node", 0) or 0)
    if per_node <= 0.0 or not bool(np.any(n > per_node)):
        return allreduce_time_s(message_bytes, num_gpus, gpu, table)
    d = data.ep_defaults("an all-reduce across nodes")
    nodes = np.ceil(n / per_node)
    intra = allreduce_time_s(message_bytes, np.minimum(n, per_node), gpu, table)
    shard = np.asarray(message_bytes, dtype=np.float64) / per_node
    inter = d.dispatch_latency_s["low_latency"] + 2.0 * (nodes - 1.0) / nodes * shard / d.inter_node_bytes_per_s_per_gpu
    return np.asarray(np.where(n > per_node, intra + inter, intra), dtype=np.float64)


def gather_time_s(op: WeightGatherOp, gpu: GpuPeaks, data: PerfData) -> FloatArray:
    """One run (one MoE layer) of the ZeRO-Prefill weight gather of :func:`pdplan.perf.ops_moe.expert_ops`
    (:func:`expert_gather_s` on the GPU's node)."""
    per_node, scale_up = _node_shape(gpu)
    return expert_gather_s(
        op.layer_expert_bytes,
        ep=op.ep,
        group_gpus=op.group_gpus,
        gpus_per_node=per_node,
        scale_up_bytes_per_s=scale_up,
        inter_node_bytes_per_s=data.ep_defaults("the ZeRO-Prefill weight gather").inter_node_bytes_per_s_per_gpu,
    )


def a2a_phases_s(op: AllToAllOp, gpu: GpuPeaks, table: KernelTable, data: PerfData) -> tuple[FloatArray, FloatArray]:
    """The dispatch and the combine (s) of one MoE layer's all-to-all (:func:`pdplan.perf.ops_moe.expert_ops`).

    The fitted DeepEP dispatch / combine of :func:`pdplan.perf.moe_a2a.a2a_time_s` where the GPU's kernel table has
    an ``ep_a2a`` entry for the mode (H100, H200, B200), with the scale-out NIC at 50 GB/s per GPU
    (``pdplan/data/expert_parallel.yaml``); other GPUs get the speed-of-light form :func:`sol_a2a_phase_s`, which the
    report's kernel-table notes flag as not measured; across nodes the fitted form takes DeepEP's achieved share of
    the NIC (``data.rdma_fraction``, ``pdplan/data/ep_a2a.yaml``)."""
    per_node, scale_up = _node_shape(gpu)
    mode: A2aMode = "low_latency" if op.low_latency else "normal"
    d = data.ep_defaults("the EP all-to-all")
    if mode in table.ep_a2a:
        fraction = None if data.rdma_fraction is None else data.rdma_fraction[mode]
        kw = {"gpus_per_node": int(per_node), "rdma_bytes_per_s": d.inter_node_bytes_per_s_per_gpu}
        args = (op.tokens, float(op.hidden), op.top_k, op.ep, mode)
        dispatch = fitted_a2a_s(*args, "dispatch", table, **kw, rdma_fraction=fraction)  # type: ignore[arg-type]
        combine = fitted_a2a_s(*args, "combine", table, **kw, rdma_fraction=fraction)  # type: ignore[arg-type]
        return dispatch, combine
    sol = (op.tokens, op.hidden, op.top_k, op.num_experts, op.ep, op.group_gpus, per_node, scale_up, mode)
    return sol_a2a_phase_s(*sol, "dispatch", d), sol_a2a_phase_s(*sol, "combine", d)
