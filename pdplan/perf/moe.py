"""One MoE layer as the engines run it: a single fused, grouped expert GEMM per layer, priced per GPU.

The caller gives the per-GPU shape: ``tokens`` entering the layer on this GPU group (under attention DP,
all DP ranks' tokens; under EP every GPU computes only its own experts, and with an all-to-all dispatch
(``dispatched``) it also receives only their token-expert pairs), ``experts_per_gpu``
= E/ep resident experts, ``moe_tp`` (the intermediate dimension split over moe_tp GPUs) and the routing law.
The routing (:mod:`pdplan.perf.moe_routing`) gives the busiest GPU's token-expert pairs P and hit experts H;
the grouped GEMM then reads H experts' weights once and computes P rows, each expert's rows padded to the
kernel's M tile (vLLM ``fused_moe``'s ``moe_align_block_size``; DeepGEMM's grouped layout pads the same way).
The cost formula and its fitted numbers are :class:`pdplan.specs.kernel_table.MoeParams`. A table without
a ``moe`` entry for the dtype prices the same grouped GEMM with its dense GEMM efficiencies
(:func:`moe_params_from_gemm`; stated in reports as not separately calibrated).

Shared experts are not here: they are dense GEMMs every token runs (:mod:`pdplan.perf.ops`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pdplan.errors import SpecError
from pdplan.perf.kernels import smooth_max_of
from pdplan.perf.moe_routing import Routing, route
from pdplan.perf.tiling import sm_count
from pdplan.specs.kernel_table import GemmFlavour, GpuPeaks, KernelTable, MoeParams
from pdplan.specs.routing_law import UNIFORM, RoutingLaw
from pdplan.types import ArrayLike, FloatArray


@dataclass(frozen=True)
class MoeLayerShape:
    """Per-GPU shape of one MoE layer (broadcastable arrays); see the module docstring.

    ``tokens``: tokens entering the layer on this GPU group; ``hidden``: model width h;
    ``intermediate``: the expert's full intermediate size (split over ``moe_tp`` here);
    ``num_experts``/``top_k``: E and k; ``ep``: expert-parallel size (E/ep experts per GPU);
    ``weight_bytes``: bytes per expert weight element (2 bf16, 1 fp8, 0.53 mxfp4 with its scales).
    """

    tokens: FloatArray
    hidden: float
    intermediate: float
    num_experts: int
    top_k: int
    ep: FloatArray
    moe_tp: FloatArray
    weight_bytes: float = 2.0
    law: RoutingLaw = UNIFORM
    matrices: float = 3.0  # gate, up, down (SwiGLU); 2 for non-gated experts (up, down)
    dispatched: FloatArray = field(default_factory=lambda: np.asarray(0.0))
    """1 where the tokens reach the experts by an EP all-to-all dispatch (each GPU receives only its own pairs),
    0 where every GPU holds all T tokens and masks other ranks' experts (one GPU, TP, or DP all-gather)."""

    @property
    def inter_per_gpu(self) -> FloatArray:
        out: FloatArray = np.ceil(self.intermediate / np.asarray(self.moe_tp, dtype=np.float64))
        return out

    def routing(self) -> Routing:
        return route(self.tokens, self.num_experts, self.top_k, self.ep, self.law)


def moe_shape(
    tokens: ArrayLike,
    hidden: float,
    intermediate: float,
    num_experts: int,
    top_k: int,
    *,
    ep: ArrayLike = 1,
    moe_tp: ArrayLike = 1,
    weight_bytes: float = 2.0,
    law: RoutingLaw | None = None,
    gated: bool = True,
    dispatched: ArrayLike = 0.0,
) -> MoeLayerShape:
    """A :class:`MoeLayerShape` from plain numbers (ep must divide into at least one expert per GPU)."""
    ep_ = np.asarray(ep, dtype=np.float64)
    if np.any(ep_ < 1.0) or np.any(ep_ > num_experts):
        raise SpecError(f"ep must lie in 1..num_experts ({num_experts}); got {ep_.tolist()}", field="ep")
    return MoeLayerShape(
        np.asarray(tokens, dtype=np.float64),
        float(hidden),
        float(intermediate),
        int(num_experts),
        int(top_k),
        ep_,
        np.asarray(moe_tp, dtype=np.float64),
        float(weight_bytes),
        law or RoutingLaw(),
        3.0 if gated else 2.0,
        np.asarray(dispatched, dtype=np.float64),
    )


def moe_params_from_gemm(table: KernelTable, flavour: GemmFlavour) -> MoeParams:
    """The table's fitted MoE entry, or one built from its dense GEMM entry (same efficiencies, one launch)."""
    if flavour in table.moe:
        return table.moe[flavour]
    if flavour not in table.gemm:
        raise SpecError(f"kernel table for {table.gpu!r} has no gemm or moe entry for {flavour!r}", field="moe")
    g = table.gemm[flavour]
    return MoeParams(
        peak_fraction=g.peak_fraction,
        m0_tokens=g.m0_tokens,
        memory_fraction=g.memory_fraction,
        overhead_s=g.overhead_s,
        smooth_q=g.smooth_q,
        m_tile=max(g.m_tile, 16),
    )


def moe_flops_bytes(s: MoeLayerShape) -> tuple[FloatArray, FloatArray]:
    """Ideal FLOPs 2·g·h·I·P and bytes H·g·h·I·w + P·(2h + 2g·I)·2 of one layer on the busiest GPU (g matrices)."""
    r = s.routing()
    inter = s.inter_per_gpu
    g = s.matrices
    flops: FloatArray = 2.0 * g * s.hidden * inter * r.pairs
    bytes_: FloatArray = (
        r.hit * g * s.hidden * inter * s.weight_bytes + r.pairs * (2.0 * s.hidden + 2.0 * g * inter) * 2.0
    )
    return flops, bytes_


def _peak(gpu: GpuPeaks, flavour: GemmFlavour) -> float:
    if flavour == "bf16":
        return gpu.bf16_flops_per_s
    if gpu.fp8_flops_per_s is None:
        raise SpecError(
            f"GPU {gpu.name!r} has no FP8 tensor peak (fp8_flops_per_s is null); use dtype bf16", field="dtype"
        )
    return gpu.fp8_flops_per_s


def _gemm_s(
    s: MoeLayerShape, r: Routing, n: FloatArray, k: FloatArray, c: _Ctx, p: MoeParams, warm_l2: bool
) -> FloatArray:
    """One grouped GEMM (N×K weights per expert) on the busiest GPU: smooth_max(compute, memory, latency)."""
    hit = np.maximum(r.hit, 1e-9)
    per_expert = r.pairs / hit
    b_m = np.minimum(np.clip(2.0 ** np.ceil(np.log2(np.maximum(per_expert, 1.0))), 16.0, None), float(p.m_tile))
    b_n = np.where(b_m <= 16.0, float(p.n_tile_small), float(p.n_tile))
    tiles_e = np.ceil(per_expert / b_m)
    m_tiles, n_tiles = hit * tiles_e, np.ceil(n / b_n)
    ctas = m_tiles * n_tiles
    k_pad = np.ceil(k / p.k_tile) * p.k_tile
    compute = 2.0 * (m_tiles * b_m + p.m0_tokens * r.hit) * n_tiles * b_n * k_pad / (c.peak * p.peak_fraction)
    matrix = n * k * s.weight_bytes
    weights = r.hit * matrix
    if p.reread_fraction > 0.0 and p.l2_bytes > 0.0:  # matrices larger than the L2, re-streamed per M tile
        weights = weights + p.reread_fraction * r.hit * matrix * (tiles_e - 1.0) * np.minimum(1.0, matrix / p.l2_bytes)
    if warm_l2 and p.l2_bytes > 0.0:
        hit_share = np.clip(2.0 - c.all_weights / p.l2_bytes, 0.0, 1.0)
        weights = weights * (1.0 - hit_share * (1.0 - 1.0 / p.l2_speedup))
    bw = c.hbm * p.memory_fraction
    stream = bw if p.cta_bytes_per_s <= 0.0 else np.minimum(bw, ctas * p.cta_bytes_per_s)
    memory = weights / stream + r.pairs * (k + n) * 2.0 / bw
    latency = np.maximum(ctas / c.sms, 1.0) * p.cta_s
    return smooth_max_of((compute, memory, latency), p.smooth_q)


@dataclass(frozen=True)
class _Ctx:
    peak: float
    hbm: float
    sms: float
    all_weights: FloatArray


def moe_time_s(
    s: MoeLayerShape,
    flavour: GemmFlavour,
    gpu: GpuPeaks,
    table: KernelTable,
    params: MoeParams | None = None,
    *,
    warm_l2: bool = False,
) -> FloatArray:
    """Seconds of one MoE layer's routed experts on the busiest GPU (formula: :class:`MoeParams`).

    ``warm_l2=True`` reproduces back-to-back kernel benchmarks (small expert sets served from L2).
    """
    p = params or moe_params_from_gemm(table, flavour)
    r = s.routing()
    inter, h, g = s.inter_per_gpu, s.hidden, s.matrices
    up_n = (g - 1.0) * inter
    all_w = r.hit * (up_n * h + h * inter) * s.weight_bytes
    sms = sm_count(gpu, table) if p.cta_s > 0.0 else 1.0
    c = _Ctx(_peak(gpu, flavour), gpu.memory_bytes_per_s, sms, all_w)
    gemms = _gemm_s(s, r, up_n, np.asarray(h, dtype=np.float64), c, p, warm_l2) + _gemm_s(
        s, r, np.asarray(h, dtype=np.float64), inter, c, p, warm_l2
    )
    # all T·k pairs where every GPU holds every token (the measured single-GPU path); the GPU's own after a dispatch
    seen = np.where(s.dispatched > 0.0, r.pairs, s.tokens * s.top_k)
    moved = seen if p.all_pairs else r.pairs
    pair_s = moved * 2.0 * ((2.0 * g - 1.0) * inter + 2.0 * h) / (gpu.memory_bytes_per_s * p.pair_memory_fraction)
    body = p.per_token_s * seen + p.per_expert_s * r.hit + pair_s + gemms
    misaligned = np.mod(inter, p.align_elements) != 0.0
    t: FloatArray = p.overhead_s + body * np.where(misaligned, 1.0 + p.unaligned_penalty, 1.0)
    return np.where(s.tokens > 0.0, t, 0.0)
