"""Performance-model reports: ``pdplan roofline`` (one pass, per operator) and ``pdplan calibrate`` (fit error).

Library use::

    from pdplan import open_catalog
    from pdplan.io.serving_defaults import serving_defaults
    from pdplan.perf.memory import instance_memory
    from pdplan.perf.roofline import phase_time
    from pdplan.report.perf import RooflineRun, roofline_view

    cat = open_catalog()
    model, gpu = cat.model("llama-3.1-8b"), cat.gpu("h100-sxm")
    table = cat.kernel_table(gpu.name)
    time = phase_time(model, gpu, table, phase="decode", batch=64, tokens=2048)
    run = RooflineRun(model, gpu, table, batch=64, tokens=2048, tp=1, pp=1, time=time,
                      memory=instance_memory(model, gpu.memory_bytes, defaults=serving_defaults()))
    roofline_view(run).document["time_s"]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from pdplan.report.render import View
from pdplan.units import GIB

if TYPE_CHECKING:
    from pdplan.calibrate.phase_times import CalibrationReport
    from pdplan.perf.memory import InstanceMemory
    from pdplan.perf.roofline import PhaseTime
    from pdplan.specs.hardware import GpuSpec
    from pdplan.specs.kernel_table import KernelTable
    from pdplan.specs.model import ModelSpec


@dataclass(frozen=True)
class RooflineRun:
    """One pass of ``pdplan roofline``: its inputs, its time (:func:`pdplan.perf.roofline.phase_time`) and the memory
    fit of the instance (:func:`pdplan.perf.memory.instance_memory`) at the same parallelism and dtypes."""

    model: ModelSpec
    gpu: GpuSpec
    table: KernelTable
    batch: int
    tokens: int
    tp: int
    pp: int
    time: PhaseTime
    memory: InstanceMemory

    @property
    def weights_fit(self) -> bool:
        """The weights (and workspace) leave room for KV on each GPU."""
        return bool(self.memory.fits.ravel()[0])

    @property
    def kv_tokens_needed(self) -> int:
        """KV token slots the pass holds: ``batch`` prompts of ``tokens`` (prefill) or sequences of mean context
        ``tokens`` (decode), plus each sequence's fixed state of a hybrid, ⌈batch·s⌉ (:mod:`pdplan.perf.memory`)."""
        state = float(self.memory.state_tokens_per_seq.ravel()[0])
        return self.batch * self.tokens + math.ceil(self.batch * state)

    @property
    def kv_capacity_tokens(self) -> float:
        return float(self.memory.kv_capacity_tokens.ravel()[0])

    @property
    def fits(self) -> bool:
        """Weights fit and the pass's KV (:attr:`kv_tokens_needed`) fits the instance's KV capacity."""
        return self.weights_fit and self.kv_tokens_needed <= self.kv_capacity_tokens

    @property
    def time_s(self) -> float:
        return float(self.time.time_s.ravel()[0])


def op_records(time: PhaseTime) -> list[dict[str, Any]]:
    """One record per operator (totals over the pass, its share of the time, what bounds it) plus the framework
    overhead."""
    total = float(time.time_s.ravel()[0])
    records = [
        {
            "op": op.name,
            "kind": op.kind,
            "count": op.count,
            "time_s": float(op.time_s.ravel()[0]),
            "share": float(op.time_s.ravel()[0]) / total,
            "flops": float(op.flops.ravel()[0]),
            "bytes": float(op.bytes.ravel()[0]),
            "bound": op.bound,
        }
        for op in time.ops
    ]
    records.append(
        {
            "op": "framework",
            "kind": "overhead",
            "count": 1.0,
            "time_s": _first(time.framework_overhead_s),
            "share": _first(time.framework_overhead_s) / total,
            "flops": 0.0,
            "bytes": 0.0,
            "bound": "overhead",
        }
    )
    return records


def roofline_view(run: RooflineRun) -> View:
    """``pdplan roofline``: per-operator records; JSON ``time_s``, ``bound``, ``ops`` (docs/architecture.md §4) and the
    inputs, memory fit and kernel table it assumed."""
    records = op_records(run.time)
    bound = run.time.bound()
    document = {
        "time_s": run.time_s,
        "stage_time_s": float(run.time.stage_time_s.ravel()[0]),
        "bound": bound,
        "phase": run.time.phase,
        "model": run.model.name,
        "gpu": run.gpu.name,
        "tp": run.tp,
        "pp": run.pp,
        "batch": run.batch,
        "tokens": run.tokens,
        "fits_in_memory": run.fits,
        "kv_capacity_tokens": run.kv_capacity_tokens,
        "kv_tokens_needed": run.kv_tokens_needed,
        "kernel_table": {"gpu": run.table.gpu, "calibrated": run.table.calibrated, "stack": run.table.stack},
        "ops": records,
    }
    title = (
        f"{run.time.phase} {run.model.name} on {run.tp * run.pp}x {run.gpu.name}: "
        f"{run.time_s * 1e3:.2f} ms, {bound}-bound"
    )
    return View(records=records, document=document, title=title)


def roofline_warnings(run: RooflineRun) -> list[str]:
    """What the reader should know about the numbers: the model does not fit; the kernel table is not calibrated."""
    warnings = []
    if not run.weights_fit:
        warnings.append(
            f"{run.model.name} does not fit on {run.tp * run.pp}x {run.gpu.name} "
            f"(weights {run.memory.weight_bytes.ravel()[0] / GIB:.1f} GiB per GPU); time shown anyway"
        )
    elif not run.fits:
        warnings.append(
            f"the pass holds {run.kv_tokens_needed:,} KV tokens ({run.batch} x {run.tokens}"
            f"{' + fixed state' if run.kv_tokens_needed > run.batch * run.tokens else ''}) but "
            f"{run.tp * run.pp}x {run.gpu.name} has room for {run.kv_capacity_tokens:,.0f}; time shown anyway"
        )
    if not run.table.calibrated:
        warnings.append(f"kernel table for {run.gpu.name} is not calibrated (derived from {run.table.derived_from})")
    return warnings


def _stats(stats: Any) -> dict[str, Any]:
    return {"median_abs_pct": stats.median_abs_pct, "p90_abs_pct": stats.p90_abs_pct, "n": stats.n}


def calibration_document(report: CalibrationReport) -> dict[str, Any]:
    """``pdplan calibrate`` as JSON: ``mape`` (median absolute % error), ``n``, ``rows`` (docs/architecture.md §4),
    and the
    error per phase and per GPU."""
    return {
        "mape": report.stats.median_abs_pct,
        "p90_abs_pct": report.stats.p90_abs_pct,
        "n": report.stats.n,
        "by_phase": {k: _stats(v) for k, v in report.by_phase.items()},
        "by_gpu": {k: _stats(v) for k, v in report.by_gpu.items()},
        "rows": report.rows,
    }


def calibration_view(report: CalibrationReport) -> View:
    """The terminal table summarises the error (all, per phase, per GPU); CSV and Markdown list every row."""
    summary = [{"group": "all", **_stats(report.stats)}]
    summary += [{"group": f"phase={k}", **_stats(v)} for k, v in report.by_phase.items()]
    summary += [{"group": f"gpu={k}", **_stats(v)} for k, v in report.by_gpu.items()]
    return View(
        records=report.rows,
        document=calibration_document(report),
        title="calibration error (absolute %)",
        table_records=summary,
    )


def _first(value: Any) -> float:
    """The first element of a phase time's array field (a scalar as it is)."""
    return float(value.ravel()[0]) if hasattr(value, "ravel") else float(value)


def kernel_table_yaml(table: KernelTable) -> str:
    """A fitted kernel table as YAML (``pdplan calibrate -o TABLE.yaml``), keys in schema order."""
    return yaml.safe_dump(table.model_dump(mode="json"), sort_keys=False)
