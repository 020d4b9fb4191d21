"""Kernel-table entry of SGLang's wide-EP MoE: DeepEP token layout + DeepGEMM grouped FP8 GEMMs (schema only).

The formula that uses these numbers is :func:`pdplan.perf.moe_wideep.wideep_moe_time_s`; the fit is
``tools/fitting/fit_wideep.py``. One entry per phase, because SGLang runs two different kernels:

* ``prefill``: DeepEP normal mode hands the GPU the tokens routed to it; SGLang scatters them into DeepGEMM's
  *contiguous* grouped layout (each expert's rows aligned to 128), runs the grouped FP8 GEMMs and gathers the
  weighted outputs back per received token (``DeepEPMoE.forward_deepgemm_contiguous``);
* ``decode``: DeepEP low-latency mode delivers a fixed ``[local experts, max tokens, h]`` buffer and DeepGEMM's
  *masked* grouped GEMM computes only each expert's ``masked_m`` rows (``forward_deepgemm_masked``, CUDA graphs).
"""

from typing import Annotated, Literal

from pydantic import Field

from pdplan.specs.base import FrozenModel
from pdplan.specs.kernel_fields import Exponent, Fraction, NonNegative

WideEpPhase = Literal["prefill", "decode"]


class WideEpMoeParams(FrozenModel):
    """One MoE layer's routed experts on one GPU of a wide-EP group, SGLang DeepEP + DeepGEMM (FP8 block weights).

    With R tokens received by the GPU, P token-expert pairs over H hit local experts (hidden h, intermediate I,
    g = 3 matrices for SwiGLU experts), each expert's rows padded to ``m_tile``,
    P' = H·⌈(P/H)/m_tile⌉·m_tile:

    * compute_s = 2·g·h·I·(P' + m0_tokens·H) / (FP8 peak·peak_fraction);
    * memory_s = (H·g·h·I·w + P·(2h + 2g·I)·2) / (HBM·memory_fraction) (the experts' weights once, the rows'
      activations in and out);
    * time = overhead_s + per_row_s·R + per_expert_s·H + smooth_max(compute_s, memory_s; smooth_q).

    ``per_row_s`` prices the scatter into and the gather out of the grouped layout per received token (the
    prefill layout; 0 for the masked decode buffer), ``per_expert_s`` a fixed cost per hit expert.
    """

    peak_fraction: Fraction
    m0_tokens: NonNegative
    memory_fraction: Fraction
    overhead_s: NonNegative
    smooth_q: Exponent
    per_row_s: NonNegative = 0.0
    per_expert_s: NonNegative = 0.0
    m_tile: Annotated[int, Field(strict=True, ge=1, le=512)] = 128


class MoeRuntime(FrozenModel):
    """How an engine runs MoE layers (an engine profile's ``moe`` block; None there: fused kernel, no overlap).

    ``ep_kernel``: the expert kernel at expert parallelism > 1 with FP8 experts, on GPUs whose kernel table has a
    ``moe_wideep`` entry (the DeepGEMM kernels need Hopper or Blackwell): ``deepgemm_wideep`` (SGLang's DeepEP +
    DeepGEMM layer), ``cutlass`` (TensorRT-LLM's CUTLASS fused MoE, on GPUs with a ``pdplan/data/moe_cutlass``
    entry, :mod:`pdplan.perf.moe_cutlass`) or ``fused`` (the engine's fused MoE, :mod:`pdplan.perf.moe`), which
    also prices EP 1, BF16 experts and every other GPU. ``two_batch_overlap``: the engine's default for splitting
    each EP step into two micro-batches whose all-to-all overlaps the other's compute
    (:mod:`pdplan.perf.two_batch_overlap`); a scenario's ``two_batch_overlap`` overrides it.
    ``eplb_prefill_routing``: the named routing law
    (``pdplan/data/moe_routing.yaml``) of the prefill experts where the deployment runs EPLB (a scenario's
    ``redundant_experts`` > 0) with the ``deepgemm_wideep`` kernel; None (and decode, and every other case):
    uniform routing, each GPU the mean load.
    """

    ep_kernel: Literal["fused", "deepgemm_wideep", "cutlass"] = "fused"
    two_batch_overlap: bool = False
    eplb_prefill_routing: Annotated[str, Field(min_length=1)] | None = None
    source: Annotated[str, Field(min_length=1)]
