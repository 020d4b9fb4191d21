"""Primitive kernel cost functions on the calibrated kernel table (:mod:`pdplan.specs.kernel_table`).

Every cost function is vectorised (numpy broadcasting) and has the same shape::

    time_s = overhead_s + smooth_max(compute_s, memory_s; q)
    smooth_max(a, b; q) = (a**q + b**q)**(1/q)        # q >= 1; q -> inf is max(a, b)

smooth_max is never below max(a, b) and is non-decreasing in a and b, so a larger problem is never
faster and more FLOP/s or bytes/s is never slower. Attention entries with a ``tiling`` replace the
smooth compute term by the work of the kernel's CTAs (thread blocks): tile-padded FLOPs, a fixed cost
per CTA and the critical path of the longest CTA (:mod:`pdplan.perf.tiling`); ceil() steps keep
every term non-decreasing in the problem size. Units: seconds, FLOP/s, bytes, bytes/s, elements.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import numpy as np

from pdplan.errors import SpecError
from pdplan.perf.tiling import decode_cta_s, prefill_cta_s, sm_count
from pdplan.specs.kernel_fields import L2Mode
from pdplan.specs.kernel_table import (
    AllreduceParams,
    AlphaBeta,
    GemmFlavour,
    GemmParams,
    GpuPeaks,
    KernelTable,
    KvFlavour,
)
from pdplan.types import ArrayLike, FloatArray

__all__ = [
    "allreduce_time_s",
    "decode_attention_time_s",
    "elementwise_time_s",
    "gemm_time_s",
    "head_dim_factor",
    "prefill_attention_time_s",
    "smooth_max",
    "smooth_max_of",
    "stream_s",
]

_T = TypeVar("_T")


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


POW2_Q_STEPS = {2.0: 1, 4.0: 2, 8.0: 3, 16.0: 4}
"""Exponents the fitter ships besides 1 (q = 2**j): powers by j squarings, the root by j square roots."""


def smooth_max(a: ArrayLike, b: ArrayLike, q: float) -> FloatArray:
    """(a**q + b**q)**(1/q) computed without overflow; >= max(a, b), non-decreasing in a and b."""
    return smooth_max_of((a, b), q)


def smooth_max_of(terms: tuple[ArrayLike, ...], q: float) -> FloatArray:
    """(Σ x_i**q)**(1/q) of non-negative times (s); equal to nested :func:`smooth_max` calls.

    q = 1 is the sum. q = 2 or 4 (what the fitter ships most) sums squares (of squares) and takes square
    roots: no overflow or underflow for any time between 1e-70 s and 1e70 s, each step correctly rounded,
    so still monotone, and several times faster than exp/log. Other q: hi·(1 + Σ r_i**q)**(1/q) with
    r_i = x_i/hi <= 1 (no overflow at any size), by squarings for q = 8, 16 and exp/log otherwise.
    """
    xs = [_f(x) for x in terms]
    if q == 1.0:
        total: FloatArray = sum(xs[1:], xs[0])
        return total
    steps = POW2_Q_STEPS.get(q)
    if steps is not None and steps <= 2:
        acc = _power_sum(xs, steps)
        for _ in range(steps):
            np.sqrt(acc, out=acc)
        return acc
    hi = xs[0]
    for x in xs[1:]:
        hi = np.maximum(hi, x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratios = [np.where(hi > 0.0, x / hi, 0.0) for x in xs]
        if steps is not None:  # q = 8, 16: r**q by squarings, the root by square roots
            for _ in range(steps):
                ratios = [r * r for r in ratios]
            root = sum(ratios[1:], ratios[0])  # includes hi's own ratio, 1
            for _ in range(steps):
                root = np.sqrt(root)
        else:
            s_q = sum((np.exp(q * np.log(r)) for r in ratios[1:]), np.exp(q * np.log(ratios[0])))
            root = np.exp(np.log(s_q) / q)
    result: FloatArray = np.where(hi > 0.0, hi * root, 0.0)
    return result


def _power_sum(xs: list[FloatArray], steps: int) -> FloatArray:
    """Σ x**(2**steps) into one fresh array (in place: each 100k-element pass allocates nothing new)."""
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    acc = np.zeros(shape)
    for x in xs:
        y = x * x
        if steps == 2:
            y = y * y if np.ndim(y) == 0 else np.multiply(y, y, out=y)
        np.add(acc, y, out=acc)
    return acc


def _fp8_peak(gpu: GpuPeaks) -> float:
    if gpu.fp8_flops_per_s is None:
        raise SpecError(
            f"GPU {gpu.name!r} has no FP8 tensor peak (fp8_flops_per_s is null); use dtype bf16",
            field="dtype",
        )
    return gpu.fp8_flops_per_s


def stream_s(
    bytes_: FloatArray, bw: float, l2_bytes: float, l2_speedup: float, warm_l2: bool, mode: L2Mode = "first"
) -> FloatArray:
    """Seconds to read ``bytes_`` at ``bw``, part of it from a warm L2 at ``l2_speedup``× ``bw``.

    "first": the first ``l2_bytes`` hit. "lru": hit fraction h = clip(2 − bytes/l2_bytes, 0, 1), so
    a working set up to l2_bytes hits whole and one of 2·l2_bytes or more misses whole (cyclic reuse
    of a set larger than an LRU cache); time = bytes/bw·(1 − h·(1 − 1/l2_speedup)) stays
    non-decreasing in bytes (its slope is at least 1/bw·(1 − 2(1 − 1/l2_speedup) + 2(1 − 1/l2_speedup))).
    """
    if not warm_l2 or l2_bytes <= 0.0:
        return bytes_ / bw
    if mode == "lru":
        hit = np.clip(2.0 - bytes_ / l2_bytes, 0.0, 1.0)
        lru: FloatArray = bytes_ / bw * (1.0 - hit * (1.0 - 1.0 / l2_speedup))
        return lru
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
    m: ArrayLike,
    n: ArrayLike,
    k: ArrayLike,
    flavour: GemmFlavour,
    gpu: GpuPeaks,
    table: KernelTable,
    *,
    warm_l2: bool = False,
) -> FloatArray:
    """Time (s) of one [m×k]·[k×n] GEMM; m = tokens. See :class:`GemmParams` for the formula.

    ``warm_l2=True`` reproduces back-to-back kernel benchmarks (small weights served from L2). An entry
    with ``small_m`` prices m <= ``small_m_tokens`` by its small-M kernel, capped by the general entry at
    the first row above the threshold (non-decreasing in m).
    """
    p = _params(table.gemm, flavour, "gemm", table.gpu)
    m_, n_, k_ = _f(m), _f(n), _f(k)
    peak = gpu.bf16_flops_per_s if flavour == "bf16" else _fp8_peak(gpu)
    in_bytes = 2.0 if flavour == "bf16" else 1.0
    if p.small_m is None:
        return _gemm_entry_s(p, m_, n_, k_, peak, in_bytes, gpu.memory_bytes_per_s, warm_l2)
    s = float(p.small_m_tokens)
    if m_.ndim == 0 and float(m_) > s:  # one large-M call (prefill): the general kernel alone
        return _gemm_entry_s(p, m_, n_, k_, peak, in_bytes, gpu.memory_bytes_per_s, warm_l2)
    hbm = gpu.memory_bytes_per_s
    cap = _gemm_entry_s(p, _f(s + 1.0), n_, k_, peak, in_bytes, hbm, warm_l2)
    if m_.ndim == 0:
        small: FloatArray = np.minimum(_gemm_entry_s(p.small_m, m_, n_, k_, peak, in_bytes, hbm, warm_l2), cap)
        return small
    general = _gemm_entry_s(p, m_, n_, k_, peak, in_bytes, hbm, warm_l2)
    low = m_ <= s
    if n_.ndim == 0 and k_.ndim == 0:  # one weight shape (the common call): price only the small rows twice
        out = np.array(general, dtype=np.float64)
        out[low] = np.minimum(_gemm_entry_s(p.small_m, m_[low], n_, k_, peak, in_bytes, hbm, warm_l2), cap)
        return out
    result: FloatArray = np.where(
        low, np.minimum(_gemm_entry_s(p.small_m, m_, n_, k_, peak, in_bytes, hbm, warm_l2), cap), general
    )
    return result


def _gemm_entry_s(
    p: GemmParams,
    m_: FloatArray,
    n_: FloatArray,
    k_: FloatArray,
    peak: float,
    in_bytes: float,
    hbm_bytes_per_s: float,
    warm_l2: bool,
) -> FloatArray:
    """One entry's GEMM time (s): overhead + smooth_max(compute, memory[, k loop]) + fp8 quantisation."""
    bw = hbm_bytes_per_s * p.memory_fraction
    m_c = m_
    if p.m_tile > 0:  # tile-padded rows above one M tile
        m_c = np.where(m_ > p.m_tile, np.ceil(m_ / p.m_tile) * p.m_tile, m_)
    # grouped so that with scalar n, k (one weight shape) every m-array term is one multiply-add
    compute_s = (m_c + p.m0_tokens) * ((n_ + p.n0_elements) * (k_ + p.k0_elements) * (2.0 / (peak * p.peak_fraction)))
    weights_s = stream_s(k_ * n_ * in_bytes, bw, p.l2_bytes, p.l2_speedup, warm_l2, p.l2_mode)
    memory_s = m_ * ((k_ * in_bytes + n_ * 2.0) / bw) + weights_s
    if p.k_latency_s > 0.0:  # the same as smooth_max(smooth_max(compute, memory), k-loop), in one pass
        t = smooth_max_of((compute_s, memory_s, p.k_latency_s * k_ / (k_ + p.k_sat_elements)), p.smooth_q)
    else:
        t = smooth_max(compute_s, memory_s, p.smooth_q)
    if p.quant_s_per_token > 0.0 or p.quant_bytes_per_element > 0.0:
        t = t + m_ * (p.quant_s_per_token + p.quant_bytes_per_element * k_ / bw)
    result: FloatArray = p.overhead_s + t
    return result


def prefill_attention_time_s(
    batch: ArrayLike,
    seq_len: ArrayLike,
    heads: ArrayLike,
    kv_heads: ArrayLike,
    head_dim: ArrayLike,
    gpu: GpuPeaks,
    table: KernelTable,
    kv_flavour: KvFlavour = "bf16",
) -> FloatArray:
    """Time (s) of causal prefill attention: ``batch`` prompts of ``seq_len`` tokens, no prefix.

    overhead + per_sequence·b + smooth_max(compute, memory; q), compute = F/(peak·η) untiled or the
    CTA work of :func:`pdplan.perf.tiling.prefill_cta_s` tiled, times the ramps (s+s0)/s and
    (b·h+w0)/(b·h); see :class:`PrefillAttentionParams`.
    """
    p = _params(table.prefill_attention, kv_flavour, "prefill_attention", table.gpu)
    b, s, h, kv, d = _f(batch), _f(seq_len), _f(heads), _f(kv_heads), _f(head_dim)
    kv_bytes = 2.0 if kv_flavour == "bf16" else 1.0
    rate = gpu.bf16_flops_per_s * p.compute_fraction * head_dim_factor(d, p.head_dim_efficiency)
    if p.tiling is None:
        compute_s = 2.0 * d * (s + 1.0) * (s + p.s0_tokens) * (b * h + p.w0_batch_heads) / rate
    else:
        compute_s = prefill_cta_s(b, s, h, kv, d, rate, p.tiling, sm_count(gpu, table))
        if p.s0_tokens > 0.0 or p.w0_batch_heads > 0.0:
            compute_s = (
                compute_s * (s + p.s0_tokens) / np.maximum(s, 1.0) * (b * h + p.w0_batch_heads) / np.maximum(b * h, 1.0)
            )
    memory_s = b * s * d * (4.0 * h + p.kv_reread * 2.0 * kv * kv_bytes) / (gpu.memory_bytes_per_s * p.memory_fraction)
    return p.overhead_s + p.per_sequence_s * b + smooth_max(compute_s, memory_s, p.smooth_q)


def decode_attention_time_s(
    batch: ArrayLike,
    context_len: ArrayLike,
    heads: ArrayLike,
    kv_heads: ArrayLike,
    head_dim: ArrayLike,
    kv_dtype_bytes: float,
    gpu: GpuPeaks,
    table: KernelTable,
    *,
    warm_l2: bool = False,
) -> FloatArray:
    """Time (s) of one decode step of attention; kv_dtype_bytes 2 (bf16) or 1 (fp8).

    overhead + smooth_max(compute, memory; q); tiled, compute also carries the CTA overheads, the
    critical path and the split-KV combine of :func:`pdplan.perf.tiling.decode_cta_s`.
    """
    flavour: KvFlavour = "fp8" if kv_dtype_bytes <= 1.0 else "bf16"
    p = _params(table.decode_attention, flavour, "decode_attention", table.gpu)
    b, c, h, kv, d = _f(batch), _f(context_len), _f(heads), _f(kv_heads), _f(head_dim)
    f_d = head_dim_factor(d, p.head_dim_efficiency)
    kv_read = 2.0 * d * kv_dtype_bytes * (c + p.c0_tokens) * (b * kv + p.w0_seq_heads)
    memory_s = stream_s(
        kv_read, gpu.memory_bytes_per_s * p.memory_fraction, p.l2_bytes, p.l2_speedup, warm_l2, p.l2_mode
    )
    compute_s = 4.0 * b * h * c * d / (gpu.bf16_flops_per_s * p.compute_fraction * f_d)
    if p.tiling is not None:  # the head-size factor slows the whole tiled kernel, streams too
        memory_s = memory_s / f_d
        compute_s = compute_s + decode_cta_s(b, c, h, kv, d / f_d, kv_dtype_bytes, p.tiling, sm_count(gpu, table))
    return p.overhead_s + smooth_max(compute_s, memory_s, p.smooth_q)


def _alpha_beta_s(size: FloatArray, n: FloatArray, fallback: AlphaBeta, by_gpus: Mapping[int, AlphaBeta]) -> FloatArray:
    alpha = np.full_like(size * n, fallback.alpha_s)
    beta = np.full_like(alpha, fallback.bus_bytes_per_s)
    for count, ab in by_gpus.items():
        alpha = np.where(n == count, ab.alpha_s, alpha)
        beta = np.where(n == count, ab.bus_bytes_per_s, beta)
    result: FloatArray = alpha + 2.0 * (n - 1.0) / np.maximum(n, 1.0) * size / beta
    return result


def allreduce_time_s(message_bytes: ArrayLike, num_gpus: ArrayLike, gpu: GpuPeaks, table: KernelTable) -> FloatArray:
    """Time (s) of one all-reduce of ``message_bytes`` per GPU over ``num_gpus`` (0 if 1 GPU).

    The faster of the custom all-reduce and NCCL where the table has them for this GPU count
    (engines switch between them by message size); otherwise the fallback α-β.
    """
    del gpu  # the fitted bus bandwidth already carries the link; kept for a uniform signature
    p = table.allreduce
    size, n = _f(message_bytes), _f(num_gpus)
    fallback = AlphaBeta(alpha_s=p.alpha_s, bus_bytes_per_s=p.bus_bytes_per_s)
    if n.ndim == 0:  # one GPU count (the common call): scalar α, β instead of per-element lookups
        return _allreduce_one_count_s(size, float(n), fallback, p)
    t = _alpha_beta_s(size, n, fallback, {})
    if p.custom or p.nccl:
        known = np.isin(n, [*p.custom, *p.nccl])
        best = np.minimum(_alpha_beta_s(size, n, fallback, p.custom), _alpha_beta_s(size, n, fallback, p.nccl))
        t = np.where(known, best, t)
    result: FloatArray = np.where(n > 1.0, t, 0.0)
    return result


def _allreduce_one_count_s(size: FloatArray, n: float, fallback: AlphaBeta, p: AllreduceParams) -> FloatArray:
    """:func:`allreduce_time_s` for a single GPU count ``n`` (same numbers, scalar table lookups)."""
    if n <= 1.0:
        return np.zeros_like(size)
    count = int(n) if float(n).is_integer() else -1
    ring = 2.0 * (n - 1.0) / n
    if count not in p.custom and count not in p.nccl:
        plain: FloatArray = fallback.alpha_s + size * (ring / fallback.bus_bytes_per_s)
        return plain
    times = [
        ab.alpha_s + size * (ring / ab.bus_bytes_per_s)
        for ab in (p.custom.get(count, fallback), p.nccl.get(count, fallback))
    ]
    result: FloatArray = np.minimum(times[0], times[1])
    return result


def elementwise_time_s(bytes_moved: ArrayLike, gpu: GpuPeaks, table: KernelTable) -> FloatArray:
    """Time (s) of a memory-bound kernel moving ``bytes_moved`` bytes (reads + writes)."""
    p = table.elementwise
    result: FloatArray = p.overhead_s + _f(bytes_moved) / (gpu.memory_bytes_per_s * p.memory_fraction)
    return result


def _params(group: Mapping[GemmFlavour, _T], key: GemmFlavour, what: str, gpu: str) -> _T:
    try:
        return group[key]
    except KeyError:
        raise SpecError(
            f"kernel table for {gpu!r} has no {what} entry for {key!r}; has {sorted(group)}",
            field=what,
        ) from None
