"""Calibrated, torch-free kernel cost table and the primitive kernel cost functions built on it.

A :class:`KernelTable` holds what kernels *achieve* on one GPU and serving stack (dimensionless
efficiencies, saturation constants, launch overheads, all-reduce α/β); the GPU's datasheet
peaks come from a :class:`GpuPeaks` object (any ``GpuSpec``). Every cost function is vectorised
(numpy broadcasting) and has the same shape::

    time_s = overhead_s + smooth_max(compute_s, memory_s; q)
    smooth_max(a, b; q) = (a**q + b**q)**(1/q)        # q >= 1; q -> inf is max(a, b)

smooth_max is never below max(a, b) and is non-decreasing in a and b, so a larger problem is never
faster and more FLOP/s or bytes/s is never slower. Units: seconds, FLOP/s, bytes, bytes/s, elements.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from pdplan.errors import SpecError, UnknownNameError

ArrayLike = npt.ArrayLike
FloatArray = npt.NDArray[np.float64]
GemmFlavour = Literal["bf16", "fp8"]
KvFlavour = Literal["bf16", "fp8"]

KERNEL_TABLE_SCHEMA_VERSION = 1
TABLE_DIR = Path(__file__).parent / "kernel_tables"
_T = TypeVar("_T")

Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]
Exponent = Annotated[float, Field(ge=1.0, le=64.0)]
HeadDimFactor = Annotated[float, Field(ge=0.5, le=1.0)]


class GpuPeaks(Protocol):
    """Datasheet numbers the cost functions need (``pdplan.specs.hardware.GpuSpec`` fits)."""

    @property
    def name(self) -> str: ...
    @property
    def bf16_flops_per_s(self) -> float: ...
    @property
    def fp8_flops_per_s(self) -> float | None: ...
    @property
    def memory_bytes_per_s(self) -> float: ...


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GemmParams(_Frozen):
    """[m×k]·[k×n] GEMM: compute_s = 2·(m+m0)·(n+n0)·(k+k0) / (peak·peak_fraction).

    m0/n0/k0 are saturation constants (elements): efficiency ramps as m/(m+m0) etc. (tile and wave
    quantisation), reaching ``peak_fraction`` for large sizes.
    memory_s = bytes / (HBM·memory_fraction), bytes = (m·k + k·n)·in_bytes + m·n·2 (bf16 output).
    fp8 adds the activation quantisation pass m·(``quant_s_per_token`` +
    ``quant_bytes_per_element``·k / (HBM·memory_fraction)) (ideal: read bf16, write fp8, 3 bytes;
    fitted, the measured per-token dynamic-scale pass is slower).

    Two terms for small GEMMs (both 0/off by default):

    * k-loop latency ``k_latency_s``·k/(k + k_sat_elements): a thin GEMM (few output tiles) runs a
      serial k loop on few SMs until split-K caps it; it joins compute and memory in the smooth max.
    * warm L2 (``warm_l2=True`` only): the first ``l2_bytes`` of the weights stream at
      ``l2_speedup``× the HBM rate. Kernel benchmarks repeat one GEMM, so small weights stay in L2
      between calls; in serving every layer brings new weights, so the default is off.
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
    l2_speedup: Annotated[float, Field(ge=1.0, le=64.0)] = 1.0
    k_latency_s: NonNegative = 0.0
    k_sat_elements: Positive = 1.0


class PrefillAttentionParams(_Frozen):
    """Causal prefill attention (FlashAttention-style), per GPU after TP (heads = local heads).

    FLOPs: per head, QKᵀ and PV each cost 2·d per (query, key) pair, and a causal prompt of s tokens
    has s(s+1)/2 pairs, so F = 2·b·h·d·s·(s+1). Compute time uses a tile-padded length and a
    parallelism ramp: compute_s = 2·d·(s+1)·(s+s0)·(b·h + w0) / (bf16_peak·compute_fraction).
    memory_s = b·s·(2h·2 + 2·kv·kv_bytes)·d / (HBM·memory_fraction)
    (Q and O in bf16; K and V in the cache dtype).
    ``head_dim_efficiency`` {head_dim: factor in [0.5, 1]} multiplies compute_fraction (kernels are
    tuned per head size), interpolated log-linearly in head_dim and clamped at the ends; a factor
    ratio <= 2 per octave keeps time non-decreasing in head_dim. Empty = 1 everywhere.
    ``per_sequence_s``·b is added to the overhead (per-prompt scheduling/varlen bookkeeping).
    """

    compute_fraction: Fraction
    s0_tokens: NonNegative
    w0_batch_heads: NonNegative
    memory_fraction: Fraction
    overhead_s: NonNegative
    smooth_q: Exponent
    head_dim_efficiency: dict[int, HeadDimFactor] = Field(default_factory=dict)
    per_sequence_s: NonNegative = 0.0


class DecodeAttentionParams(_Frozen):
    """One decode step of attention over a KV cache of ``context_len`` tokens.

    KV bytes = b·c·kv·d·2·kv_bytes (K and V). memory_s = 2·d·kv_bytes·(c+c0)·(b·kv + w0) /
    (HBM·memory_fraction): reads ramp with context (c0, split-KV granularity) and with b·kv
    parallelism (w0). compute_s = 4·b·h·c·d / (bf16_peak·compute_fraction·f(head_dim)), f as in
    :class:`PrefillAttentionParams`. memory_fraction <= 1 keeps the step no faster than reading the
    KV once at peak bandwidth, except with ``warm_l2=True`` (benchmarks only): then the first
    ``l2_bytes`` of a step's KV stream ``l2_speedup``× faster (a small cache stays in L2 between
    back-to-back repeats; in serving each layer reads a different cache).
    """

    memory_fraction: Fraction
    c0_tokens: NonNegative
    w0_seq_heads: NonNegative
    compute_fraction: Fraction
    overhead_s: NonNegative
    smooth_q: Exponent
    head_dim_efficiency: dict[int, HeadDimFactor] = Field(default_factory=dict)
    l2_bytes: NonNegative = 0.0
    l2_speedup: Annotated[float, Field(ge=1.0, le=64.0)] = 1.0


class AlphaBeta(_Frozen):
    """One all-reduce implementation: alpha_s + 2(n−1)/n · message_bytes / bus_bytes_per_s."""

    alpha_s: NonNegative
    bus_bytes_per_s: Positive


class AllreduceParams(_Frozen):
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


class ElementwiseParams(_Frozen):
    """Memory-bound elementwise/norm kernels: overhead_s + bytes / (HBM·memory_fraction)."""

    memory_fraction: Fraction
    overhead_s: NonNegative


class FrameworkParams(_Frozen):
    """Per-step framework costs that kernel timings cannot show (scheduling, sampling, gaps)."""

    decode_step_overhead_s: NonNegative


class KernelTable(_Frozen):
    """What kernels achieve on one GPU and serving stack; peaks come from the GPU's datasheet."""

    schema_version: Literal[1]
    gpu: Annotated[str, Field(min_length=1)]
    calibrated: bool
    stack: Annotated[str, Field(min_length=1)]
    derived_from: str | None
    gemm: dict[GemmFlavour, GemmParams]
    prefill_attention: dict[KvFlavour, PrefillAttentionParams]
    decode_attention: dict[KvFlavour, DecodeAttentionParams]
    allreduce: AllreduceParams
    elementwise: ElementwiseParams
    framework: FrameworkParams
    sources: dict[str, str]


def packaged_table_ids() -> list[str]:
    """GPU ids with a kernel table shipped inside the package (``pdplan/perf/kernel_tables/``)."""
    return sorted(p.stem for p in TABLE_DIR.glob("*.yaml"))


def load_kernel_table(path_or_gpu_id: str | Path) -> KernelTable:
    """Load a kernel table from a YAML path or the packaged table of a GPU id (``h100-sxm``)."""
    from pdplan.specs.loading import load_spec_file

    candidate = Path(path_or_gpu_id)
    if candidate.suffix in {".yaml", ".yml"} or candidate.exists():
        return load_spec_file(KernelTable, candidate)
    gpu_id = str(path_or_gpu_id).lower()
    packaged = TABLE_DIR / f"{gpu_id}.yaml"
    if not packaged.is_file():
        raise UnknownNameError("kernel table", gpu_id, packaged_table_ids())
    return load_spec_file(KernelTable, packaged)


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def smooth_max(a: ArrayLike, b: ArrayLike, q: float) -> FloatArray:
    """(a**q + b**q)**(1/q) computed without overflow; >= max(a, b), non-decreasing in a and b."""
    a_, b_ = _f(a), _f(b)
    hi = np.maximum(a_, b_)
    lo = np.minimum(a_, b_)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # ratio**q and (1 + y)**(1/q) through exp/log: the same numbers, about twice as fast as np.power
        ratio_q = np.exp(q * np.log(np.where(hi > 0.0, lo / hi, 0.0)))
    result: FloatArray = hi * np.exp(np.log1p(ratio_q) / q)
    return result


def _fp8_peak(gpu: GpuPeaks) -> float:
    if gpu.fp8_flops_per_s is None:
        raise SpecError(
            f"GPU {gpu.name!r} has no FP8 tensor peak (fp8_flops_per_s is null); use dtype bf16",
            field="dtype",
        )
    return gpu.fp8_flops_per_s


def _stream_s(bytes_: FloatArray, bw: float, l2_bytes: float, l2_speedup: float,
              warm_l2: bool) -> FloatArray:
    """Seconds to read ``bytes_``: all at ``bw``, or the first ``l2_bytes`` from a warm L2."""
    if not warm_l2 or l2_bytes <= 0.0:
        return bytes_ / bw
    in_l2 = np.minimum(bytes_, l2_bytes)
    result: FloatArray = in_l2 / (bw * l2_speedup) + (bytes_ - in_l2) / bw
    return result


def head_dim_factor(head_dim: ArrayLike, knots: Mapping[int, float]) -> FloatArray:
    """Efficiency factor by head size: log-linear in head_dim through ``knots``, clamped; 1 if empty."""
    d = _f(head_dim)
    if not knots:
        return np.ones_like(d)
    keys = sorted(knots)
    result: FloatArray = np.exp(np.interp(np.log2(d), np.log2(keys), np.log([knots[k] for k in keys])))
    return result


def gemm_time_s(
    m: ArrayLike, n: ArrayLike, k: ArrayLike, flavour: GemmFlavour, gpu: GpuPeaks,
    table: KernelTable, *, warm_l2: bool = False,
) -> FloatArray:
    """Time (s) of one [m×k]·[k×n] GEMM; m = tokens. See :class:`GemmParams` for the formula.

    ``warm_l2=True`` reproduces back-to-back kernel benchmarks (small weights served from L2).
    """
    p = _params(table.gemm, flavour, "gemm", table.gpu)
    m_, n_, k_ = _f(m), _f(n), _f(k)
    peak = gpu.bf16_flops_per_s if flavour == "bf16" else _fp8_peak(gpu)
    in_bytes = 2.0 if flavour == "bf16" else 1.0
    bw = gpu.memory_bytes_per_s * p.memory_fraction
    compute_s = 2.0 * (m_ + p.m0_tokens) * (n_ + p.n0_elements) * (k_ + p.k0_elements) / (
        peak * p.peak_fraction
    )
    weights_s = _stream_s(k_ * n_ * in_bytes, bw, p.l2_bytes, p.l2_speedup, warm_l2)
    memory_s = (m_ * k_ * in_bytes + m_ * n_ * 2.0) / bw + weights_s
    quant_s = m_ * (p.quant_s_per_token + p.quant_bytes_per_element * k_ / bw)
    t = smooth_max(compute_s, memory_s, p.smooth_q)
    if p.k_latency_s > 0.0:
        t = smooth_max(t, p.k_latency_s * k_ / (k_ + p.k_sat_elements), p.smooth_q)
    return p.overhead_s + quant_s + t


def prefill_attention_time_s(
    batch: ArrayLike, seq_len: ArrayLike, heads: ArrayLike, kv_heads: ArrayLike,
    head_dim: ArrayLike, gpu: GpuPeaks, table: KernelTable, kv_flavour: KvFlavour = "bf16",
) -> FloatArray:
    """Time (s) of causal prefill attention: ``batch`` prompts of ``seq_len`` tokens, no prefix."""
    p = _params(table.prefill_attention, kv_flavour, "prefill_attention", table.gpu)
    b, s, h, kv, d = _f(batch), _f(seq_len), _f(heads), _f(kv_heads), _f(head_dim)
    kv_bytes = 2.0 if kv_flavour == "bf16" else 1.0
    eff = p.compute_fraction * head_dim_factor(d, p.head_dim_efficiency)
    compute_s = 2.0 * d * (s + 1.0) * (s + p.s0_tokens) * (b * h + p.w0_batch_heads) / (
        gpu.bf16_flops_per_s * eff
    )
    memory_s = b * s * d * (4.0 * h + 2.0 * kv * kv_bytes) / (
        gpu.memory_bytes_per_s * p.memory_fraction
    )
    return p.overhead_s + p.per_sequence_s * b + smooth_max(compute_s, memory_s, p.smooth_q)


def decode_attention_time_s(
    batch: ArrayLike, context_len: ArrayLike, heads: ArrayLike, kv_heads: ArrayLike,
    head_dim: ArrayLike, kv_dtype_bytes: float, gpu: GpuPeaks, table: KernelTable,
    *, warm_l2: bool = False,
) -> FloatArray:
    """Time (s) of one decode step of attention; kv_dtype_bytes 2 (bf16) or 1 (fp8)."""
    flavour: KvFlavour = "fp8" if kv_dtype_bytes <= 1.0 else "bf16"
    p = _params(table.decode_attention, flavour, "decode_attention", table.gpu)
    b, c, h, kv, d = _f(batch), _f(context_len), _f(heads), _f(kv_heads), _f(head_dim)
    kv_read = 2.0 * d * kv_dtype_bytes * (c + p.c0_tokens) * (b * kv + p.w0_seq_heads)
    memory_s = _stream_s(kv_read, gpu.memory_bytes_per_s * p.memory_fraction, p.l2_bytes,
                         p.l2_speedup, warm_l2)
    eff = p.compute_fraction * head_dim_factor(d, p.head_dim_efficiency)
    compute_s = 4.0 * b * h * c * d / (gpu.bf16_flops_per_s * eff)
    return p.overhead_s + smooth_max(compute_s, memory_s, p.smooth_q)


def _alpha_beta_s(size: FloatArray, n: FloatArray, fallback: AlphaBeta,
                  by_gpus: Mapping[int, AlphaBeta]) -> FloatArray:
    alpha = np.full_like(size * n, fallback.alpha_s)
    beta = np.full_like(alpha, fallback.bus_bytes_per_s)
    for count, ab in by_gpus.items():
        alpha = np.where(n == count, ab.alpha_s, alpha)
        beta = np.where(n == count, ab.bus_bytes_per_s, beta)
    result: FloatArray = alpha + 2.0 * (n - 1.0) / np.maximum(n, 1.0) * size / beta
    return result


def allreduce_time_s(
    message_bytes: ArrayLike, num_gpus: ArrayLike, gpu: GpuPeaks, table: KernelTable
) -> FloatArray:
    """Time (s) of one all-reduce of ``message_bytes`` per GPU over ``num_gpus`` (0 if 1 GPU).

    The faster of the custom all-reduce and NCCL where the table has them for this GPU count
    (engines switch between them by message size); otherwise the fallback α-β.
    """
    del gpu  # the fitted bus bandwidth already carries the link; kept for a uniform signature
    p = table.allreduce
    size, n = _f(message_bytes), _f(num_gpus)
    fallback = AlphaBeta(alpha_s=p.alpha_s, bus_bytes_per_s=p.bus_bytes_per_s)
    t = _alpha_beta_s(size, n, fallback, {})
    if p.custom or p.nccl:
        known = np.isin(n, [*p.custom, *p.nccl])
        best = np.minimum(_alpha_beta_s(size, n, fallback, p.custom),
                          _alpha_beta_s(size, n, fallback, p.nccl))
        t = np.where(known, best, t)
    result: FloatArray = np.where(n > 1.0, t, 0.0)
    return result


def elementwise_time_s(bytes_moved: ArrayLike, gpu: GpuPeaks, table: KernelTable) -> FloatArray:
    """Time (s) of a memory-bound kernel moving ``bytes_moved`` bytes (reads + writes)."""
    p = table.elementwise
    result: FloatArray = p.overhead_s + _f(bytes_moved) / (
        gpu.memory_bytes_per_s * p.memory_fraction
    )
    return result


def _params(group: Mapping[GemmFlavour, _T], key: GemmFlavour, what: str, gpu: str) -> _T:
    try:
        return group[key]
    except KeyError:
        raise SpecError(
            f"kernel table for {gpu!r} has no {what} entry for {key!r}; has {sorted(group)}",
            field=what,
        ) from None
