"""Per-family fits of one GPU's kernel table to AIConfigurator kernel measurements.

Each fitter takes the arrays read by :mod:`pdplan.perf.fit`, fits on a deterministic every-k-th
subsample (:func:`~pdplan.perf.fit.subsample_index`) with :func:`~pdplan.perf.fit.fit_parameters`
and judges the result on every row. GEMM and decode fits evaluate the cost functions with
``warm_l2=True``, because the benchmark repeats one kernel back to back (small operands stay in L2).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pdplan.perf.fit import (
    ErrorStats,
    IntArray,
    error_stats,
    fit_parameters,
    subsample_index,
)
from pdplan.perf.kernels import (
    AllreduceParams,
    AlphaBeta,
    DecodeAttentionParams,
    FloatArray,
    GemmFlavour,
    GemmParams,
    GpuPeaks,
    KernelTable,
    KvFlavour,
    PrefillAttentionParams,
    allreduce_time_s,
    decode_attention_time_s,
    gemm_time_s,
    prefill_attention_time_s,
)

F_SCALE = 0.05
"""Soft-L1 knee (≈ a 5% log residual): rows beyond it count linearly, so outliers (kernel-choice
jumps) pull less and the fit tracks the median and P90 of |error| rather than the mean square."""


def _stub_table(gpu_id: str, **groups: object) -> KernelTable:
    """A table holding only the groups being fitted (the rest are inert placeholders)."""
    base: dict[str, object] = {
        "schema_version": 1, "gpu": gpu_id, "calibrated": False, "stack": "fit", "derived_from": None,
        "gemm": {}, "prefill_attention": {}, "decode_attention": {},
        "allreduce": {"alpha_s": 0.0, "bus_bytes_per_s": 1.0},
        "elementwise": {"memory_fraction": 1.0, "overhead_s": 0.0},
        "framework": {"decode_step_overhead_s": 0.0}, "sources": {},
    }
    base.update(groups)
    return KernelTable.model_validate(base)


def _knot_names(head_dims: FloatArray) -> dict[str, int]:
    return {f"hd{int(d)}": int(d) for d in np.unique(head_dims)}


def _split_knots(p: Mapping[str, float], knots: Mapping[str, int],
                 fraction_key: str) -> dict[str, object]:
    """Fold fitted head-dim knots into {head_dim: factor <= 1} and rescale the compute fraction."""
    out: dict[str, object] = {k: v for k, v in p.items() if k not in knots}
    if knots:
        top = max(p[name] for name in knots)
        out[fraction_key] = p[fraction_key] * top
        out["head_dim_efficiency"] = {d: min(1.0, max(0.5, p[name] / top))
                                      for name, d in knots.items()}
    return out


GEMM_START = {"peak_fraction": 0.8, "m0_tokens": 32.0, "n0_elements": 64.0, "k0_elements": 64.0,
              "memory_fraction": 0.8, "overhead_s": 3e-6, "smooth_q": 2.0, "l2_bytes": 4e6,
              "l2_speedup": 2.0, "k_latency_s": 3e-6, "k_sat_elements": 2048.0}
GEMM_BOUNDS = {"peak_fraction": (0.05, 1.0), "m0_tokens": (1e-3, 4096.0),
               "n0_elements": (1e-3, 16384.0), "k0_elements": (1e-3, 16384.0),
               "memory_fraction": (0.05, 1.0), "overhead_s": (1e-7, 1e-4), "smooth_q": (1.0, 16.0),
               "l2_bytes": (1e3, 5e8), "l2_speedup": (1.0, 16.0), "k_latency_s": (1e-9, 1e-3),
               "k_sat_elements": (1.0, 1e6)}


def fit_gemm(
    data: Mapping[str, FloatArray], flavour: GemmFlavour, gpu: GpuPeaks, gpu_id: str
) -> tuple[GemmParams, ErrorStats]:
    """Fit one GEMM flavour on a deterministic subsample; judge it on every row."""
    m, n, k, t = (np.asarray(data[c]) for c in ("m", "n", "k", "latency_ms"))
    t = t * 1e-3
    idx = subsample_index(t.size)
    start, bounds = dict(GEMM_START), dict(GEMM_BOUNDS)
    if flavour == "fp8":  # per-token activation quantisation pass, fitted
        start.update(quant_bytes_per_element=3.0, quant_s_per_token=3e-9)
        bounds.update(quant_bytes_per_element=(0.1, 64.0), quant_s_per_token=(1e-13, 1e-7))

    def predict(p: dict[str, float], sel: IntArray = idx) -> FloatArray:
        table = _stub_table(gpu_id, gemm={flavour: p})
        return gemm_time_s(m[sel], n[sel], k[sel], flavour, gpu, table, warm_l2=True)

    fit = fit_parameters(predict, start, bounds, t[idx], f_scale=F_SCALE)
    params = GemmParams(**fit.params)
    return params, error_stats(predict(fit.params, np.arange(t.size)), t)


PREFILL_START = {"compute_fraction": 0.6, "s0_tokens": 64.0, "w0_batch_heads": 64.0,
                 "memory_fraction": 0.5, "overhead_s": 8e-6, "smooth_q": 2.0,
                 "per_sequence_s": 1e-8}
# compute_fraction capped at 0.85: FlashAttention-3 reaches ~75% of H100 peak (HARDWARE_FACTS §3)
PREFILL_BOUNDS = {"compute_fraction": (0.05, 0.85), "s0_tokens": (1e-3, 8192.0),
                  "w0_batch_heads": (1e-3, 8192.0), "memory_fraction": (0.02, 1.0),
                  "overhead_s": (1e-7, 1e-3), "smooth_q": (1.0, 16.0),
                  "per_sequence_s": (1e-12, 1e-5)}
DECODE_START = {"memory_fraction": 0.7, "c0_tokens": 64.0, "w0_seq_heads": 8.0,
                "compute_fraction": 0.3, "overhead_s": 8e-6, "smooth_q": 2.0, "l2_bytes": 4e6,
                "l2_speedup": 2.0}
DECODE_BOUNDS = {"memory_fraction": (0.05, 1.0), "c0_tokens": (1e-3, 65536.0),
                 "w0_seq_heads": (1e-3, 4096.0), "compute_fraction": (0.01, 1.0),
                 "overhead_s": (1e-7, 1e-3), "smooth_q": (1.0, 16.0), "l2_bytes": (1e3, 5e8),
                 "l2_speedup": (1.0, 16.0)}
KNOT_BOUNDS = (0.5, 1.0)


def fit_prefill(
    data: Mapping[str, FloatArray], kv: KvFlavour, gpu: GpuPeaks, gpu_id: str
) -> tuple[PrefillAttentionParams, ErrorStats]:
    """Fit prefill (context) attention for one KV dtype, with a compute factor per head size."""
    b, s, h, kvh, d = (np.asarray(data[c]) for c in ("batch_size", "isl", "num_heads",
                                                      "num_key_value_heads", "head_dim"))
    t = np.asarray(data["latency_ms"]) * 1e-3
    idx = subsample_index(t.size)
    knots = _knot_names(d)

    def predict(p: dict[str, float], sel: IntArray = idx) -> FloatArray:
        table = _stub_table(gpu_id, prefill_attention={kv: _split_knots(p, knots,
                                                                         "compute_fraction")})
        return prefill_attention_time_s(b[sel], s[sel], h[sel], kvh[sel], d[sel], gpu, table, kv)

    start = {**PREFILL_START, **dict.fromkeys(knots, 0.9)}
    bounds = {**PREFILL_BOUNDS, **dict.fromkeys(knots, KNOT_BOUNDS)}
    fit = fit_parameters(predict, start, bounds, t[idx], f_scale=F_SCALE)
    params = PrefillAttentionParams.model_validate(_split_knots(fit.params, knots,
                                                                "compute_fraction"))
    return params, error_stats(predict(fit.params, np.arange(t.size)), t)


def decode_context_len(data: Mapping[str, FloatArray]) -> FloatArray:
    """KV length of a generation row: ``isl + step`` (AIConfigurator's isl=1, step = tokens so far)."""
    return np.asarray(data["isl"]) + np.asarray(data["step"])


def fit_decode(
    data: Mapping[str, FloatArray], kv: KvFlavour, gpu: GpuPeaks, gpu_id: str
) -> tuple[DecodeAttentionParams, ErrorStats]:
    """Fit decode (generation) attention for one KV dtype (warm-L2 term on, as benchmarked)."""
    b, h, kvh, d = (np.asarray(data[c]) for c in ("batch_size", "num_heads",
                                                   "num_key_value_heads", "head_dim"))
    c = decode_context_len(data)
    t = np.asarray(data["latency_ms"]) * 1e-3
    idx = subsample_index(t.size)
    kv_bytes = 2.0 if kv == "bf16" else 1.0
    knots = _knot_names(d)

    def predict(p: dict[str, float], sel: IntArray = idx) -> FloatArray:
        table = _stub_table(gpu_id, decode_attention={kv: _split_knots(p, knots,
                                                                       "compute_fraction")})
        return decode_attention_time_s(b[sel], c[sel], h[sel], kvh[sel], d[sel], kv_bytes, gpu,
                                       table, warm_l2=True)

    start = {**DECODE_START, **dict.fromkeys(knots, 0.9)}
    bounds = {**DECODE_BOUNDS, **dict.fromkeys(knots, KNOT_BOUNDS)}
    fit = fit_parameters(predict, start, bounds, t[idx], f_scale=F_SCALE)
    params = DecodeAttentionParams.model_validate(_split_knots(fit.params, knots,
                                                               "compute_fraction"))
    return params, error_stats(predict(fit.params, np.arange(t.size)), t)


AB_START = {"alpha_s": 5e-6, "bus_bytes_per_s": 1e11}
AB_BOUNDS = {"alpha_s": (1e-7, 1e-3), "bus_bytes_per_s": (1e8, 5e12)}


def fit_alpha_beta(data: Mapping[str, FloatArray], gpu: GpuPeaks, gpu_id: str,
                   sel: IntArray | None = None) -> AlphaBeta:
    """α (s) and bus bandwidth β (bytes/s), ring factor 2(n−1)/n, on rows ``sel`` (default all)."""
    pick = np.arange(data["num_gpus"].size) if sel is None else sel
    n, size = data["num_gpus"][pick], data["message_bytes"][pick]

    def predict(p: dict[str, float]) -> FloatArray:
        return allreduce_time_s(size, n, gpu, _stub_table(gpu_id, allreduce=p))

    fit = fit_parameters(predict, AB_START, AB_BOUNDS, data["latency_ms"][pick] * 1e-3,
                         f_scale=F_SCALE)
    return AlphaBeta(**fit.params)


def fit_allreduce(
    custom: Mapping[str, FloatArray], nccl: Mapping[str, FloatArray], gpu: GpuPeaks, gpu_id: str
) -> tuple[AllreduceParams, dict[str, ErrorStats]]:
    """Per-GPU-count α-β for the custom all-reduce and for NCCL; fallback = NCCL over all counts.

    Stats: each implementation's own fit ("custom", "nccl") and the engine choice ("best": the
    faster model against the faster measurement at the same message size and GPU count).
    """
    fallback = fit_alpha_beta(nccl, gpu, gpu_id)
    by: dict[str, dict[int, AlphaBeta]] = {"custom": {}, "nccl": {}}
    for name, rows in (("custom", custom), ("nccl", nccl)):
        for count in np.unique(rows["num_gpus"]):
            sel = np.flatnonzero(rows["num_gpus"] == count)
            by[name][int(count)] = fit_alpha_beta(rows, gpu, gpu_id, sel)
    params = AllreduceParams(alpha_s=fallback.alpha_s, bus_bytes_per_s=fallback.bus_bytes_per_s,
                             custom=by["custom"], nccl=by["nccl"])
    stats = {}
    for name, rows in (("custom", custom), ("nccl", nccl)):
        one = params.model_copy(update={"custom": by[name], "nccl": by[name]})
        table = _stub_table(gpu_id, allreduce=one.model_dump())
        pred = allreduce_time_s(rows["message_bytes"], rows["num_gpus"], gpu, table)
        stats[name] = error_stats(pred, rows["latency_ms"] * 1e-3)
    stats["best"] = best_allreduce_stats(custom, nccl, params, gpu, gpu_id)
    return params, stats


def best_allreduce_stats(custom: Mapping[str, FloatArray], nccl: Mapping[str, FloatArray],
                         params: AllreduceParams, gpu: GpuPeaks, gpu_id: str) -> ErrorStats:
    """Model (faster implementation) against min(custom, NCCL) measured at matching size and count."""
    meas = {(float(n), float(s)): t for n, s, t in zip(custom["num_gpus"], custom["message_bytes"],
                                                        custom["latency_ms"], strict=True)}
    pairs = [(n, s, min(meas[(float(n), float(s))], t))
             for n, s, t in zip(nccl["num_gpus"], nccl["message_bytes"], nccl["latency_ms"],
                                strict=True) if (float(n), float(s)) in meas]
    arr = np.array(pairs, dtype=float).reshape(-1, 3)
    table = _stub_table(gpu_id, allreduce=params.model_dump())
    return error_stats(allreduce_time_s(arr[:, 1], arr[:, 0], gpu, table), arr[:, 2] * 1e-3)
