"""Fitting kernel-table parameters to measured times (log-residual least squares) and error statistics.

:func:`fit_parameters` is generic: any vectorised ``predict(params) -> seconds`` and named, bounded,
positive parameters. It minimises robust (soft-L1) log-time residuals with
``scipy.optimize.least_squares`` in log-parameter space, so a 10% miss counts the same at 3 µs and
at 30 ms. The readers below load AIConfigurator kernel CSVs (stdlib ``csv``); the per-family fits of one
GPU's :class:`~pdplan.perf.kernels.KernelTable` live in ``tools/fitting/fit_families.py`` (not in the package);
``pdplan calibrate`` reuses the generic part.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from pdplan.errors import SpecError
from pdplan.perf.kernels import POW2_Q_STEPS
from pdplan.specs.kernel_table import GemmFlavour, KvFlavour
from pdplan.types import FloatArray, IntArray

MAX_FIT_ROWS = 6000
"""Rows used for fitting one family (every k-th row of the file order); errors use all rows."""

Bounds = Mapping[str, tuple[float, float]]


@dataclass(frozen=True)
class ErrorStats:
    """Absolute percentage errors of predictions against measurements."""

    median_abs_pct: float
    p90_abs_pct: float
    n: int

    def cell(self) -> str:
        """``median / P90`` in percent with one decimal, as the accuracy tables print them."""
        return f"{self.median_abs_pct:.1f} / {self.p90_abs_pct:.1f}"


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
    if "smooth_q" in params and params["smooth_q"] not in FAST_EXPONENTS:
        return _refit_with_power_of_two_q(predict_fn, params, bounds, measured, f_scale)
    return FitResult(params, error_stats(predict_fn(params), measured), int(measured.size))


FAST_EXPONENTS = (1.0, *POW2_Q_STEPS)
"""Smooth-max exponents with a fast exact path (:func:`pdplan.perf.kernels.smooth_max_of`): 1, 2, 4, 8, 16."""


def snap_exponent(q: float) -> float:
    """The nearest of :data:`FAST_EXPONENTS` in log2 (the blend's shape is weakly identified; speed is not)."""
    return float(2.0 ** np.clip(np.round(np.log2(q)), 0.0, max(POW2_Q_STEPS.values())))


def _refit_with_power_of_two_q(
    predict_fn: Callable[[dict[str, float]], FloatArray],
    params: dict[str, float],
    bounds: Bounds,
    measured: FloatArray,
    f_scale: float,
) -> FitResult:
    """Fix smooth_q at :func:`snap_exponent` of the free fit and refit the other parameters from there."""
    q = snap_exponent(params["smooth_q"])
    rest = {k: v for k, v in params.items() if k != "smooth_q"}

    def with_q(p: dict[str, float]) -> FloatArray:
        return predict_fn({**p, "smooth_q": q})

    inner = fit_parameters(with_q, rest, {k: bounds[k] for k in rest}, measured, f_scale=f_scale)
    return FitResult({**inner.params, "smooth_q": q}, inner.stats, inner.n_fit)


def subsample_index(n: int, max_rows: int = MAX_FIT_ROWS) -> IntArray:
    """Deterministic every-k-th-row index with at most ``max_rows`` rows."""
    step = max(1, -(-n // max_rows))
    return np.arange(0, n, step, dtype=np.intp)


# ---------------------------------------------------------------- AIConfigurator CSV adapters


def read_csv_columns(path: Path, columns: list[str], where: Mapping[str, set[str]]) -> dict[str, FloatArray]:
    """Numeric columns of the rows whose string columns match ``where`` (column -> allowed)."""
    if not path.is_file():
        raise SpecError("file not found", source=str(path))
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if all(r[c] in ok for c, ok in where.items())]
    return {c: np.array([float(r[c]) for r in rows]) for c in columns}


GEMM_DTYPES: dict[str, set[str]] = {"bf16": {"bfloat16"}, "fp8": {"fp8"}}
KV_DTYPES: dict[str, set[str]] = {"bf16": {"bfloat16"}, "fp8": {"fp8"}}
_ATTN_COLS = ["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "step", "latency_ms"]


def read_gemm(data_dir: Path, flavour: GemmFlavour) -> dict[str, FloatArray]:
    """``gemm.csv`` rows of one dtype as arrays m, n, k, latency_ms."""
    cols = ["m", "n", "k", "latency_ms"]
    return read_csv_columns(data_dir / "gemm.csv", cols, {"gemm_dtype": GEMM_DTYPES[flavour]})


def read_attention(data_dir: Path, phase: str, kv: KvFlavour) -> dict[str, FloatArray]:
    """``{context,generation}_attention.csv`` rows with one KV-cache dtype (bf16 attention)."""
    where = {"kv_cache_dtype": KV_DTYPES[kv], "attn_dtype": {"bfloat16"}}
    return read_csv_columns(data_dir / f"{phase}_attention.csv", _ATTN_COLS, where)


DTYPE_BYTES = {"half": 2.0, "bfloat16": 2.0, "float16": 2.0, "int8": 1.0, "fp8": 1.0, "float": 4.0, "float32": 4.0}


def read_allreduce(path: Path, op_name: str, dtype: str) -> dict[str, FloatArray]:
    """All-reduce rows of one dtype (custom_allreduce.csv or nccl.csv).

    Returns num_gpus, message_size, message_bytes, latency_ms. AIConfigurator's ``message_size`` is
    a count of ELEMENTS, not bytes: at equal message_size NCCL int8 takes ~half the time of half
    (e.g. H100 8 GPUs, 268435456: 1.38 vs 2.11 ms), and only elements × 2 B gives 8×H100 NCCL
    bus bandwidth ≈ 445 GB/s, in line with nccl-tests (460–480 GB/s); as bytes it would be 223 GB/s.
    """
    dtype_col = "allreduce_dtype" if path.name.startswith("custom") else "nccl_dtype"
    where = {"op_name": {op_name}, dtype_col: {dtype}}
    cols = read_csv_columns(path, ["num_gpus", "message_size", "latency_ms"], where)
    cols["message_bytes"] = cols["message_size"] * DTYPE_BYTES[dtype]
    return cols
