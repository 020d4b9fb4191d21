"""The kernel cost table: what kernels *achieve* on one GPU and serving stack (the pydantic schema; files are
read by :mod:`pdplan.io.kernel_tables`).

A :class:`KernelTable` holds dimensionless efficiencies, saturation constants, launch overheads, the
kernels' CTA tiling and all-reduce α/β; the GPU's datasheet peaks come from a :class:`GpuPeaks` object
(any ``GpuSpec``). The formulas that use these numbers are in :mod:`pdplan.perf.kernels`; each class
here says which formula its fields enter. Units: seconds, FLOP/s, bytes, bytes/s, elements. The attention
entries live in :mod:`pdplan.specs.kernel_attention`, the number types in :mod:`pdplan.specs.kernel_fields`
(import them from there).
"""

from typing import Annotated, Literal, Protocol

from pydantic import Field, model_validator

from pdplan.specs.base import FrozenModel
from pdplan.specs.kernel_attention import (
    DecodeAttentionParams,
    PrefillAttentionParams,
)
from pdplan.specs.kernel_fields import (
    Exponent,
    Fraction,
    L2Mode,
    NonNegative,
    Positive,
    Speedup,
)
from pdplan.specs.moe_wideep import WideEpMoeParams, WideEpPhase

__all__ = [
    "KERNEL_TABLE_SCHEMA_VERSION",
    "A2aMode",
    "A2aParams",
    "AllreduceParams",
    "AlphaBeta",
    "ElementwiseParams",
    "FrameworkParams",
    "GemmFlavour",
    "GemmParams",
    "GpuPeaks",
    "KernelTable",
    "KvFlavour",
    "LinearAttentionParams",
    "LinearPhase",
    "MlaKey",
    "MlaParams",
    "MoeParams",
    "uncalibrated_warning",
]

GemmFlavour = Literal["bf16", "fp8"]
KvFlavour = Literal["bf16", "fp8"]

KERNEL_TABLE_SCHEMA_VERSION = 1


class GpuPeaks(Protocol):
    """Datasheet numbers the cost functions need (``pdplan.specs.hardware.GpuSpec`` fits).

    The tiled attention model also reads an optional ``sm_count`` attribute (streaming
    multiprocessors); objects without one fall back to :attr:`KernelTable.sm_count`.
    """

    @property
    def name(self) -> str: ...
    @property
    def bf16_flops_per_s(self) -> float: ...
    @property
    def fp8_flops_per_s(self) -> float | None: ...
    @property
    def memory_bytes_per_s(self) -> float: ...


class GemmParams(FrozenModel):
    """[m×k]·[k×n] GEMM: compute_s = 2·(m'+m0)·(n+n0)·(k+k0) / (peak·peak_fraction).

    m0/n0/k0 are saturation constants (elements): efficiency ramps as m/(m+m0) etc. (tile and wave
    quantisation), reaching ``peak_fraction`` for large sizes. m' = m, or with ``m_tile`` > 0 and
    m > m_tile the tile-padded ceil(m/m_tile)·m_tile (the kernel's M tile: a 129-token GEMM runs two
    128-row tiles; below one tile the m0 ramp covers the small-m kernels).
    memory_s = bytes / (HBM·memory_fraction), bytes = (m·k + k·n)·in_bytes + m·n·2 (bf16 output).
    fp8 adds the activation quantisation pass m·(``quant_s_per_token`` +
    ``quant_bytes_per_element``·k / (HBM·memory_fraction)) (ideal: read bf16, write fp8, 3 bytes;
    fitted, the measured per-token dynamic-scale pass is slower).

    Two terms for small GEMMs (both 0/off by default):

    * k-loop latency ``k_latency_s``·k/(k + k_sat_elements): a thin GEMM (few output tiles) runs a
      serial k loop on few SMs until split-K caps it; it joins compute and memory in the smooth max.
    * warm L2 (``warm_l2=True`` only): weights served from L2 at ``l2_speedup``× the HBM rate.
      ``l2_mode`` "first": the first ``l2_bytes`` hit; "lru": the whole working set hits up to
      ``l2_bytes``, the hit fraction falls linearly to 0 at 2·``l2_bytes`` (cyclic reuse of a set
      larger than an LRU cache misses). Kernel benchmarks repeat one GEMM, so small weights stay
      in L2 between calls; in serving every layer brings new weights, so the default is off.

    Small-M kernels (off when ``small_m_tokens`` = 0): engines dispatch GEMMs of up to
    ``small_m_tokens`` rows to their own small-tile kernels (vLLM's CUTLASS FP8 ``scaled_mm``: M in
    [1, 16], (16, 64], (64, 128] on SM90, each bucket its own tile and cluster, the 128x128 default
    above; ``csrc/quantization/cutlass_w8a8/c3x/scaled_mm_sm90_fp8_dispatch.cuh``), which stream the
    weights at their own rate and stay flat in m up to the threshold. Those rows are priced by
    ``small_m`` (the same formula, its own numbers) and capped by this entry's time at
    m = ``small_m_tokens`` + 1, so the time stays non-decreasing in m:
    t(m <= S) = min(t_small(m), t(S + 1)), t(m > S) = t(m).
    """

    peak_fraction: Fraction
    m0_tokens: NonNegative
    n0_elements: NonNegative
    k0_elements: NonNegative
    memory_fraction: Fraction
    overhead_s: NonNegative
    smooth_q: Exponent
    quant_bytes_per_element: NonNegative = 0.0
    quant_s_per_token: NonNegative = 0.0
    l2_bytes: NonNegative = 0.0
    l2_speedup: Speedup = 1.0
    l2_mode: L2Mode = "first"
    k_latency_s: NonNegative = 0.0
    k_sat_elements: Positive = 1.0
    m_tile: Annotated[int, Field(strict=True, ge=0, le=4096)] = 0
    small_m_tokens: Annotated[int, Field(strict=True, ge=0, le=4096)] = 0
    small_m: "GemmParams | None" = None

    @model_validator(mode="after")
    def _small_m_pairs(self) -> "GemmParams":
        if (self.small_m is None) != (self.small_m_tokens == 0):
            raise ValueError("small_m and small_m_tokens: give both (a small-M entry and its row threshold) or neither")
        if self.small_m is not None and self.small_m.small_m is not None:
            raise ValueError("small_m: a small-M entry cannot have its own small_m")
        return self


class AlphaBeta(FrozenModel):
    """One all-reduce implementation: alpha_s + 2(n−1)/n · message_bytes / bus_bytes_per_s."""

    alpha_s: NonNegative
    bus_bytes_per_s: Positive


class AllreduceParams(FrozenModel):
    """All-reduce in one node, α-β with the ring factor 2(n−1)/n.

    ``alpha_s``/``bus_bytes_per_s``: the fallback for GPU counts with no entry below (and the
    per-message α of a pipeline hand-off). ``custom`` / ``nccl``: fitted per GPU count for the
    engine's custom all-reduce and for NCCL; engines (vLLM, TRT-LLM) pick the custom kernel for
    small messages and NCCL above a size threshold, so the time is the faster of the two.
    """

    alpha_s: NonNegative
    bus_bytes_per_s: Positive
    custom: dict[int, AlphaBeta] = Field(default_factory=dict)
    nccl: dict[int, AlphaBeta] = Field(default_factory=dict)


class ElementwiseParams(FrozenModel):
    """Memory-bound elementwise/norm kernels: overhead_s + bytes / (HBM·memory_fraction)."""

    memory_fraction: Fraction
    overhead_s: NonNegative


class FrameworkParams(FrozenModel):
    """Per-step framework costs that kernel timings cannot show (scheduling, sampling, gaps)."""

    decode_step_overhead_s: NonNegative
    decode_step_overhead_s_per_seq: NonNegative = 0.0
    """Per decode sequence per step (host work that scales with the batch: input preparation, sampling, output
    processing of each running sequence; docs/engines.md §1.6); 0 in the shipped tables, set by
    an engine profile's ``step_s_per_seq`` (:mod:`pdplan.serving.engine_bind`)."""


class MoeParams(FrozenModel):
    """One fused/grouped MoE layer (all routed experts in one kernel chain), per GPU after EP and moe-TP.

    The routing gives the busiest GPU's P token-expert pairs over H hit experts; T·k pairs enter the layer.
    Each expert's rows are padded to the M tile (vLLM ``moe_align_block_size``), which adapts to the
    tokens per expert as the engines' tuned tile tables do: b_M = clip(2^⌈log2(P/H)⌉, 16, ``m_tile``),
    b_N = ``n_tile`` (``n_tile_small`` when b_M = 16: the small-batch configuration), b_K = ``k_tile``.
    Two grouped GEMMs run per layer, gate/up (N = (g−1)·I, K = h) and down (N = h, K = I), with g = 3
    weight matrices for SwiGLU experts (2 for non-gated ones) and I the per-GPU intermediate size. Each,
    with M tiles m = H·⌈(P/H)/b_M⌉ and CTAs C = m·⌈N/b_N⌉, takes smooth_max(compute, memory, latency; q):

    * compute_s = 2·(m·b_M + m0_tokens·H)·⌈N/b_N⌉b_N·⌈K/b_K⌉b_K / (peak·peak_fraction): padded tiles;
    * memory_s = W / min(HBM·memory_fraction, C·``cta_bytes_per_s``) + P·(K + N)·2 / (HBM·memory_fraction):
      the weights W = H·N·K·w of the hit experts, streamed by at most C CTAs at a per-CTA rate (one or two
      hit experts with a narrow N cannot fill the GPU), plus the gathered input and the output in bf16;
      W grows by ``reread_fraction``·H·N·K·w·(m_e − 1)·min(1, N·K·w / ``l2_bytes``) when an expert has
      m_e > 1 M tiles and its matrix outgrows the L2 (re-streamed per M tile instead of served from L2);
      with ``warm_l2`` (back-to-back benchmarks only) a hit share clip(2 − W_all/``l2_bytes``, 0, 1) of W
      streams ``l2_speedup``× faster (W_all: all hit experts' weights of both GEMMs);
    * latency_s = max(C/SMs, 1)·``cta_s``: waves of CTAs of a minimum duration (tiny shards: many short CTAs).

    Around the GEMMs, activation (SiLU·mul), routing and un-permute move every routed pair's rows:
    pair_s = n_p·2·((2g−1)·I + 2h) / (HBM·``pair_memory_fraction``), with n_p = T·k when the engine
    materialises all pairs on every GPU (``all_pairs``: vLLM's Triton path allocates its intermediate
    caches for all T·k rows when every GPU holds every token, and writes zeros for other ranks' experts) or
    n_p = P (also wherever an EP all-to-all dispatch delivers each GPU only its own pairs).
    time = overhead_s + per_token_s·n + per_expert_s·H + pair_s + GEMMs (n: the pairs the GPU holds, T·k or P),
    and (time − overhead_s)·
    (1 + ``unaligned_penalty``) when I is not a multiple of ``align_elements`` (rows of the down weights
    and of the intermediate then miss the vectorised, aligned load path).
    """

    peak_fraction: Fraction
    m0_tokens: NonNegative
    memory_fraction: Fraction
    overhead_s: NonNegative
    smooth_q: Exponent
    per_token_s: NonNegative = 0.0
    per_expert_s: NonNegative = 0.0
    m_tile: Annotated[int, Field(strict=True, ge=1, le=512)] = 64
    n_tile: Annotated[int, Field(strict=True, ge=1, le=512)] = 1
    n_tile_small: Annotated[int, Field(strict=True, ge=1, le=512)] = 1
    k_tile: Annotated[int, Field(strict=True, ge=1, le=512)] = 1
    pair_memory_fraction: Fraction = 1.0
    all_pairs: bool = False
    cta_bytes_per_s: NonNegative = 0.0  # 0: no per-CTA limit
    cta_s: NonNegative = 0.0
    l2_bytes: NonNegative = 0.0
    l2_speedup: Speedup = 1.0
    reread_fraction: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    unaligned_penalty: NonNegative = 0.0
    align_elements: Annotated[int, Field(strict=True, ge=1, le=512)] = 16


MlaKey = Literal[
    "prefill.bf16.bf16",
    "prefill.bf16.fp8",
    "prefill.fp8.bf16",
    "prefill.fp8.fp8",
    "decode.bf16.bf16",
    "decode.bf16.fp8",
    "decode.fp8.bf16",
    "decode.fp8.fp8",
]


class MlaParams(FrozenModel):
    """DeepSeek MLA attention module of one layer (``pdplan.perf.mla``), per phase × GEMM dtype × KV dtype.

    time = gemm_scale·Σ projection GEMMs (dense GEMM family) + overhead_s + per_token_s·T + per_sequence_s·B
    + smooth_max(FLOPs·(x + ramp)/x / (bf16 peak·compute_fraction), bytes / (HBM·memory_fraction); smooth_q),
    x = prompt length (prefill) or heads per GPU (decode); FLOPs and bytes of the latent (decode) or
    decompressed (prefill) attention as in :mod:`pdplan.perf.mla`.
    """

    overhead_s: NonNegative
    per_token_s: NonNegative = 0.0
    per_sequence_s: NonNegative = 0.0
    compute_fraction: Fraction
    memory_fraction: Fraction
    ramp: NonNegative = 0.0
    gemm_scale: Annotated[float, Field(gt=0.0, le=10.0)] = 1.0
    smooth_q: Exponent = 4.0


class LinearAttentionParams(FrozenModel):
    """One Gated DeltaNet layer's mixer kernels (short causal conv + chunked / recurrent delta-rule scan), per GPU:

    compute_s = T·4·n_v·d_k·d_v / (bf16 peak·compute_fraction) (state update and read-out per token),
    memory_s = (T·(2·n_k·d_k + 2·n_v·d_v)·2 + 2·B·n_v·d_k·d_v·4) / (HBM·memory_fraction) (q, k, v in and o out in
    bf16; the fp32 recurrent state of each of the B sequences read and written once),
    serial_s = ⌈B·n_v / SMs⌉ · (T/B) · serial_s_per_token: the scan walks each sequence's chunks in order, one
    (sequence, value head) per CTA, so with few sequences × heads the GPU waits on that chain, not on FLOPs or bytes,
    time = overhead_s + smooth_max(compute_s, memory_s, serial_s; smooth_q), with T the new tokens of the pass and
    n_k, n_v the heads on the GPU. Fitted per phase (``prefill``: the chunked kernel, ``decode``: the recurrent one).
    """

    compute_fraction: Fraction
    memory_fraction: Fraction
    overhead_s: NonNegative
    smooth_q: Exponent
    serial_s_per_token: NonNegative = 0.0


LinearPhase = Literal["prefill", "decode"]


A2aMode = Literal["normal", "low_latency"]


class A2aParams(FrozenModel):
    """EP dispatch and combine (DeepEP) inside one NVLink domain: α + bytes / β per GPU each.

    bytes per GPU: dispatch T·c·h·b_d, combine T·c·h·2 (BF16), with T tokens on the GPU, h the hidden
    size and c the copies each token sends over the fabric: normal mode sends once per remote rank
    holding one of its k experts, c = (ep − 1)·(1 − (1 − 1/ep)^k) (ranks hit other than its own, for
    uniform routing); low-latency mode sends once per remote expert, c = k·(ep − 1)/ep. b_d = 1 + 4/128
    (FP8 with one fp32 scale per 128 values, as the DeepEP benchmarks dispatch) or 2 (BF16).
    """

    dispatch: AlphaBeta
    combine: AlphaBeta


def uncalibrated_warning(gpu: str, derived_from: str | None) -> str:
    """The words every report prints for a GPU whose kernel table is not measured: derived from which GPU's (a
    packaged derived table, or one pdplan borrowed for a GPU without its own, :meth:`Catalog.borrowed_kernel_table`)."""
    source = f" from {derived_from}'s" if derived_from else ""
    return f"kernel table for {gpu} is not calibrated: its efficiencies are derived{source}, not measured"


class KernelTable(FrozenModel):
    """What kernels achieve on one GPU and serving stack; peaks come from the GPU's datasheet.

    ``sm_count``: streaming multiprocessors of the GPU the table describes (its datasheet, as in
    ``hardware_db``); the tiled attention model uses the GPU object's own ``sm_count`` when it has
    one and this otherwise. Required when any attention entry has a ``tiling``.
    """

    schema_version: Literal[1]
    gpu: Annotated[str, Field(min_length=1)]
    calibrated: bool
    stack: Annotated[str, Field(min_length=1)]
    derived_from: str | None
    sm_count: Annotated[int, Field(strict=True, ge=1, le=4096)] | None = None
    gemm: dict[GemmFlavour, GemmParams]
    prefill_attention: dict[KvFlavour, PrefillAttentionParams]
    decode_attention: dict[KvFlavour, DecodeAttentionParams]
    allreduce: AllreduceParams
    elementwise: ElementwiseParams
    framework: FrameworkParams
    sources: dict[str, str]
    moe: dict[GemmFlavour, MoeParams] = Field(default_factory=dict)
    mla: dict[MlaKey, MlaParams] = Field(default_factory=dict)
    ep_a2a: dict[A2aMode, A2aParams] = Field(default_factory=dict)
    moe_wideep: dict[WideEpPhase, WideEpMoeParams] = Field(default_factory=dict)
    """SGLang's wide-EP MoE (DeepEP + DeepGEMM, FP8) per phase (:mod:`pdplan.specs.moe_wideep`)."""
    linear_attention: dict[LinearPhase, LinearAttentionParams] = Field(default_factory=dict)
    """Fitted Gated DeltaNet kernels (``benchmarks/fit_gdn_tables.py``); empty: the roofline fallback."""

    @model_validator(mode="after")
    def _tiled_needs_sm_count(self) -> "KernelTable":
        tiled = [
            f"{group}.{k}"
            for group, entries in (
                ("prefill_attention", self.prefill_attention),
                ("decode_attention", self.decode_attention),
            )
            for k, v in entries.items()
            if v.tiling is not None
        ]
        if tiled and self.sm_count is None:
            raise ValueError(
                f"sm_count: required when attention entries are tiled ({tiled}); "
                "give the GPU's streaming-multiprocessor count from its datasheet"
            )
        return self
