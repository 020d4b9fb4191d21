"""``pdplan calibrate``: fit a kernel table to measured phase times, or check how well a table predicts them.

Measurements are a CSV with header ``gpu,model,tp,phase,batch,tokens,time_ms`` (docs/architecture.md §4): prefill rows
time the prefill of ``batch`` prompts of ``tokens`` tokens; decode rows time one step of ``batch`` sequences at mean
context ``tokens``. Extra columns are kept and echoed in the per-row output.

Fitting scales a few kernel-table knobs that phase-level times can constrain — the GEMM peak and memory fractions,
the decode-attention bandwidth fraction (and, in a tiled entry, its per-CTA stream rate), the prefill-attention
compute fraction (which also paces a tiled entry's CTAs), the per-step framework overhead, and two additive terms
that scale with the deployment rather than the step: a per-collective latency added to every all-reduce α (a step
pays it 2·layers times at TP > 1, never at TP 1) and a per-kernel launch gap added to every kernel's fixed overhead
(paid kernels-per-layer × layers times) — by ``scipy.optimize.least_squares`` on log residuals
(:func:`pdplan.calibrate.fit.fit_parameters`, the same code that fits the shipped tables to kernel measurements), in
two stages (:func:`_fit_in_two_stages`: the additive terms first, then all knobs if that is better and sane).
Knobs a data set cannot see (e.g. no decode rows) keep their values.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters
from pdplan.calibrate.host_terms import HostTerm, fitted_host_terms, framework_source
from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.io.files import read_text_file
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.io.perf_data import perf_data
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.kernel_table import GemmParams, KernelTable
from pdplan.specs.model import ModelSpec
from pdplan.types import FloatArray

REQUIRED_COLUMNS = ("gpu", "model", "tp", "phase", "batch", "tokens", "time_ms")
_FIT_BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_scale": (0.3, 3.0),
    "decode_attention_scale": (0.3, 3.0),
    "prefill_attention_scale": (0.3, 3.0),
    "decode_step_overhead_s": (1e-6, 0.1),
    "collective_latency_s": (1e-8, 2e-4),
    "launch_gap_s": (1e-8, 1e-4),
}
"""Multiplicative knobs within 0.3–3× of the table; additive ones (s) from ~0 to well past docs/engines.md §1's reported
values (per-step host overhead up to 13 ms; per all-reduce and per kernel a few to tens of µs)."""


@dataclass(frozen=True)
class Measurement:
    """One measured row, parsed (SI) and as written (for echoing)."""

    gpu: str
    model: str
    tp: int
    phase: str
    batch: float
    tokens: float
    time_s: float
    raw: dict[str, str]


@dataclass(frozen=True)
class CalibrationReport:
    """Fit quality: overall, per phase and per GPU, and every row's prediction."""

    stats: ErrorStats
    by_phase: dict[str, ErrorStats]
    by_gpu: dict[str, ErrorStats]
    rows: list[dict[str, Any]]
    table: KernelTable | None = None
    host_terms: tuple[HostTerm, ...] = ()
    """After a fit: the additive host terms it put in the table (:mod:`pdplan.calibrate.host_terms`)."""


def _parse_row(raw: dict[str, str], line: int, source: str) -> Measurement:
    def number(col: str, integer: bool = False) -> float:
        text = (raw.get(col) or "").strip()
        try:
            value = float(text)
        except ValueError:
            raise SpecError(f"line {line}: {col}={text!r} is not a number", source=source, field=col) from None
        if not np.isfinite(value) or value <= 0 or (integer and value != int(value)):
            kind = "a positive integer" if integer else "a positive number"
            raise SpecError(f"line {line}: {col}={text!r} must be {kind}", source=source, field=col)
        return value

    phase = (raw.get("phase") or "").strip().lower()
    if phase not in ("prefill", "decode"):
        raise SpecError(f"line {line}: phase={phase!r}; allowed: prefill, decode", source=source, field="phase")
    return Measurement(
        raw["gpu"].strip(),
        raw["model"].strip(),
        int(number("tp", True)),
        phase,
        number("batch", True),
        number("tokens", True),
        number("time_ms") / 1e3,
        raw,
    )


def read_measurements(path: Path) -> list[Measurement]:
    """Parse and validate a measurement CSV; any problem is a one-line SpecError (exit 2)."""
    text = read_text_file(path)
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise SpecError(f"missing column(s) {missing}; required header: {','.join(REQUIRED_COLUMNS)}", source=str(path))
    rows = [_parse_row(raw, i + 2, str(path)) for i, raw in enumerate(reader)]
    if not rows:
        raise SpecError("no measurement rows after the header", source=str(path))
    return rows


def _group_predictor(
    rows: Sequence[Measurement], catalog: Catalog, precision: Precision
) -> Callable[[Mapping[str, KernelTable]], FloatArray]:
    """A function tables-by-GPU → predicted seconds per row, vectorised per (gpu, model, phase) group."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault((row.gpu, row.model, row.phase), []).append(i)
    resolved: dict[tuple[str, str, str], tuple[GpuSpec, ModelSpec, list[int]]] = {
        key: (catalog.gpu(key[0]), catalog.model(key[1]), idx) for key, idx in groups.items()
    }

    def predict(tables: Mapping[str, KernelTable]) -> FloatArray:
        out = np.empty(len(rows))
        for (gpu_name, _, phase), (gpu, model, idx) in resolved.items():
            sel = [rows[i] for i in idx]
            table = tables[gpu_name]
            result = phase_time(
                model,
                gpu,
                table,
                phase=phase,  # type: ignore[arg-type]
                batch=[r.batch for r in sel],
                tokens=[r.tokens for r in sel],
                tp=[r.tp for r in sel],
                precision=precision,
                data=perf_data(model, gpu, table, tp=max(r.tp for r in sel)),
            )
            out[idx] = result.time_s
        return out

    return predict


def _scale_gemm(params: GemmParams, factor: float) -> GemmParams:
    """A GEMM entry with its peak and memory fractions multiplied (capped at 1), its small-M entry's too."""
    update: dict[str, Any] = {f: min(1.0, getattr(params, f) * factor) for f in ("peak_fraction", "memory_fraction")}
    if params.small_m is not None:
        update["small_m"] = _scale_gemm(params.small_m, factor)
    return params.model_copy(update=update)


def scaled_table(table: KernelTable, knobs: Mapping[str, float]) -> KernelTable:
    """A copy of ``table`` with efficiency knobs multiplied (capped at 1) and the step overhead replaced."""

    def scale(params: Any, field: str, factor: float) -> Any:
        return params.model_copy(update={field: min(1.0, getattr(params, field) * factor)})

    g, d, p = (
        knobs.get("gemm_scale", 1.0),
        knobs.get("decode_attention_scale", 1.0),
        knobs.get("prefill_attention_scale", 1.0),
    )
    update: dict[str, Any] = {
        "gemm": {k: _scale_gemm(v, g) for k, v in table.gemm.items()},
        "decode_attention": {
            k: _scale_decode(scale(v, "memory_fraction", d), d) for k, v in table.decode_attention.items()
        },
        "prefill_attention": {k: scale(v, "compute_fraction", p) for k, v in table.prefill_attention.items()},
    }
    if "decode_step_overhead_s" in knobs:
        update["framework"] = table.framework.model_copy(
            update={"decode_step_overhead_s": knobs["decode_step_overhead_s"]}
        )
    if "collective_latency_s" in knobs:
        update["allreduce"] = _add_collective_latency(table.allreduce, knobs["collective_latency_s"])
    if "launch_gap_s" in knobs:
        _add_launch_gap(update, table, knobs["launch_gap_s"])
    return table.model_copy(update=update)


def _add_collective_latency(params: Any, latency_s: float) -> Any:
    """Every all-reduce α (fallback, custom and NCCL per GPU count) plus ``latency_s``: one more fixed cost per
    collective, so the step pays it 2·layers times at TP > 1 and never at TP 1 (the fallback α also prices a PP
    hand-off's message)."""

    def plus(ab: Any) -> Any:
        return ab.model_copy(update={"alpha_s": ab.alpha_s + latency_s})

    return params.model_copy(
        update={
            "alpha_s": params.alpha_s + latency_s,
            "custom": {n: plus(ab) for n, ab in params.custom.items()},
            "nccl": {n: plus(ab) for n, ab in params.nccl.items()},
        }
    )


def _add_launch_gap(update: dict[str, Any], table: KernelTable, gap_s: float) -> None:
    """Every kernel's fixed ``overhead_s`` (GEMM, both attentions, elementwise) plus ``gap_s``: a launch gap per
    kernel, paid ops-per-layer × layers times per pass (on the already-scaled entries in ``update``)."""

    def plus(params: Any) -> Any:
        return params.model_copy(update={"overhead_s": params.overhead_s + gap_s})

    for group in ("gemm", "decode_attention", "prefill_attention"):
        update[group] = {k: plus(v) for k, v in update[group].items()}
    update["elementwise"] = plus(table.elementwise)


def _scale_decode(params: Any, factor: float) -> Any:
    """A tiled decode entry streams per CTA too: its ``cta_bytes_per_s`` scales with the bandwidth knob."""
    if params.tiling is None:
        return params
    tiling = params.tiling.model_copy(update={"cta_bytes_per_s": params.tiling.cta_bytes_per_s * factor})
    return params.model_copy(update={"tiling": tiling})


def _stats_by(
    rows: Sequence[Measurement], key: Callable[[Measurement], str], pred: FloatArray, meas: FloatArray
) -> dict[str, ErrorStats]:
    labels = np.array([key(r) for r in rows])
    return {lab: error_stats(pred[labels == lab], meas[labels == lab]) for lab in sorted(set(labels))}


def _report(rows: Sequence[Measurement], pred: FloatArray, table: KernelTable | None) -> CalibrationReport:
    meas = np.array([r.time_s for r in rows])
    out_rows = [
        {**r.raw, "predicted_ms": float(p * 1e3), "error_pct": float((p / r.time_s - 1.0) * 100)}
        for r, p in zip(rows, pred, strict=True)
    ]
    return CalibrationReport(
        error_stats(pred, meas),
        _stats_by(rows, lambda r: r.phase, pred, meas),
        _stats_by(rows, lambda r: r.gpu, pred, meas),
        out_rows,
        table,
    )


def _tables_for(rows: Sequence[Measurement], catalog: Catalog, table_path: Path | None) -> dict[str, KernelTable]:
    names = sorted({r.gpu for r in rows})
    if table_path is not None:
        table = load_kernel_table(table_path)
        return dict.fromkeys(names, table)
    return {n: load_kernel_table(catalog.gpu(n).name) for n in names}


def check(
    rows: Sequence[Measurement],
    catalog: Catalog,
    *,
    kernel_table: Path | None = None,
    precision: Precision | None = None,
) -> CalibrationReport:
    """How well the current (or given) kernel table predicts the measurements."""
    predict = _group_predictor(rows, catalog, precision or Precision())
    return _report(rows, predict(_tables_for(rows, catalog, kernel_table)), None)


def _start_knobs(rows: Sequence[Measurement], base: KernelTable) -> dict[str, float]:
    """The knobs the rows can constrain, at their starting values: efficiencies ×1; the per-kernel launch gap (rows
    of two models, or prefill only) and the per-collective latency (a TP > 1 row) at 1 µs; the per-step overhead
    (decode rows) as the table's."""
    x0 = {"gemm_scale": 1.0, "prefill_attention_scale": 1.0}
    if len({r.model for r in rows}) > 1 or all(r.phase == "prefill" for r in rows):
        x0["launch_gap_s"] = 1e-6  # one model's decode steps cannot tell a per-kernel gap from a per-step cost
    if any(r.phase == "decode" for r in rows):
        x0 |= {
            "decode_attention_scale": 1.0,
            "decode_step_overhead_s": max(base.framework.decode_step_overhead_s, 1e-5),
        }
    if any(r.tp > 1 for r in rows):
        x0["collective_latency_s"] = 1e-6
    return x0


def fit(
    rows: Sequence[Measurement],
    catalog: Catalog,
    *,
    kernel_table: Path | None = None,
    precision: Precision | None = None,
) -> CalibrationReport:
    """Fit one GPU's table knobs to the measurements; the report carries the fitted table."""
    gpus = sorted({r.gpu.lower() for r in rows})
    if len(gpus) != 1:
        raise SpecError(f"fitting needs rows of one GPU, got {gpus}; split the CSV or use --check", field="gpu")
    base = next(iter(_tables_for(rows, catalog, kernel_table).values()))
    predict = _group_predictor(rows, catalog, precision or Precision())
    x0 = _start_knobs(rows, base)
    if len(rows) < len(x0):
        raise SpecError(
            f"{len(rows)} measured row(s) cannot fit {len(x0)} parameters ({', '.join(sorted(x0))}); "
            f"give at least {len(x0)} rows, or use --check to only compare",
            field="rows",
        )
    gpu_name = rows[0].gpu

    def predict_knobs(knobs: dict[str, float]) -> FloatArray:
        return predict({gpu_name: scaled_table(base, knobs)})

    params = _fit_in_two_stages(predict_knobs, x0, np.array([r.time_s for r in rows]))
    fitted = scaled_table(base, params)
    note = f"pdplan calibrate: {len(rows)} phase rows; knobs " + ", ".join(
        f"{k}={v:.4g}" for k, v in sorted(params.items())
    )
    terms = fitted_host_terms(params, {k: lo for k, (lo, _) in _FIT_BOUNDS.items()})
    sources = {**fitted.sources, "calibrate": note}
    for term in terms:
        if term.kind.knob == "decode_step_overhead_s":
            sources["framework"] = framework_source(term, len(rows))
    fitted = fitted.model_copy(update={"calibrated": True, "sources": sources})
    report = _report(rows, predict({gpu_name: fitted}), fitted)
    return dataclasses.replace(report, host_terms=terms)


ADDITIVE_KNOBS = ("launch_gap_s", "collective_latency_s", "decode_step_overhead_s")


def _fit_in_two_stages(
    predict_knobs: Callable[[dict[str, float]], FloatArray], x0: dict[str, float], measured_s: FloatArray
) -> dict[str, float]:
    """Additive terms first, with the kernel efficiencies as the table has them (fitted on kernel measurements);
    then every knob from there. The second fit is kept only if it lowers the median error with no efficiency at
    the edge of its range: at one TP a lower GEMM or attention efficiency reproduces a per-step cost just as
    well, but follows the kernels' 1/TP scaling instead of the collectives' and launches' count (fitted on TP 8
    decode steps, the efficiency-only answer misses TP 1 by +77 %, the additive one by −5 %)."""
    additive = {k: v for k, v in x0.items() if k in ADDITIVE_KNOBS}
    first = fit_parameters(predict_knobs, additive, _FIT_BOUNDS, measured_s)
    both = fit_parameters(predict_knobs, {**x0, **first.params}, _FIT_BOUNDS, measured_s)
    edge = any(
        min(v / _FIT_BOUNDS[k][0], _FIT_BOUNDS[k][1] / v) < 1.01
        for k, v in both.params.items()
        if k not in ADDITIVE_KNOBS
    )
    better = both.stats.median_abs_pct < first.stats.median_abs_pct
    return both.params if better and not edge else first.params
