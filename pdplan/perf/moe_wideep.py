"""SGLang's wide-EP MoE layer: DeepEP token exchange around DeepGEMM's grouped FP8 GEMMs, priced per GPU.

Which kernel family prices a deployment's experts follows its engine (:func:`moe_kernel_for`): SGLang with expert
parallelism (``--moe-a2a-backend deepep``, the large-scale EP recipe of the LMSYS blog 2025-05-05) runs its
``DeepEPMoE`` layer, whose experts are DeepGEMM grouped GEMMs (contiguous layout in prefill, masked layout in
decode); vLLM, and SGLang without EP, run a fused MoE kernel (:mod:`pdplan.perf.moe`). The rule is data: the
engine profile's ``moe`` block (``pdplan/data/engines/*.yaml``, :class:`pdplan.specs.engine.MoeRuntime`).

The layer on one GPU of an EP group of ``ep`` GPUs (:class:`pdplan.specs.moe_wideep.WideEpMoeParams` has the
formula): the routing law gives the busiest GPU's token-expert pairs P and hit experts H
(:mod:`pdplan.perf.moe_routing`); the GPU also handles R *received* tokens, each once however many of its experts
it picked (DeepEP normal mode sends a token once per destination rank):

    R = min(T, P·ρ),   ρ = ep·(1 − (1 − 1/ep)^k) / k

ρ is the share of distinct tokens among the pairs when a token's k experts fall on independent uniform ranks
(expected ranks hit per token ep·(1 − (1 − 1/ep)^k), against k pairs); ρ = 1/k at ep = 1 (R = T), → 1 as ep → ∞.

**The calibration rows count R differently.** AIConfigurator's collector (``collect_wideep_deepep_moe.py``) feeds
the layer the whole global batch, T rows of which most carry no local expert, so there R = T; its fit
(``tools/fitting/fit_wideep.py``) passes ``rows=T``. Serving passes the physical R above: the per-row cost is
calibrated, the count of rows follows DeepEP's dispatch.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from pdplan.errors import SpecError
from pdplan.perf.kernels import smooth_max
from pdplan.perf.moe import MoeLayerShape
from pdplan.perf.moe_routing import Routing
from pdplan.specs.kernel_table import GpuPeaks, KernelTable
from pdplan.specs.moe_wideep import MoeRuntime, WideEpMoeParams, WideEpPhase
from pdplan.specs.perf_data import PerfData
from pdplan.types import ArrayLike, FloatArray

MoeKernel = Literal["fused", "deepgemm_wideep", "cutlass"]
"""The MoE kernel families: ``fused`` (:mod:`pdplan.perf.moe`), ``deepgemm_wideep`` (this module), ``cutlass``
(TensorRT-LLM's CUTLASS fused MoE: the fused formula with its own entry, :mod:`pdplan.perf.moe_cutlass`)."""


def moe_kernel_for(
    runtime: MoeRuntime | None, ep: int, weight_bytes: float, table: KernelTable, data: PerfData
) -> MoeKernel:
    """The expert kernel an engine runs for one instance type (the rule of
    :class:`~pdplan.specs.moe_wideep.MoeRuntime`): the engine's EP kernel when EP > 1, the experts are FP8 (<= 1 byte
    per weight) and the GPU has that kernel's measured entry (``deepgemm_wideep``: both ``moe_wideep`` phases of its
    table, Hopper/Blackwell; ``cutlass``: a ``pdplan/data/moe_cutlass`` entry in ``data``, H100/H200); ``fused``
    otherwise.

    Example: SGLang, EP 72, FP8 on H100 -> deepgemm_wideep; TensorRT-LLM, EP 4, FP8 on H100 -> cutlass; either at
    EP 1, in BF16, or under vLLM -> fused."""
    if runtime is None or runtime.ep_kernel == "fused" or ep <= 1 or weight_bytes > 1.0:
        return "fused"
    if runtime.ep_kernel == "cutlass":
        return "cutlass" if data.moe_entries("the CUTLASS MoE rule").cutlass is not None else "fused"
    return "deepgemm_wideep" if {"prefill", "decode"} <= set(table.moe_wideep) else "fused"


def received_rows(tokens: ArrayLike, pairs: ArrayLike, top_k: int, ep: ArrayLike) -> FloatArray:
    """R = min(T, P·ρ), ρ = ep·(1 − (1 − 1/ep)^k)/k: tokens a GPU receives (module docstring).

    Example: T = 524,288, k = 8, ep = 32, P = T·k/ep = 131,072: ρ = 32·(1 − (31/32)^8)/8 = 0.8972, R = 117,598."""
    t = np.asarray(tokens, dtype=np.float64)
    e = np.maximum(np.asarray(ep, dtype=np.float64), 1.0)
    rho = e * -np.expm1(top_k * np.log1p(-1.0 / np.maximum(e, 1.0 + 1e-12))) / top_k
    rho = np.where(e > 1.0, rho, 1.0 / top_k)
    out: FloatArray = np.minimum(t, np.asarray(pairs, dtype=np.float64) * rho)
    return out


def wideep_params(table: KernelTable, phase: WideEpPhase) -> WideEpMoeParams:
    """The table's fitted wide-EP entry for ``phase``; a clear error where the GPU has none (never a made-up one)."""
    if phase not in table.moe_wideep:
        have = ", ".join(sorted(table.moe_wideep)) or "none"
        raise SpecError(
            f"kernel table for {table.gpu!r} has no moe_wideep entry for {phase} (has: {have}); SGLang's DeepGEMM "
            "wide-EP MoE is measured on H100, H200 and B200 only: use --engine vllm or ep 1 on this GPU",
            field="moe_wideep",
        )
    return table.moe_wideep[phase]


def wideep_moe_time_s(
    s: MoeLayerShape,
    phase: WideEpPhase,
    gpu: GpuPeaks,
    table: KernelTable,
    params: WideEpMoeParams | None = None,
    rows: ArrayLike | None = None,
    routing: Routing | None = None,
) -> FloatArray:
    """Seconds of one MoE layer's routed experts on the busiest GPU of the EP group (formula: WideEpMoeParams).

    ``rows``: tokens the GPU handles (None: :func:`received_rows`; the calibration passes T, module docstring);
    ``routing``: pairs and hit experts (None: the shape's routing law; the calibration passes its collector's).
    FP8 only: DeepGEMM's grouped GEMMs are FP8 block-scaled (the measured tables hold ``fp8_block`` rows only)."""
    p = params or wideep_params(table, phase)
    if gpu.fp8_flops_per_s is None:
        raise SpecError(f"GPU {gpu.name!r} has no FP8 peak; DeepGEMM's wide-EP MoE runs FP8", field="dtype")
    r = routing or s.routing()
    inter = s.inter_per_gpu
    hit = np.maximum(r.hit, 1e-9)
    padded = hit * np.ceil(r.pairs / hit / p.m_tile) * p.m_tile
    g = s.matrices
    compute_s = 2.0 * g * s.hidden * inter * (padded + p.m0_tokens * r.hit) / (gpu.fp8_flops_per_s * p.peak_fraction)
    w_bytes = r.hit * g * s.hidden * inter * s.weight_bytes
    act_bytes = r.pairs * (2.0 * s.hidden + 2.0 * g * inter) * 2.0
    memory_s = (w_bytes + act_bytes) / (gpu.memory_bytes_per_s * p.memory_fraction)
    handled = received_rows(s.tokens, r.pairs, s.top_k, s.ep) if rows is None else np.asarray(rows, dtype=np.float64)
    fixed_s = p.overhead_s + p.per_row_s * handled + p.per_expert_s * r.hit
    t: FloatArray = fixed_s + smooth_max(compute_s, memory_s, p.smooth_q)
    return np.asarray(np.where(s.tokens > 0.0, t, 0.0), dtype=np.float64)
