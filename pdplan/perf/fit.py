"""Fitting kernel-table parameters to measured times (log-residual least squares) and error statistics.

:func:`fit_parameters` is generic: any vectorised ``predict(params) -> seconds`` and named, bounded,
positive parameters. It minimises robust (soft-L1) log-time residuals with
``scipy.optimize.least_squares`` in log-parameter space, so a 10% miss counts the same at 3 µs and
at 30 ms. The adapters below read AIConfigurator kernel CSVs (stdlib ``csv``) and fit one GPU's
:class:`~pdplan.perf.kernels.KernelTable` groups; ``pdplan calibrate`` reuses the generic part.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.optimize import least_squares

from pdplan.errors import SpecError
from pdplan.perf.kernels import (
    AllreduceParams,
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

MAX_FIT_ROWS = 6000
"""Rows used for fitting one family (every k-th row of the file order); errors use all rows."""

Bounds = Mapping[str, tuple[float, float]]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True)
class ErrorStats:
    """Absolute percentage errors of predictions against measurements."""

    median_abs_pct: float
    p90_abs_pct: float
    n: int


@dataclass(frozen=True)
class FitResult:
    """Fitted parameters (named, SI) and their error on the rows they were judged on."""

    params: dict[str, float]
    stats: ErrorStats
    n_fit: int


def error_stats(predicted_s: FloatArray, measured_s: FloatArray) -> ErrorStats:
    """Median and 90th-percentile of |predicted/measured − 1|·100 over all rows."""
    pred, meas = np.asarray(predicted_s, float), np.asarray(measured_s, float)
    if pred.shape != meas.shape or meas.size == 0:
        raise ValueError(f"need equal, non-empty shapes; got {pred.shape} and {meas.shape}")
    err = np.abs(pred / meas - 1.0) * 100.0
    return ErrorStats(float(np.median(err)), float(np.percentile(err, 90)), int(err.size))


def fit_parameters(
    predict_fn: Callable[[dict[str, float]], FloatArray],
    x0: Mapping[str, float],
    bounds: Bounds,
    measured_s: FloatArray,
    *,
    f_scale: float = 0.1,
) -> FitResult:
    """Least-squares fit of positive named parameters on log(predicted/measured) residuals.

    ``bounds[name] = (low, high)`` with 0 < low <= x0 <= high; the search runs on log(params).
    Loss is soft-L1 with ``f_scale`` (≈ a 10% residual) so a few noisy rows do not dominate.
    """
    names = list(x0)
    lo = np.log([bounds[k][0] for k in names])
    hi = np.log([bounds[k][1] for k in names])
    start = np.clip(np.log([x0[k] for k in names]), lo, hi)
    measured = np.asarray(measured_s, float)

    def unpack(z: FloatArray) -> dict[str, float]:
        return {k: float(v) for k, v in zip(names, np.exp(z), strict=True)}

    def residuals(z: FloatArray) -> FloatArray:
        out: FloatArray = np.log(predict_fn(unpack(z)) / measured)
        return out

    res = least_squares(residuals, start, bounds=(lo, hi), loss="soft_l1", f_scale=f_scale)
    params = unpack(res.x)
    return FitResult(params, error_stats(predict_fn(params), measured), int(measured.size))


def subsample_index(n: int, max_rows: int = MAX_FIT_ROWS) -> IntArray:
    """Deterministic every-k-th-row index with at most ``max_rows`` rows."""
    step = max(1, -(-n // max_rows))
    return np.arange(0, n, step, dtype=np.intp)


# ---------------------------------------------------------------- AIConfigurator CSV adapters


def read_csv_columns(
    path: Path, columns: list[str], where: Mapping[str, set[str]]
) -> dict[str, FloatArray]:
    """Numeric columns of the rows whose string columns match ``where`` (column -> allowed)."""
    if not path.is_file():
        raise SpecError("file not found", source=str(path))
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if all(r[c] in ok for c, ok in where.items())]
    return {c: np.array([float(r[c]) for r in rows]) for c in columns}


GEMM_DTYPES: dict[str, set[str]] = {"bf16": {"bfloat16"}, "fp8": {"fp8"}}
KV_DTYPES: dict[str, set[str]] = {"bf16": {"bfloat16"}, "fp8": {"fp8"}}
_ATTN_COLS = ["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "step",
              "latency_ms"]


def read_gemm(data_dir: Path, flavour: GemmFlavour) -> dict[str, FloatArray]:
    """``gemm.csv`` rows of one dtype as arrays m, n, k, latency_ms."""
    cols = ["m", "n", "k", "latency_ms"]
    return read_csv_columns(data_dir / "gemm.csv", cols, {"gemm_dtype": GEMM_DTYPES[flavour]})


def read_attention(data_dir: Path, phase: str, kv: KvFlavour) -> dict[str, FloatArray]:
    """``{context,generation}_attention.csv`` rows with one KV-cache dtype (bf16 attention)."""
    where = {"kv_cache_dtype": KV_DTYPES[kv], "attn_dtype": {"bfloat16"}}
    return read_csv_columns(data_dir / f"{phase}_attention.csv", _ATTN_COLS, where)


def read_allreduce(path: Path, op_name: str, dtypes: set[str]) -> dict[str, FloatArray]:
    """All-reduce rows (custom_allreduce.csv or nccl.csv): num_gpus, message_size, latency_ms."""
    dtype_col = "allreduce_dtype" if path.name.startswith("custom") else "nccl_dtype"
    where = {"op_name": {op_name}, dtype_col: dtypes}
    return read_csv_columns(path, ["num_gpus", "message_size", "latency_ms"], where)


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


GEMM_START = {"peak_fraction": 0.8, "m0_tokens": 32.0, "n0_elements": 64.0, "k0_elements": 64.0,
              "memory_fraction": 0.8, "overhead_s": 3e-6, "smooth_q": 2.0}
GEMM_BOUNDS = {"peak_fraction": (0.05, 1.0), "m0_tokens": (1e-3, 4096.0),
               "n0_elements": (1e-3, 16384.0), "k0_elements": (1e-3, 16384.0),
               "memory_fraction": (0.05, 1.0), "overhead_s": (1e-7, 1e-4), "smooth_q": (1.0, 16.0)}


def fit_gemm(
    data: Mapping[str, FloatArray], flavour: GemmFlavour, gpu: GpuPeaks, gpu_id: str
) -> tuple[GemmParams, ErrorStats]:
    """Fit one GEMM flavour on a deterministic subsample; judge it on every row."""
    quant = 3.0 if flavour == "fp8" else 0.0
    m, n, k, t = (np.asarray(data[c]) for c in ("m", "n", "k", "latency_ms"))
    t = t * 1e-3
    idx = subsample_index(t.size)

    def predict(p: dict[str, float], sel: IntArray = idx) -> FloatArray:
        table = _stub_table(gpu_id, gemm={flavour: {**p, "quant_bytes_per_element": quant}})
        return gemm_time_s(m[sel], n[sel], k[sel], flavour, gpu, table)

    fit = fit_parameters(predict, GEMM_START, GEMM_BOUNDS, t[idx])
    params = GemmParams(**fit.params, quant_bytes_per_element=quant)
    return params, error_stats(predict(fit.params, np.arange(t.size)), t)


PREFILL_START = {"compute_fraction": 0.6, "s0_tokens": 64.0, "w0_batch_heads": 64.0,
                 "memory_fraction": 0.5, "overhead_s": 8e-6, "smooth_q": 2.0}
PREFILL_BOUNDS = {"compute_fraction": (0.05, 1.0), "s0_tokens": (1e-3, 8192.0),
                  "w0_batch_heads": (1e-3, 8192.0), "memory_fraction": (0.02, 1.0),
                  "overhead_s": (1e-7, 1e-3), "smooth_q": (1.0, 16.0)}
DECODE_START = {"memory_fraction": 0.7, "c0_tokens": 64.0, "w0_seq_heads": 8.0,
                "compute_fraction": 0.3, "overhead_s": 8e-6, "smooth_q": 2.0}
DECODE_BOUNDS = {"memory_fraction": (0.05, 1.0), "c0_tokens": (1e-3, 65536.0),
                 "w0_seq_heads": (1e-3, 4096.0), "compute_fraction": (0.01, 1.0),
                 "overhead_s": (1e-7, 1e-3), "smooth_q": (1.0, 16.0)}


def fit_prefill(
    data: Mapping[str, FloatArray], kv: KvFlavour, gpu: GpuPeaks, gpu_id: str
) -> tuple[PrefillAttentionParams, ErrorStats]:
    """Fit prefill (context) attention for one KV dtype."""
    b, s, h, kvh, d = (np.asarray(data[c]) for c in _ATTN_COLS[:5])
    t = np.asarray(data["latency_ms"]) * 1e-3
    idx = subsample_index(t.size)

    def predict(p: dict[str, float], sel: IntArray = idx) -> FloatArray:
        table = _stub_table(gpu_id, prefill_attention={kv: p})
        return prefill_attention_time_s(b[sel], s[sel], h[sel], kvh[sel], d[sel], gpu, table, kv)

    fit = fit_parameters(predict, PREFILL_START, PREFILL_BOUNDS, t[idx])
    return PrefillAttentionParams(**fit.params), error_stats(predict(fit.params, np.arange(t.size)), t)


def decode_context_len(data: Mapping[str, FloatArray]) -> FloatArray:
    """KV length of a generation row: ``isl + step`` (AIConfigurator's isl=1, step = tokens so far)."""
    return np.asarray(data["isl"]) + np.asarray(data["step"])


def fit_decode(
    data: Mapping[str, FloatArray], kv: KvFlavour, gpu: GpuPeaks, gpu_id: str
) -> tuple[DecodeAttentionParams, ErrorStats]:
    """Fit decode (generation) attention for one KV dtype."""
    b, h, kvh, d = (np.asarray(data[c]) for c in ("batch_size", "num_heads",
                                                   "num_key_value_heads", "head_dim"))
    c = decode_context_len(data)
    t = np.asarray(data["latency_ms"]) * 1e-3
    idx = subsample_index(t.size)
    kv_bytes = 2.0 if kv == "bf16" else 1.0

    def predict(p: dict[str, float], sel: IntArray = idx) -> FloatArray:
        table = _stub_table(gpu_id, decode_attention={kv: p})
        return decode_attention_time_s(b[sel], c[sel], h[sel], kvh[sel], d[sel], kv_bytes, gpu,
                                       table)

    fit = fit_parameters(predict, DECODE_START, DECODE_BOUNDS, t[idx])
    return DecodeAttentionParams(**fit.params), error_stats(predict(fit.params, np.arange(t.size)), t)


def fit_allreduce(
    data: Mapping[str, FloatArray], gpu: GpuPeaks, gpu_id: str
) -> tuple[AllreduceParams, ErrorStats]:
    """Fit α (s) and bus bandwidth β (bytes/s) with the 2(n−1)/n ring factor over all GPU counts."""
    n, size = np.asarray(data["num_gpus"]), np.asarray(data["message_size"])
    t = np.asarray(data["latency_ms"]) * 1e-3

    def predict(p: dict[str, float]) -> FloatArray:
        return allreduce_time_s(size, n, gpu, _stub_table(gpu_id, allreduce=p))

    bounds = {"alpha_s": (1e-7, 1e-3), "bus_bytes_per_s": (1e9, 5e12)}
    fit = fit_parameters(predict, {"alpha_s": 5e-6, "bus_bytes_per_s": 1e11}, bounds, t)
    return AllreduceParams(**fit.params), fit.stats


def predict_allreduce_stats(
    data: Mapping[str, FloatArray], params: AllreduceParams, gpu: GpuPeaks, gpu_id: str
) -> ErrorStats:
    """Errors of an all-reduce α/β on other measurements (e.g. NCCL as a cross-check)."""
    n, size = np.asarray(data["num_gpus"]), np.asarray(data["message_size"])
    table = _stub_table(gpu_id, allreduce=params.model_dump())
    return error_stats(allreduce_time_s(size, n, gpu, table), np.asarray(data["latency_ms"]) * 1e-3)
