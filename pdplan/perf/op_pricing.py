"""Per-operator pricing: the seconds, FLOPs and bytes of each op of :func:`pdplan.perf.ops.forward_ops`.

Each op kind goes to its calibrated kernel cost function (:mod:`pdplan.perf.kernels`, :mod:`pdplan.perf.mla`,
:mod:`pdplan.perf.moe` and its W4A16 / wide-EP families, :mod:`pdplan.perf.expert_parallel`); split out of
:mod:`pdplan.perf.roofline`, which assembles the priced ops into a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.perf.expert_parallel import allreduce_s, ep_comm_time_s
from pdplan.perf.kernels import (
    decode_attention_time_s,
    elementwise_time_s,
    gemm_time_s,
    prefill_attention_time_s,
    smooth_max,
    smooth_max_of,
)
from pdplan.perf.mla import mla_core_flops_bytes, mla_core_time_s, mla_params
from pdplan.perf.moe import moe_flops_bytes, moe_time_s
from pdplan.perf.moe_cutlass import cutlass_params
from pdplan.perf.moe_w4a16 import uses_w4a16, w4a16_params
from pdplan.perf.moe_wideep import MoeKernel, wideep_moe_time_s
from pdplan.perf.op_types import MLA_PHASE, Op, Phase
from pdplan.perf.tiling import sm_count
from pdplan.specs.kernel_table import GpuPeaks, KernelTable, KvFlavour, LinearAttentionParams, MlaParams
from pdplan.specs.model_parts import MlaSpec
from pdplan.types import FloatArray


@dataclass(frozen=True)
class OpTime:
    """One operator's total over a pass (all its runs): time, FLOPs, bytes, and what bounds it."""

    name: str
    kind: str
    count: float
    time_s: FloatArray
    flops: FloatArray
    bytes: FloatArray
    bound: str


@dataclass(frozen=True)
class Precision:
    """Bytes per element: weights/GEMM inputs (2 bf16, 1 fp8), activations, KV cache."""

    weight_bytes: float = 2.0
    act_bytes: float = 2.0
    kv_bytes: float = 2.0

    @property
    def gemm_flavour(self) -> str:
        return "fp8" if self.weight_bytes <= 1.0 else "bf16"


def _ideal_flops_bytes(op: Op, prec: Precision) -> tuple[FloatArray, FloatArray]:
    """FLOPs and bytes of one run of ``op`` (the textbook roofline numerators)."""
    d = op.dims
    if op.kind == "gemm":
        rep = d.get("repeat", np.ones_like(d["m"]))
        flops = 2.0 * d["m"] * d["n"] * d["k"] * rep
        w = 2.0 if "bf16" in d else prec.weight_bytes
        bytes_ = ((d["m"] * d["k"] + d["k"] * d["n"]) * w + d["m"] * d["n"] * prec.act_bytes) * rep
    elif op.kind in ("attn_prefill", "attn_decode") and "mla_phase" in d:
        phase = "prefill" if op.kind == "attn_prefill" else "decode"
        flops, bytes_ = mla_core_flops_bytes(_mla_spec(d), phase, d["batch"], d["context"], d["heads"], prec.kv_bytes)
    elif op.kind == "attn_prefill":  # causal: half of 4·b·h·s²·d
        flops = 2.0 * d["batch"] * d["heads"] * d["context"] ** 2 * d["head_dim"]
        bytes_ = d["batch"] * d["context"] * d["head_dim"] * (2 * d["heads"] + 2 * d["kv_heads"])
        bytes_ = bytes_ * prec.act_bytes
    elif op.kind == "attn_decode":
        flops = 4.0 * d["batch"] * d["heads"] * d["context"] * d["head_dim"]
        bytes_ = d["batch"] * d["context"] * d["kv_bytes_per_token"]
    elif op.kind == "moe" and op.moe is not None:
        flops, bytes_ = moe_flops_bytes(op.moe)
    elif op.kind == "linear_attn":
        flops = d["tokens"] * d["flops_per_token"]
        bytes_ = 2.0 * d["batch"] * d["state_bytes"]
    elif op.kind in ("alltoall", "weight_gather"):  # link traffic, no HBM roofline term
        flops = np.zeros_like(d["ep"])
        bytes_ = np.zeros_like(d["ep"])
    else:  # elementwise, allreduce
        flops = np.zeros_like(d["bytes"])
        bytes_ = d["bytes"]
    return flops, bytes_


def _linear_attention_time_s(op: Op, gpu: GpuPeaks, table: KernelTable, prec: Precision) -> FloatArray:
    """Gated DeltaNet mixer (conv + scan) of one layer.

    With a fitted entry for the pass's phase (``table.linear_attention``, formula in
    :class:`pdplan.specs.kernel_table.LinearAttentionParams`): that family. Otherwise the roofline with the
    prefill-attention compute and elementwise memory efficiencies (flagged: not calibrated), FLOPs ≈
    4·n_v·d_k·d_v per token, bytes = read + write of the per-sequence recurrent state.
    """
    d = op.dims
    phase = "prefill" if float(np.ravel(d.get("prefill", np.zeros(1)))[0]) > 0.5 else "decode"
    fitted = table.linear_attention.get(phase)  # type: ignore[call-overload]
    if fitted is not None and "io_elems_per_token" in d:
        heads = (d["value_heads"], float(sm_count(gpu, table)))
        return linear_attention_kernel_s(
            d["tokens"], d["batch"], d["io_elems_per_token"], d["state_bytes"], d["flops_per_token"], heads, gpu, fitted
        )
    flops, bytes_ = _ideal_flops_bytes(op, prec)
    attn = table.prefill_attention["bf16"]
    compute_s = flops / (gpu.bf16_flops_per_s * attn.compute_fraction)
    memory_s = bytes_ / (gpu.memory_bytes_per_s * table.elementwise.memory_fraction)
    result: FloatArray = table.elementwise.overhead_s + smooth_max(compute_s, memory_s, attn.smooth_q)
    return result


def linear_attention_kernel_s(
    tokens: FloatArray,
    batch: FloatArray,
    io_elems_per_token: FloatArray,
    state_bytes: FloatArray,
    flops_per_token: FloatArray,
    heads_sms: tuple[FloatArray, float],
    gpu: GpuPeaks,
    p: LinearAttentionParams,
) -> FloatArray:
    """The fitted Gated DeltaNet family (:class:`pdplan.specs.kernel_table.LinearAttentionParams`); ``state_bytes``
    per sequence per GPU at the model's state dtype (the fit's rows carry fp32 state); ``heads_sms``: value heads
    on the GPU and its streaming multiprocessors."""
    compute_s = tokens * flops_per_token / (gpu.bf16_flops_per_s * p.compute_fraction)
    bytes_ = tokens * io_elems_per_token * 2.0 + 2.0 * batch * state_bytes
    memory_s = bytes_ / (gpu.memory_bytes_per_s * p.memory_fraction)
    heads, sms = heads_sms
    b = np.maximum(batch, 1.0)
    serial_s = np.ceil(b * heads / sms) * (tokens / b) * p.serial_s_per_token
    result: FloatArray = p.overhead_s + smooth_max_of((compute_s, memory_s, serial_s), p.smooth_q)
    return result


def _mla_spec(d: dict[str, FloatArray]) -> MlaSpec:
    """The latent's sizes carried by an MLA core op (:func:`pdplan.perf.ops_attention.attention_core_ops`)."""
    return MlaSpec(
        kv_lora_rank=int(d["mla_rank"]),
        q_lora_rank=None,
        qk_rope_head_dim=int(d["mla_rope"]),
        qk_nope_head_dim=int(d["mla_nope"]),
        v_head_dim=int(d["mla_v"]),
    )


def _mla_entry(op: Op, table: KernelTable, prec: Precision) -> MlaParams | None:
    """The fitted MLA entry that prices an MLA op (its projections and core), or None for other ops / no entry."""
    if "mla_phase" not in op.dims:
        return None
    phase = "prefill" if float(op.dims["mla_phase"]) == MLA_PHASE["prefill"] else "decode"
    return mla_params(table, phase, prec.gemm_flavour, prec.kv_bytes)  # type: ignore[arg-type]


def _op_time_s(
    op: Op, gpu: GpuPeaks, table: KernelTable, prec: Precision, kernel: MoeKernel = "fused", phase: Phase = "prefill"
) -> FloatArray:
    """Seconds for ONE run of ``op`` from the kernel table (``kernel``: the MoE expert family, run for ``phase``)."""
    d = op.dims
    if op.kind == "gemm":
        flavour = "bf16" if "bf16" in d else prec.gemm_flavour
        t = gemm_time_s(d["m"], d["n"], d["k"], flavour, gpu, table)  # type: ignore[arg-type]
        mla = _mla_entry(op, table, prec)
        return t * d.get("repeat", 1.0) * (1.0 if mla is None else mla.gemm_scale)
    mla = _mla_entry(op, table, prec)
    if mla is not None and op.kind in ("attn_prefill", "attn_decode"):
        phase = "prefill" if op.kind == "attn_prefill" else "decode"
        return mla_core_time_s(_mla_spec(d), phase, d["batch"], d["context"], d["heads"], prec.kv_bytes, mla, gpu)
    if op.kind == "attn_prefill":
        kv: KvFlavour = "fp8" if prec.kv_bytes <= 1.0 else "bf16"
        return prefill_attention_time_s(
            d["batch"], d["context"], d["heads"], d["kv_heads"], d["head_dim"], gpu, table, kv
        )
    if op.kind == "attn_decode":
        # head_dim_eff makes 2·kv_heads·head_dim_eff·b equal the per-GPU KV bytes per token (MLA latent too)
        head_dim_eff = d["kv_bytes_per_token"] / (2.0 * d["kv_heads"] * prec.kv_bytes)
        return decode_attention_time_s(
            d["batch"], d["context"], d["heads"], d["kv_heads"], head_dim_eff, prec.kv_bytes, gpu, table
        )
    if op.kind == "moe" and op.moe is not None:
        if kernel == "deepgemm_wideep":  # SGLang DeepEP + DeepGEMM (pdplan.perf.moe_wideep)
            return wideep_moe_time_s(op.moe, phase, gpu, table)
        w4 = w4a16_params(table.gpu) if uses_w4a16(op.moe.weight_bytes) else None
        if w4 is not None:  # MXFP4 experts: the W4A16 kernel at the BF16 peak (pdplan.perf.moe_w4a16)
            return moe_time_s(op.moe, "bf16", gpu, table, w4)
        cutlass = cutlass_params(table.gpu) if kernel == "cutlass" and not uses_w4a16(op.moe.weight_bytes) else None
        if cutlass is not None:  # TensorRT-LLM's CUTLASS MoE, FP8 block experts (pdplan.perf.moe_cutlass)
            return moe_time_s(op.moe, "fp8", gpu, table, cutlass)
        return moe_time_s(op.moe, prec.gemm_flavour, gpu, table)  # type: ignore[arg-type]
    if op.kind == "linear_attn":
        return _linear_attention_time_s(op, gpu, table, prec)
    if op.kind == "allreduce":
        return allreduce_s(d["bytes"], d["gpus"], gpu, table)
    if op.kind in ("alltoall", "weight_gather"):
        return ep_comm_time_s(op, gpu, table)
    return elementwise_time_s(d["bytes"], gpu, table)


def _bound_of(op: Op, flops: FloatArray, bytes_: FloatArray, gpu: GpuPeaks) -> str:
    if op.kind in ("allreduce", "alltoall", "weight_gather"):
        return "communication"
    compute = float(np.ravel(flops)[0]) / gpu.bf16_flops_per_s
    memory = float(np.ravel(bytes_)[0]) / gpu.memory_bytes_per_s
    return "compute" if compute > memory else "memory"


def price_ops(
    ops: list[Op],
    gpu: GpuPeaks,
    table: KernelTable,
    prec: Precision,
    detail: bool = True,
    kernel: tuple[MoeKernel, Phase] = ("fused", "prefill"),
) -> tuple[OpTime, ...]:
    """Price every op; with ``detail`` also its FLOPs, bytes and bound (the breakdown a user reads);
    ``kernel``: the MoE expert family and the phase it runs."""
    priced = []
    for op in ops:
        time_s = _op_time_s(op, gpu, table, prec, *kernel) * op.count
        if detail:
            flops, bytes_ = _ideal_flops_bytes(op, prec)
            priced.append(
                OpTime(
                    op.name,
                    op.kind,
                    op.count,
                    time_s,
                    flops * op.count,
                    bytes_ * op.count,
                    _bound_of(op, flops, bytes_, gpu),
                )
            )
        else:
            empty = np.zeros(0)
            priced.append(OpTime(op.name, op.kind, op.count, time_s, empty, empty, "unknown"))
    return tuple(priced)
