"""Per-operator pricing: the seconds, FLOPs and bytes of each op of :func:`pdplan.perf.ops.forward_ops`.

One dispatch, :func:`op_time_s`, sends each op type (:mod:`pdplan.perf.op_types`) to its calibrated kernel cost
function (:mod:`pdplan.perf.kernels`, :mod:`pdplan.perf.mla`, :mod:`pdplan.perf.moe` and its W4A16 / CUTLASS /
wide-EP families, :mod:`pdplan.perf.expert_parallel`); the FLOPs and bytes are the op's own textbook numerators
(``op.flops_bytes``). Split out of :mod:`pdplan.perf.roofline`, which assembles the priced ops into a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

import numpy as np

from pdplan.perf.expert_parallel import a2a_phases_s, allreduce_s, gather_time_s
from pdplan.perf.kernels import (
    decode_attention_time_s,
    elementwise_time_s,
    gemm_time_s,
    prefill_attention_time_s,
    smooth_max,
    smooth_max_of,
)
from pdplan.perf.mla import mla_core_time_s, mla_params
from pdplan.perf.moe import moe_time_s
from pdplan.perf.moe_w4a16 import uses_w4a16
from pdplan.perf.moe_wideep import MoeKernel, wideep_moe_time_s
from pdplan.perf.op_types import (
    COMMUNICATION_KINDS,
    AllReduceOp,
    AllToAllOp,
    DecodeAttentionOp,
    ElementwiseOp,
    GemmOp,
    LinearAttentionOp,
    MoeOp,
    Op,
    Phase,
    PrefillAttentionOp,
    WeightGatherOp,
)
from pdplan.perf.precision import Precision
from pdplan.perf.tiling import sm_count
from pdplan.specs.kernel_table import GemmFlavour, GpuPeaks, KernelTable, KvFlavour, LinearAttentionParams, MoeParams
from pdplan.specs.perf_data import MoeKernelEntries, PerfData
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


@dataclass(frozen=True, slots=True)
class Pricing:
    """What prices an op besides its shape: the GPU's peaks, its kernel table, the pass's precision, the MoE expert
    ``kernel`` family run for ``phase``, and the data beyond the kernel table
    (:class:`~pdplan.specs.perf_data.PerfData`: EP constants, DeepEP's inter-node shares, the GPU's W4A16 / CUTLASS
    MoE entries)."""

    gpu: GpuPeaks
    table: KernelTable
    prec: Precision
    kernel: MoeKernel = "fused"
    phase: Phase = "prefill"
    data: PerfData = field(default_factory=PerfData)


def op_time_s(op: Op, p: Pricing) -> FloatArray:
    """Seconds for ONE run of ``op`` from the kernel table: the one dispatch from op type to kernel cost function."""
    match op:
        case GemmOp():
            return _gemm_s(op, p)
        case PrefillAttentionOp():
            return _prefill_attention_s(op, p)
        case DecodeAttentionOp():
            return _decode_attention_s(op, p)
        case MoeOp():
            return _moe_s(op, p)
        case LinearAttentionOp():
            return _linear_attention_time_s(op, p)
        case ElementwiseOp():
            return elementwise_time_s(op.bytes, p.gpu, p.table)
        case AllReduceOp():
            return allreduce_s(op.bytes, op.gpus, p.gpu, p.table, p.data)
        case AllToAllOp():
            dispatch, combine = a2a_phases_s(op, p.gpu, p.table, p.data)
            return np.asarray(dispatch + combine, dtype=np.float64)
        case WeightGatherOp():
            return gather_time_s(op, p.gpu, p.data)
    assert_never(op)


def _gemm_s(op: GemmOp, p: Pricing) -> FloatArray:
    """The dense GEMM family; an MLA projection scaled by its phase's fitted ``gemm_scale`` (:mod:`pdplan.perf.mla`)."""
    flavour: GemmFlavour = "bf16" if op.bf16 else p.prec.gemm_flavour
    t = gemm_time_s(op.m, op.n, op.k, flavour, p.gpu, p.table)
    mla = None if op.mla_phase is None else mla_params(p.table, op.mla_phase, p.prec.gemm_flavour, p.prec.kv_bytes)
    return t if mla is None else t * mla.gemm_scale


def _prefill_attention_s(op: PrefillAttentionOp, p: Pricing) -> FloatArray:
    """An MLA core under its fitted prefill entry where the table has one, else the prefill attention family."""
    mla = None if op.mla is None else mla_params(p.table, "prefill", p.prec.gemm_flavour, p.prec.kv_bytes)
    if op.mla is not None and mla is not None:
        return mla_core_time_s(op.mla, "prefill", op.batch, op.context, op.heads, p.prec.kv_bytes, mla, p.gpu)
    kv: KvFlavour = "fp8" if p.prec.kv_bytes <= 1.0 else "bf16"
    return prefill_attention_time_s(op.batch, op.context, op.heads, op.kv_heads, op.head_dim, p.gpu, p.table, kv)


def _decode_attention_s(op: DecodeAttentionOp, p: Pricing) -> FloatArray:
    """An MLA core under its fitted decode entry where the table has one, else the decode attention family."""
    mla = None if op.mla is None else mla_params(p.table, "decode", p.prec.gemm_flavour, p.prec.kv_bytes)
    if op.mla is not None and mla is not None:
        return mla_core_time_s(op.mla, "decode", op.batch, op.context, op.heads, p.prec.kv_bytes, mla, p.gpu)
    # head_dim_eff makes 2·kv_heads·head_dim_eff·b equal the per-GPU KV bytes per token (MLA latent too)
    head_dim_eff = op.kv_bytes_per_token / (2.0 * op.kv_heads * p.prec.kv_bytes)
    return decode_attention_time_s(
        op.batch, op.context, op.heads, op.kv_heads, head_dim_eff, p.prec.kv_bytes, p.gpu, p.table
    )


def _moe_entry(op: MoeOp, p: Pricing) -> tuple[GemmFlavour, MoeParams | None]:
    """The fused-MoE formula's GEMM peak and entry (None: the table's own ``moe`` entry of that dtype): 4-bit experts
    take the W4A16 kernel at the BF16 peak (:mod:`pdplan.perf.moe_w4a16`), the ``cutlass`` family TensorRT-LLM's
    CUTLASS entry at the FP8 peak (:mod:`pdplan.perf.moe_cutlass`), where the GPU has one (``p.data.moe_kernels``)."""
    four_bit = uses_w4a16(op.layer.weight_bytes)
    w4 = _gpu_entries(p, "4-bit experts").w4a16 if four_bit else None
    if w4 is not None:
        return "bf16", w4
    cutlass = _gpu_entries(p, "the CUTLASS MoE kernel").cutlass if p.kernel == "cutlass" and not four_bit else None
    if cutlass is not None:
        return "fp8", cutlass
    return p.prec.gemm_flavour, None


def _gpu_entries(p: Pricing, use: str) -> MoeKernelEntries:
    """The MoE entries of ``p.data`` for ``use``; ValueError where they are another GPU's than the kernel table's."""
    entries = p.data.moe_entries(use)
    if entries.gpu != p.table.gpu:
        raise ValueError(f"{use}: the MoE entries given are {entries.gpu!r}'s, the kernel table {p.table.gpu!r}'s")
    return entries


def _moe_s(op: MoeOp, p: Pricing) -> FloatArray:
    """The routed experts: SGLang's wide-EP family (:mod:`pdplan.perf.moe_wideep`), else the fused-MoE formula with
    the entry :func:`_moe_entry` picks."""
    if p.kernel == "deepgemm_wideep":
        return wideep_moe_time_s(op.layer, p.phase, p.gpu, p.table)
    flavour, entry = _moe_entry(op, p)
    return moe_time_s(op.layer, flavour, p.gpu, p.table, entry)


def _linear_attention_time_s(op: LinearAttentionOp, p: Pricing) -> FloatArray:
    """Gated DeltaNet mixer (conv + scan) of one layer.

    With a fitted entry for the pass's phase (``table.linear_attention``, formula in
    :class:`pdplan.specs.kernel_table.LinearAttentionParams`): that family. Otherwise the roofline with the
    prefill-attention compute and elementwise memory efficiencies (flagged: not calibrated), FLOPs ≈
    4·n_v·d_k·d_v per token, bytes = read + write of the per-sequence recurrent state.
    """
    gpu, table = p.gpu, p.table
    fitted = table.linear_attention.get(op.phase)
    if fitted is not None:
        heads = (op.value_heads, float(sm_count(gpu, table)))
        return linear_attention_kernel_s(
            op.tokens, op.batch, op.io_elems_per_token, op.state_bytes, op.flops_per_token, heads, gpu, fitted
        )
    flops, bytes_ = op.flops_bytes(p.prec)
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


def _bound_of(op: Op, flops: FloatArray, bytes_: FloatArray, gpu: GpuPeaks) -> str:
    if op.kind in COMMUNICATION_KINDS:
        return "communication"
    compute = float(np.ravel(flops)[0]) / gpu.bf16_flops_per_s
    memory = float(np.ravel(bytes_)[0]) / gpu.memory_bytes_per_s
    return "compute" if compute > memory else "memory"


def price_ops(ops: list[Op], pricing: Pricing, detail: bool = True) -> tuple[OpTime, ...]:
    """Price every op; with ``detail`` also its FLOPs, bytes and bound (the breakdown a user reads)."""
    priced = []
    for op in ops:
        time_s = op_time_s(op, pricing) * op.count
        if detail:
            flops, bytes_ = op.flops_bytes(pricing.prec)
            bound = _bound_of(op, flops, bytes_, pricing.gpu)
            priced.append(OpTime(op.name, op.kind, op.count, time_s, flops * op.count, bytes_ * op.count, bound))
        else:
            empty = np.zeros(0)
            priced.append(OpTime(op.name, op.kind, op.count, time_s, empty, empty, "unknown"))
    return tuple(priced)
