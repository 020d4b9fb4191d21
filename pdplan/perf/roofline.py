"""Phase times from the per-operator roofline: prefill of a batch of prompts, one decode step.

Each operator of :func:`pdplan.perf.ops.forward_ops` is priced by the calibrated kernel cost functions of
:mod:`pdplan.perf.kernels` — ``overhead + smooth_max(FLOPs / (peak·η_c), bytes / (BW·η_m))`` per kernel — and
multiplied by how often it runs. On top come the per-step framework overhead (scheduler, sampling, launch gaps;
kernel table ``framework``) and pipeline-parallel hand-offs.

Pipeline parallelism (PP = p) splits the layers into p equal stages. A pass's *latency* is the sum of the
stages plus (p − 1) hand-offs of the activations; its *stage time* (the bottleneck that sets steady-state
throughput when p micro-batches are in flight) is latency / p plus one hand-off. For p = 1 both are equal.

Everything is vectorised: ``batch``, ``tokens`` and ``tp`` broadcast, so thousands of candidates cost one call.
Nothing here reads a file: besides the model, the GPU's peaks and the kernel table, a pass takes the packaged data it
prices by (EP constants, DeepEP's inter-node shares, the two-batch-overlap schedule, the GPU's W4A16 / CUTLASS MoE
entries) as :class:`~pdplan.specs.perf_data.PerfData` (``data``), which :func:`pdplan.io.perf_data.perf_data` reads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pdplan.perf.act_quant import dispatch_quant_ops
from pdplan.perf.expert_parallel import a2a_phases_s, exposed_gather_s
from pdplan.perf.moe_wideep import MoeKernel
from pdplan.perf.op_pricing import OpTime, Pricing, price_ops
from pdplan.perf.op_types import AllToAllOp, Op, PassShape, Phase
from pdplan.perf.ops import forward_ops
from pdplan.perf.ops_moe import parallel_fields
from pdplan.perf.precision import Precision
from pdplan.perf.tiling import sm_count
from pdplan.perf.two_batch_overlap import exposed_comm_s, staged_exposed_comm_s, window_s
from pdplan.specs.kernel_table import GpuPeaks, KernelTable
from pdplan.specs.model import ModelSpec
from pdplan.specs.perf_data import PerfData
from pdplan.specs.routing_law import RoutingLaw
from pdplan.types import ArrayLike, FloatArray

__all__ = [
    "BOUNDS",
    "PhaseTime",
    "decode_step_s",
    "hide_gather",
    "overlap_two_batches",
    "phase_time",
    "prefill_time_s",
]

BOUNDS = ("compute", "memory", "communication", "overhead")


@dataclass(frozen=True)
class PhaseTime:
    """A phase's latency and bottleneck-stage time (s) with the per-operator breakdown."""

    phase: Phase
    time_s: FloatArray
    stage_time_s: FloatArray
    framework_overhead_s: float | FloatArray
    """Per step (``decode_step_overhead_s``), plus per sequence in a decode step (an array over the batch then)."""
    pp_handoff_s: FloatArray
    ops: tuple[OpTime, ...]

    def kind_s(self, kind: str, shape: tuple[int, ...]) -> FloatArray:
        """The seconds of the ops of ``kind`` (``attn_prefill``, ``moe``, …) over the pass's points, broadcast to
        ``shape`` (zeros where it has none)."""
        out = np.zeros(shape)
        for op in self.ops:
            if op.kind == kind:
                out = out + op.time_s
        return np.asarray(out, dtype=np.float64)

    def bound(self) -> str:
        """compute | memory | communication | overhead: the category holding the most time (first element)."""
        totals = dict.fromkeys(BOUNDS, 0.0)
        for op in self.ops:
            if op.bound not in totals:
                raise ValueError("bound() needs the per-op detail: call phase_time(..., detail=True)")
            totals[op.bound] += float(np.ravel(op.time_s)[0])
        totals["overhead"] += float(np.ravel(self.framework_overhead_s)[0])
        totals["communication"] += float(np.ravel(self.pp_handoff_s)[0])
        return max(BOUNDS, key=lambda b: totals[b])


def hide_gather(ops: tuple[OpTime, ...], num_layers: float, data: PerfData) -> tuple[OpTime, ...]:
    """ZeRO-Prefill: each MoE layer's weight gather runs behind the previous layer's compute, so only its exposed part
    ``max(0, γ·t_gather − t_layer)`` counts (t_layer = the pass's other op time per layer, γ the overlap jitter of
    ``data``; :func:`pdplan.perf.expert_parallel.exposed_gather_s`). Ops without a gather come back unchanged."""
    gathers = [op for op in ops if op.kind == "weight_gather"]
    if not gathers:
        return ops
    gather = gathers[0]
    others = sum((op.time_s for op in ops if op.kind != "weight_gather"), np.zeros(()))
    gamma = data.ep_defaults("ZeRO-Prefill's gather overlap").gather_overlap_jitter
    exposed = exposed_gather_s(gather.time_s / gather.count, others / num_layers, gamma) * gather.count
    return tuple(dataclasses.replace(op, time_s=exposed) if op is gather else op for op in ops)


def overlap_two_batches(
    half_ops: tuple[OpTime, ...],
    model: ModelSpec,
    phases_s: tuple[FloatArray, FloatArray] | None = None,
    comm_sm_share: float = 0.0,
    windows: dict[str, dict[str, float]] | None = None,
) -> tuple[OpTime, ...]:
    """The pass as two micro-batches (:mod:`pdplan.perf.two_batch_overlap`): every op of the half batch runs twice,
    and the all-to-all keeps only its exposed part, so the ops still sum to the pass time. ``phases_s``: the half
    batch's dispatch and combine per MoE layer for the staged decode form (hidden only by the compute of the
    windows that SGLang's decode schedule puts between send and receive); None: the two-resource form
    ``T_TBO − 2·C_half`` (prefill), where ``comm_sm_share`` of the SMs are held by the transfers while they run (the
    compute they slow is booked on the all-to-all op). ``windows``: the decode overlap windows of the staged form
    (:class:`~pdplan.specs.perf_data.TwoBatchOverlapSchedule`), required with ``phases_s``."""
    comm = next(op for op in half_ops if op.kind == "alltoall")
    if phases_s is None:
        compute = sum((op.time_s for op in half_ops if op is not comm), np.zeros(()))
        exposed = exposed_comm_s(compute, comm.time_s, float(model.num_layers), comm.count, comm_sm_share)
    else:
        layers, moe_layers = float(model.num_layers), comm.count
        per_layer = {
            op.name: op.time_s / (moe_layers if op.name.startswith("moe.") else layers)
            for op in half_ops
            if op is not comm
        }
        if windows is None:
            raise ValueError("the staged decode form of two-batch overlap needs the decode overlap windows")
        w_d, w_k = (window_s(per_layer, windows[w]) for w in ("dispatch_window", "combine_window"))
        exposed = staged_exposed_comm_s(phases_s[0], phases_s[1], w_d, w_k, moe_layers)
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
    data: PerfData | None = None,
) -> PhaseTime:
    """Latency of one pass: prefill of ``batch`` prompts × ``tokens``, or one decode step at context ``tokens``.

    MoE layers: ``ep`` experts-parallel GPUs (E/ep experts each), ``moe_tp`` the split of the expert
    intermediate size (None: ``tp·dp/ep``, i.e. plain ``tp`` without DP/EP), ``moe_dp`` attention-DP ranks whose
    tokens meet in one MoE layer, ``routing`` the routing law (default uniform); see :mod:`pdplan.perf.moe`.

    With attention data parallelism ``dp`` the ``batch`` is the instance's, spread evenly over its ranks (``moe_dp``
    then defaults to ``dp``); EP > 1 adds the dispatch + combine all-to-all, and ``expert_gather`` prices
    ZeRO-Prefill's weight gather instead of it (:mod:`pdplan.perf.expert_parallel`). ``moe_kernel``: the expert family
    (:func:`pdplan.perf.moe_wideep.moe_kernel_for`); ``two_batch_overlap``: an EP pass as two overlapped micro-batches
    (:func:`overlap_two_batches`); ``data``: the inputs beyond the kernel table (:mod:`pdplan.specs.perf_data`).

    Example: Llama-3.1-70B, H100, TP=8, prefill of one 2048-token prompt ≈ 0.1–0.2 s (compute-bound).
    """
    prec = precision or Precision()
    # broadcast lazily: a scalar TP/PP stays a scalar, so every weight shape (n, k) stays a scalar too and only
    # the token-dependent terms are arrays (about half the work for the common one-TP call)
    b, n, t, p = (np.asarray(x, dtype=np.float64) for x in (batch, tokens, tp, pp))
    full = np.broadcast_shapes(b.shape, n.shape, t.shape, p.shape)
    shape = _pass_shape(
        phase, (b, n, t), prec, dp=dp, ep=ep, moe_tp=moe_tp, moe_dp=moe_dp, routing=routing, gather=expert_gather
    )
    pricing = Pricing(gpu, table, prec, moe_kernel, phase, data or PerfData())
    ops = _priced_pass(model, shape, pricing, detail, two_batch_overlap)
    handoff_s = _handoff_s(model, shape, gpu, table, p)
    overhead_s: float | FloatArray = table.framework.decode_step_overhead_s
    if phase == "decode" and table.framework.decode_step_overhead_s_per_seq > 0.0:  # per running sequence
        overhead_s = overhead_s + b * table.framework.decode_step_overhead_s_per_seq
    return _assemble(phase, ops, full, overhead_s, (handoff_s, p))


def _assemble(
    phase: Phase,
    ops: tuple[OpTime, ...],
    full: tuple[int, ...],
    overhead_s: float | FloatArray,
    pipeline: tuple[FloatArray, FloatArray],
) -> PhaseTime:
    """The pass from its priced ops: their sum plus the framework overhead; ``pipeline`` (hand-off s, PP degree p)
    adds p − 1 hand-offs to the latency and one to the stage time (module docstring)."""
    handoff_s, p = pipeline
    compute_s = np.zeros(full)
    for op in ops:  # in place: one pass per op, no temporaries
        np.add(compute_s, op.time_s, out=compute_s)
    # per GPU of a stage the layer work divides by p; the (un-split) head/embedding is small and kept whole
    latency_s = compute_s + overhead_s + (p - 1.0) * handoff_s
    stage_s = compute_s / p + overhead_s + handoff_s
    return PhaseTime(phase, latency_s, stage_s, overhead_s, handoff_s, ops)


def _pass_shape(
    phase: Phase,
    btt: tuple[FloatArray, FloatArray, FloatArray],
    prec: Precision,
    *,
    dp: int,
    ep: ArrayLike,
    moe_tp: ArrayLike | None,
    moe_dp: ArrayLike,
    routing: RoutingLaw | None,
    gather: bool,
) -> PassShape:
    """The :class:`PassShape` of :func:`phase_time`'s arguments (``btt``: batch, tokens, tp as arrays)."""
    b, n, t = btt
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
        expert_gather=gather,
    )
    # the per-rank interface: the batch of one rank, moe_dp ranks meeting in the MoE layers
    if dp == 1 and bool(np.any(np.asarray(moe_dp) != 1.0)):
        shape = dataclasses.replace(shape, moe_dp=np.asarray(moe_dp, dtype=np.float64))
    return shape


def _pass_ops(model: ModelSpec, shape: PassShape, kernel: MoeKernel) -> list[Op]:
    """The pass's operators (:func:`pdplan.perf.ops.forward_ops`) plus the activation quantisation that ``kernel``'s
    engine runs as its own kernel outside every table (:func:`pdplan.perf.act_quant.dispatch_quant_ops`)."""
    ops = forward_ops(model, shape)
    return ops + dispatch_quant_ops(ops, shape.act_bytes, kernel)


def _priced_pass(
    model: ModelSpec, shape: PassShape, pricing: Pricing, detail: bool, two_batch_overlap: bool
) -> tuple[OpTime, ...]:
    """Every op of the pass priced, ZeRO-Prefill gathers hidden, and with ``two_batch_overlap`` an EP pass as two
    overlapped micro-batches."""
    priced = price_ops(_pass_ops(model, shape, pricing.kernel), pricing, detail)
    ops = hide_gather(priced, model.num_layers, pricing.data)
    if two_batch_overlap and any(op.kind == "alltoall" for op in ops):
        gpu, table = pricing.gpu, pricing.table
        half = dataclasses.replace(shape, batch=shape.batch / 2.0)
        half_pass = _pass_ops(model, half, pricing.kernel)
        half_ops = price_ops(half_pass, pricing, detail)
        schedule = pricing.data.tbo_schedule()
        phases_s, share = None, 0.0
        if shape.phase == "decode":  # SGLang's staged decode schedule (pdplan.perf.two_batch_overlap)
            comm = next(op for op in half_pass if isinstance(op, AllToAllOp))
            phases_s = a2a_phases_s(comm, gpu, table, pricing.data)
        else:  # prefill: DeepEP's normal-mode kernels hold their SMs while a transfer runs
            share = min(schedule.prefill_comm_sms / float(sm_count(gpu, table)), 1.0)
        ops = overlap_two_batches(half_ops, model, phases_s, share, schedule.decode_windows)
    return ops


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
    data: PerfData | None = None,
) -> FloatArray:
    """Latency (s) of prefilling ``batch`` prompts of ``tokens`` tokens (vectorised); ``data`` as in
    :func:`phase_time`."""
    kw = {"tp": tp, "pp": pp, "precision": precision, "data": data}
    return phase_time(model, gpu, table, phase="prefill", batch=batch, tokens=tokens, detail=False, **kw).time_s  # type: ignore[arg-type]


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
    data: PerfData | None = None,
) -> FloatArray:
    """Latency (s) of one decode step for ``batch`` sequences at mean context ``context`` (vectorised); ``data`` as in
    :func:`phase_time`."""
    kw = {"tp": tp, "pp": pp, "precision": precision, "data": data}
    return phase_time(model, gpu, table, phase="decode", batch=batch, tokens=context, detail=False, **kw).time_s  # type: ignore[arg-type]
