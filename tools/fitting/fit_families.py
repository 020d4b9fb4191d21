"""Per-family fits of one GPU's kernel table to AIConfigurator kernel measurements.

Each fitter takes the arrays read by :mod:`pdplan.calibrate.fit`, fits on a deterministic every-k-th
subsample (:func:`~pdplan.calibrate.fit.subsample_index`) with :func:`~pdplan.calibrate.fit.fit_parameters`
and judges the result on every row. GEMM and decode fits evaluate the cost functions with
``warm_l2=True``, because the benchmark repeats one kernel back to back (small operands stay in L2).

Discrete structure — a GEMM's M tile and L2 mode, an attention kernel's tiling — is not fitted by
least squares: the GEMM fitter tries each candidate and keeps the one with the lowest P90 on the
fit subsample; attention tilings are given by the caller (the kernel's documented tile sizes).
GEMM fits live in :mod:`fitting.fit_gemm`, all-reduce fits in :mod:`fitting.fit_allreduce`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pdplan.calibrate.fit import ErrorStats, FitResult, error_stats, fit_parameters, subsample_index
from pdplan.perf.kernels import decode_attention_time_s, prefill_attention_time_s
from pdplan.specs.kernel_attention import (
    DecodeAttentionParams,
    DecodeTiling,
    PrefillAttentionParams,
    PrefillTiling,
    Tiling,
)
from pdplan.specs.kernel_table import GpuPeaks, KernelTable, KvFlavour
from pdplan.types import FloatArray, IntArray

F_SCALE = 0.05
"""Soft-L1 knee (≈ a 5% log residual): rows beyond it count linearly, so outliers (kernel-choice
jumps) pull less and the fit tracks the median and P90 of |error| rather than the mean square."""

DEFAULT_SM_COUNT = 132
"""SM count of fit stub tables when the GPU object has none (H100 SXM5; only tiled entries use it)."""


def stub_table(gpu_id: str, sm_count: int | None = DEFAULT_SM_COUNT, **groups: object) -> KernelTable:
    """A table holding only the groups being fitted (the rest are inert placeholders)."""
    base: dict[str, object] = {
        "schema_version": 1,
        "gpu": gpu_id,
        "calibrated": False,
        "stack": "fit",
        "derived_from": None,
        "sm_count": sm_count,
        "gemm": {},
        "prefill_attention": {},
        "decode_attention": {},
        "allreduce": {"alpha_s": 0.0, "bus_bytes_per_s": 1.0},
        "elementwise": {"memory_fraction": 1.0, "overhead_s": 0.0},
        "framework": {"decode_step_overhead_s": 0.0},
        "sources": {},
    }
    base.update(groups)
    return KernelTable.model_validate(base)


def _knot_names(head_dims: FloatArray) -> dict[str, int]:
    return {f"hd{int(d)}": int(d) for d in np.unique(head_dims)}


def _assemble(
    p: Mapping[str, float], knots: Mapping[str, int], rate_keys: tuple[str, ...], tiling: Tiling | None
) -> dict[str, object]:
    """Flat fitted numbers → one params entry: head-dim knots folded into {head_dim: factor <= 1}
    (the rates the factor divides, ``rate_keys``, rescaled by the best knot so every prediction is
    unchanged), tiling numbers moved into ``tiling``."""
    tiled_keys = set(type(tiling).model_fields) if tiling is not None else set()
    q = dict(p)
    factors = _monotone_knots({d: p[name] for name, d in knots.items()})
    if knots:
        top = max(factors.values())
        q.update({k: p[k] * top for k in rate_keys if k in p})
    out: dict[str, object] = {k: v for k, v in q.items() if k not in knots and k not in tiled_keys}
    if knots:
        out["head_dim_efficiency"] = {d: min(1.0, max(0.5, f / top)) for d, f in factors.items()}
    if tiling is not None:
        out["tiling"] = tiling.model_copy(update={k: q[k] for k in tiled_keys if k in q})
    return out


def _monotone_knots(factors: Mapping[int, float]) -> dict[int, float]:
    """Cap each knot at f(d_prev)·d/d_prev (ascending head_dim): time ∝ d/f(d) then never falls
    with head_dim (log-slope of f <= 1 between knots, so also along the log-linear interpolation)."""
    out: dict[int, float] = {}
    prev: tuple[int, float] | None = None
    for d in sorted(factors):
        f = factors[d] if prev is None else min(factors[d], prev[1] * d / prev[0])
        out[d] = f
        prev = (d, f)
    return out


PREFILL_START = {
    "compute_fraction": 0.6,
    "s0_tokens": 64.0,
    "w0_batch_heads": 64.0,
    "memory_fraction": 0.5,
    "overhead_s": 8e-6,
    "smooth_q": 2.0,
    "per_sequence_s": 1e-8,
}
# compute_fraction capped at 0.85: FlashAttention-3 reaches ~75% of H100 peak (HARDWARE_FACTS §3)
PREFILL_BOUNDS = {
    "compute_fraction": (0.05, 0.85),
    "s0_tokens": (1e-3, 8192.0),
    "w0_batch_heads": (1e-3, 8192.0),
    "memory_fraction": (0.02, 1.0),
    "overhead_s": (1e-7, 1e-3),
    "smooth_q": (1.0, 16.0),
    "per_sequence_s": (1e-12, 1e-5),
}
PREFILL_TILED = {
    "kv_reread": ((1.0, 64.0), 2.0),
    "cta_overhead_s": ((1e-9, 1e-4), 1e-6),
    "span_exposed": ((1e-3, 1.0), 0.5),
}
"""Tiled prefill: s0 and w0 drop out (tile padding and the CTA terms replace the ramps); these join."""
DECODE_START = {
    "memory_fraction": 0.7,
    "c0_tokens": 64.0,
    "w0_seq_heads": 8.0,
    "compute_fraction": 0.3,
    "overhead_s": 8e-6,
    "smooth_q": 2.0,
    "l2_bytes": 4e6,
    "l2_speedup": 2.0,
}
DECODE_BOUNDS = {
    "memory_fraction": (0.05, 1.0),
    "c0_tokens": (1e-3, 65536.0),
    "w0_seq_heads": (1e-3, 4096.0),
    "compute_fraction": (0.01, 1.0),
    "overhead_s": (1e-7, 1e-3),
    "smooth_q": (1.0, 16.0),
    "l2_bytes": (1e3, 5e8),
    "l2_speedup": (1.0, 16.0),
}
DECODE_TILED = {
    "cta_overhead_s": ((1e-9, 1e-4), 2e-6),
    "cta_bytes_per_s": ((1e8, 1e12), 2e10),
    "split_combine_s": ((1e-9, 1e-4), 3e-6),
}
"""Tiled decode: c0 and w0 drop out, the CTA overhead, one CTA's stream rate and the combine join."""
KNOT_BOUNDS = (0.5, 1.0)


def _start_bounds(
    start: Mapping[str, float],
    bounds: Mapping[str, tuple[float, float]],
    tiled: Mapping[str, tuple[tuple[float, float], float]],
    dropped: tuple[str, ...],
    knots: Mapping[str, int],
    tiling: Tiling | None,
) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    s, b = dict(start), dict(bounds)
    if tiling is not None:
        for key in dropped:
            s.pop(key)
            b.pop(key)
        s.update({k: v[1] for k, v in tiled.items()})
        b.update({k: v[0] for k, v in tiled.items()})
    return {**s, **dict.fromkeys(knots, 0.9)}, {**b, **dict.fromkeys(knots, KNOT_BOUNDS)}


ALT_STARTS = ({"span_exposed": 0.1, "smooth_q": 4.0}, {"span_exposed": 0.9, "smooth_q": 1.2})
"""Tiled fits also start from these (ceil steps and minima make the landscape rough); the start
whose fit has the lowest P90 on the fit subsample wins."""


def _best_of_starts(
    predict: Any,
    start: Mapping[str, float],
    bounds: Mapping[str, tuple[float, float]],
    measured: FloatArray,
    tiled: bool,
) -> FitResult:
    alts = [{k: v for k, v in alt.items() if k in start} for alt in ALT_STARTS] if tiled else []
    fits = [fit_parameters(predict, {**start, **alt}, bounds, measured, f_scale=F_SCALE) for alt in ({}, *alts)]
    return min(fits, key=lambda f: f.stats.p90_abs_pct)


def _fixed_zeros(tiling: Tiling | None, keys: tuple[str, ...]) -> dict[str, float]:
    return dict.fromkeys(keys, 0.0) if tiling is not None else {}


def fit_prefill(
    data: Mapping[str, FloatArray],
    kv: KvFlavour,
    gpu: GpuPeaks,
    gpu_id: str,
    tiling: PrefillTiling | None = None,
) -> tuple[PrefillAttentionParams, ErrorStats]:
    """Fit prefill (context) attention for one KV dtype, with a compute factor per head size."""
    b, s, h, kvh, d = (
        np.asarray(data[c]) for c in ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim")
    )
    t = np.asarray(data["latency_ms"]) * 1e-3
    idx = subsample_index(t.size)
    knots = _knot_names(d)
    zeros = _fixed_zeros(tiling, ("s0_tokens", "w0_batch_heads"))
    sms = getattr(gpu, "sm_count", None) or DEFAULT_SM_COUNT

    def entry(p: Mapping[str, float]) -> dict[str, object]:
        return {**_assemble(p, knots, ("compute_fraction",), tiling), **zeros}

    def predict(p: dict[str, float], sel: IntArray = idx) -> FloatArray:
        table = stub_table(gpu_id, sms, prefill_attention={kv: entry(p)})
        return prefill_attention_time_s(b[sel], s[sel], h[sel], kvh[sel], d[sel], gpu, table, kv)

    start, bounds = _start_bounds(
        PREFILL_START, PREFILL_BOUNDS, PREFILL_TILED, ("s0_tokens", "w0_batch_heads"), knots, tiling
    )
    fit = _best_of_starts(predict, start, bounds, t[idx], tiling is not None)
    params = PrefillAttentionParams.model_validate(entry(fit.params))
    return params, error_stats(predict(fit.params, np.arange(t.size)), t)


def decode_context_len(data: Mapping[str, FloatArray]) -> FloatArray:
    """KV length of a generation row: ``isl + step`` (AIConfigurator's isl=1, step = tokens so far)."""
    return np.asarray(data["isl"]) + np.asarray(data["step"])


def fit_decode(
    data: Mapping[str, FloatArray],
    kv: KvFlavour,
    gpu: GpuPeaks,
    gpu_id: str,
    tiling: DecodeTiling | None = None,
) -> tuple[DecodeAttentionParams, ErrorStats]:
    """Fit decode (generation) attention for one KV dtype (warm-L2 term on, as benchmarked).

    Tiled fits use the LRU warm-L2 mode (a step re-reads its whole cache; the untiled model keeps
    the "first bytes" mode of the earlier tables)."""
    b, h, kvh, d = (np.asarray(data[c]) for c in ("batch_size", "num_heads", "num_key_value_heads", "head_dim"))
    c = decode_context_len(data)
    t = np.asarray(data["latency_ms"]) * 1e-3
    idx = subsample_index(t.size)
    kv_bytes = 2.0 if kv == "bf16" else 1.0
    knots = _knot_names(d)
    fixed: dict[str, object] = {**_fixed_zeros(tiling, ("c0_tokens", "w0_seq_heads"))}
    rates: tuple[str, ...] = ("compute_fraction",)
    if tiling is not None:
        fixed["l2_mode"] = "lru"
        rates = ("compute_fraction", "memory_fraction", "cta_bytes_per_s")
    sms = getattr(gpu, "sm_count", None) or DEFAULT_SM_COUNT

    def entry(p: Mapping[str, float]) -> dict[str, object]:
        return {**_assemble(p, knots, rates, tiling), **fixed}

    def predict(p: dict[str, float], sel: IntArray = idx) -> FloatArray:
        table = stub_table(gpu_id, sms, decode_attention={kv: entry(p)})
        return decode_attention_time_s(b[sel], c[sel], h[sel], kvh[sel], d[sel], kv_bytes, gpu, table, warm_l2=True)

    start, bounds = _start_bounds(
        DECODE_START, DECODE_BOUNDS, DECODE_TILED, ("c0_tokens", "w0_seq_heads"), knots, tiling
    )
    fit = _best_of_starts(predict, start, bounds, t[idx], tiling is not None)
    params = DecodeAttentionParams.model_validate(entry(fit.params))
    return params, error_stats(predict(fit.params, np.arange(t.size)), t)
