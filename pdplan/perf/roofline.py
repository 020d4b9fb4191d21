"""Phase times from the per-operator roofline: prefill of a batch of prompts, one decode step.

Each operator of :func:`pdplan.perf.ops.forward_ops` is priced by the calibrated kernel cost functions of
:mod:`pdplan.perf.kernels` — ``overhead + smooth_max(FLOPs / (peak·η_c), bytes / (BW·η_m))`` per kernel — and
multiplied by how often it runs. On top come the per-step framework overhead (scheduler, sampling, launch gaps;
kernel table ``framework``) and pipeline-parallel hand-offs.

Pipeline parallelism (PP = p) splits the layers into p equal stages. A pass's *latency* is the sum of the
stages plus (p − 1) hand-offs of the activations; its *stage time* (the bottleneck that sets steady-state
throughput when p micro-batches are in flight) is latency / p plus one hand-off. For p = 1 both are equal.

Everything is vectorised: ``batch``, ``tokens`` and ``tp`` broadcast, so thousands of candidates cost one call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pdplan.perf.expert_parallel import allreduce_s, ep_comm_time_s, exposed_gather_s
from pdplan.perf.kernels import (
    GpuPeaks,
    KernelTable,
    KvFlavour,
    decode_attention_time_s,
    elementwise_time_s,
    gemm_time_s,
    prefill_attention_time_s,
    smooth_max,
    smooth_max_of,
)
from pdplan.perf.mla import mla_core_flops_bytes, mla_core_time_s, mla_params
from pdplan.perf.moe import moe_flops_bytes, moe_time_s
from pdplan.perf.moe_routing import RoutingLaw
from pdplan.perf.moe_w4a16 import uses_w4a16, w4a16_params
from pdplan.perf.moe_wideep import MoeKernel, wideep_moe_time_s
from pdplan.perf.ops import MLA_PHASE, Op, PassShape, Phase, forward_ops, parallel_fields
from pdplan.perf.tiling import sm_count
from pdplan.perf.two_batch_overlap import exposed_comm_s
from pdplan.specs.kernel_table import LinearAttentionParams, MlaParams
from pdplan.specs.model import ModelSpec
from pdplan.specs.model_parts import MlaSpec
from pdplan.types import ArrayLike, FloatArray

BOUNDS = ("compute", "memory", "communication", "overhead")


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
class PhaseTime:
    """A phase's latency and bottleneck-stage time (s) with the per-operator breakdown."""

    phase: Phase
    time_s: FloatArray
    stage_time_s: FloatArray
    framework_overhead_s: float
    pp_handoff_s: FloatArray
    ops: tuple[OpTime, ...]

    def bound(self) -> str:
        """compute | memory | communication | overhead: the category holding the most time (first element)."""
        totals = dict.fromkeys(BOUNDS, 0.0)
        for op in self.ops:
            if op.bound not in totals:
                raise ValueError("bound() needs the per-op detail: call phase_time(..., detail=True)")
            totals[op.bound] += float(np.ravel(op.time_s)[0])
        totals["overhead"] += self.framework_overhead_s
        totals["communication"] += float(np.ravel(self.pp_handoff_s)[0])
        return max(BOUNDS, key=lambda b: totals[b])


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


def _price_ops(
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


def hide_gather(ops: tuple[OpTime, ...], num_layers: float) -> tuple[OpTime, ...]:
    """ZeRO-Prefill: each MoE layer's weight gather runs behind the previous layer's compute, so only its exposed part
    ``max(0, γ·t_gather − t_layer)`` counts (t_layer = the pass's other op time per layer;
    :func:`pdplan.perf.expert_parallel.exposed_gather_s`). Ops without a gather come back unchanged."""
    gathers = [op for op in ops if op.kind == "weight_gather"]
    if not gathers:
        return ops
    gather = gathers[0]
    others = sum((op.time_s for op in ops if op.kind != "weight_gather"), np.zeros(()))
    exposed = exposed_gather_s(gather.time_s / gather.count, others / num_layers) * gather.count
    return tuple(dataclasses.replace(op, time_s=exposed) if op is gather else op for op in ops)


def overlap_two_batches(half_ops: tuple[OpTime, ...], model: ModelSpec) -> tuple[OpTime, ...]:
    """The pass as two micro-batches (:mod:`pdplan.perf.two_batch_overlap`): every op of the half batch runs twice,
    and the all-to-all keeps only its exposed part ``T_TBO − 2·C_half``, so the ops still sum to the pass time."""
    comm = next(op for op in half_ops if op.kind == "alltoall")
    compute = sum((op.time_s for op in half_ops if op is not comm), np.zeros(()))
    exposed = exposed_comm_s(compute, comm.time_s, float(model.num_layers), comm.count)
    out = []
    for op in half_ops:
        time_s = exposed if op is comm else 2.0 * op.time_s
        out.append(dataclasses.replace(op, time_s=time_s, flops=2.0 * op.flops, bytes=2.0 * op.bytes))
    return tuple(out)


def _handoff_s(model: ModelSpec, shape: PassShape, gpu: GpuPeaks, table: KernelTable, pp: FloatArray) -> FloatArray:
    """One PP stage hand-off: activations tokens·h·b over the scale-up link, plus its latency α."""
    bandwidth = getattr(gpu, "scale_up_bytes_per_s", gpu.memory_bytes_per_s)
    send_s = table.allreduce.alpha_s + shape.new_tokens * model.hidden_size * shape.act_bytes / bandwidth
    result: FloatArray = np.where(pp > 1.0, send_s, 0.0)
    return result


def phase_time(
    model: ModelSpec,
    gpu: GpuPeaks,
    table: KernelTable,
    *,
    phase: Phase,
    batch: ArrayLike,
    tokens: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    precision: Precision | None = None,
    detail: bool = True,
    ep: ArrayLike = 1,
    moe_tp: ArrayLike | None = None,
    moe_dp: ArrayLike = 1,
    routing: RoutingLaw | None = None,
    dp: int = 1,
    expert_gather: bool = False,
    moe_kernel: MoeKernel = "fused",
    two_batch_overlap: bool = False,
) -> PhaseTime:
    """Latency of one pass: prefill of ``batch`` prompts × ``tokens``, or one decode step at context ``tokens``.

    MoE layers: ``ep`` experts-parallel GPUs (E/ep experts each), ``moe_tp`` the split of the expert
    intermediate size (None: ``tp·dp/ep``, i.e. plain ``tp`` without DP/EP), ``moe_dp`` attention-DP ranks whose
    tokens meet in one MoE layer, ``routing`` the routing law (default uniform); see :mod:`pdplan.perf.moe`.

    With attention data parallelism ``dp`` the ``batch`` is the instance's, spread evenly over its ranks (``moe_dp``
    then defaults to ``dp``); EP > 1 adds the dispatch + combine all-to-all, and ``expert_gather`` prices
    ZeRO-Prefill's weight gather instead of it (:mod:`pdplan.perf.expert_parallel`). ``moe_kernel`` names the
    expert family (``fused`` or SGLang's ``deepgemm_wideep``, :func:`pdplan.perf.moe_wideep.moe_kernel_for`);
    ``two_batch_overlap`` runs an EP pass as two overlapped micro-batches (:func:`overlap_two_batches`).

    Example: Llama-3.1-70B, H100, TP=8, prefill of one 2048-token prompt ≈ 0.1–0.2 s (compute-bound).
    """
    prec = precision or Precision()
    # broadcast lazily: a scalar TP/PP stays a scalar, so every weight shape (n, k) stays a scalar too and only
    # the token-dependent terms are arrays (about half the work for the common one-TP call)
    b, n, t, p = (np.asarray(x, dtype=np.float64) for x in (batch, tokens, tp, pp))
    full = np.broadcast_shapes(b.shape, n.shape, t.shape, p.shape)
    shape = PassShape(
        phase,
        b,
        n,
        t,
        prec.act_bytes,
        prec.weight_bytes,
        prec.kv_bytes,
        **parallel_fields(t, dp, ep, moe_tp),  # type: ignore[arg-type]
        routing=routing or RoutingLaw(),
        expert_gather=expert_gather,
    )
    # the per-rank interface: the batch of one rank, moe_dp ranks meeting in the MoE layers
    if dp == 1 and bool(np.any(np.asarray(moe_dp) != 1.0)):
        shape = dataclasses.replace(shape, moe_dp=np.asarray(moe_dp, dtype=np.float64))
    kernel = (moe_kernel, phase)
    ops = hide_gather(_price_ops(forward_ops(model, shape), gpu, table, prec, detail, kernel), float(model.num_layers))
    if two_batch_overlap and any(op.kind == "alltoall" for op in ops):
        half = dataclasses.replace(shape, batch=shape.batch / 2.0)
        half_ops = _price_ops(forward_ops(model, half), gpu, table, prec, detail, kernel)
        ops = overlap_two_batches(half_ops, model)
    compute_s = np.zeros(full)
    for op in ops:  # in place: one pass per op, no temporaries
        np.add(compute_s, op.time_s, out=compute_s)
    overhead_s = table.framework.decode_step_overhead_s
    handoff_s = _handoff_s(model, shape, gpu, table, p)
    # per GPU of a stage the layer work divides by p; the (un-split) head/embedding is small and kept whole
    latency_s = compute_s + overhead_s + (p - 1.0) * handoff_s
    stage_s = compute_s / p + overhead_s + handoff_s
    return PhaseTime(phase, latency_s, stage_s, overhead_s, handoff_s, ops)


def prefill_time_s(
    model: ModelSpec,
    gpu: GpuPeaks,
    table: KernelTable,
    *,
    batch: ArrayLike,
    tokens: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    precision: Precision | None = None,
) -> FloatArray:
    """Latency (s) of prefilling ``batch`` prompts of ``tokens`` tokens (vectorised)."""
    return phase_time(
        model, gpu, table, phase="prefill", batch=batch, tokens=tokens, tp=tp, pp=pp, precision=precision, detail=False
    ).time_s


def decode_step_s(
    model: ModelSpec,
    gpu: GpuPeaks,
    table: KernelTable,
    *,
    batch: ArrayLike,
    context: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    precision: Precision | None = None,
) -> FloatArray:
    """Latency (s) of one decode step for ``batch`` sequences at mean context ``context`` (vectorised)."""
    return phase_time(
        model, gpu, table, phase="decode", batch=batch, tokens=context, tp=tp, pp=pp, precision=precision, detail=False
    ).time_s
