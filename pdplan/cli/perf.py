"""Performance-model commands: ``pdplan roofline`` and ``pdplan calibrate``."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from pdplan.cli.common import (
    FormatOpt,
    HardwareDbOpt,
    OutputOpt,
    catalog_from,
    emit,
    stderr_console,
    warn,
)
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.perf.kernels import KernelTable
from pdplan.perf.memory import instance_memory
from pdplan.perf.roofline import PhaseTime, Precision, phase_time
from pdplan.report.render import Format, write_atomic

if TYPE_CHECKING:
    from pdplan.calibrate.phase_times import CalibrationReport


class PhaseChoice(StrEnum):
    prefill = "prefill"
    decode = "decode"


class Dtype(StrEnum):
    bf16 = "bf16"
    fp8 = "fp8"


DTYPE_BYTES = {Dtype.bf16: 2.0, Dtype.fp8: 1.0}
KernelTableOpt = Annotated[
    Path | None, typer.Option("--kernel-table", help="Kernel table YAML to use instead of the packaged one.")
]


def _op_records(result: PhaseTime) -> list[dict[str, Any]]:
    total = float(result.time_s.ravel()[0])
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
        for op in result.ops
    ]
    records.append(
        {
            "op": "framework",
            "kind": "overhead",
            "count": 1.0,
            "time_s": result.framework_overhead_s,
            "share": result.framework_overhead_s / total,
            "flops": 0.0,
            "bytes": 0.0,
            "bound": "overhead",
        }
    )
    return records


def roofline(
    model: Annotated[str, typer.Option("--model", help="Model preset, YAML or HF config.json.")],
    gpu: Annotated[str, typer.Option("--gpu", help="GPU name or YAML path.")],
    phase: Annotated[PhaseChoice, typer.Option("--phase", help="prefill or decode.")],
    batch: Annotated[int, typer.Option("--batch", min=1, help="Prompts (prefill) or sequences (decode).")],
    tokens: Annotated[int, typer.Option("--tokens", min=1, help="Prompt length, or mean decode context.")],
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor parallelism.")] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1, help="Pipeline parallelism.")] = 1,
    dtype: Annotated[Dtype, typer.Option("--dtype", help="Weights/GEMM dtype.")] = Dtype.bf16,
    kv_dtype: Annotated[Dtype, typer.Option("--kv-dtype", help="KV-cache dtype.")] = Dtype.bf16,
    kernel_table: KernelTableOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """Time of one prefill or decode pass with a per-operator breakdown and what bounds it.

    Example: pdplan roofline --model llama-3.1-70b --gpu h100-sxm --tp 4 --phase decode --batch 64 --tokens 2048
    """
    catalog = catalog_from(hardware_db)
    model_spec, gpu_spec = catalog.model(model), catalog.gpu(gpu)
    table: KernelTable = load_kernel_table(kernel_table or gpu_spec.name)
    precision = Precision(weight_bytes=DTYPE_BYTES[dtype], kv_bytes=DTYPE_BYTES[kv_dtype])
    result = phase_time(
        model_spec, gpu_spec, table, phase=phase.value, batch=batch, tokens=tokens, tp=tp, pp=pp, precision=precision
    )
    memory = instance_memory(
        model_spec,
        gpu_spec.memory_bytes,
        tp=tp,
        pp=pp,
        weight_dtype_bytes=precision.weight_bytes,
        kv_dtype_bytes=precision.kv_bytes,
    )
    fits = bool(memory.fits.ravel()[0])
    if not fits:
        warn(
            f"{model_spec.name} does not fit on {tp * pp}x {gpu_spec.name} "
            f"(weights {memory.weight_bytes.ravel()[0] / 2**30:.1f} GiB per GPU); time shown anyway"
        )
    if not table.calibrated:
        warn(f"kernel table for {gpu_spec.name} is not calibrated (derived from {table.derived_from})")
    records = _op_records(result)
    document = {
        "time_s": float(result.time_s.ravel()[0]),
        "stage_time_s": float(result.stage_time_s.ravel()[0]),
        "bound": result.bound(),
        "phase": phase.value,
        "model": model_spec.name,
        "gpu": gpu_spec.name,
        "tp": tp,
        "pp": pp,
        "batch": batch,
        "tokens": tokens,
        "fits_in_memory": fits,
        "kv_capacity_tokens": float(memory.kv_capacity_tokens.ravel()[0]),
        "kernel_table": {"gpu": table.gpu, "calibrated": table.calibrated, "stack": table.stack},
        "ops": records,
    }
    time_ms = float(result.time_s.ravel()[0]) * 1e3
    title = f"{phase.value} {model_spec.name} on {tp * pp}x {gpu_spec.name}: {time_ms:.2f} ms, {result.bound()}-bound"
    emit(fmt, output, records=records, document=document, title=title)


def _calibration_document(report: CalibrationReport) -> dict[str, Any]:
    def stats(s: Any) -> dict[str, Any]:
        return {"median_abs_pct": s.median_abs_pct, "p90_abs_pct": s.p90_abs_pct, "n": s.n}

    return {
        "mape": report.stats.median_abs_pct,
        "p90_abs_pct": report.stats.p90_abs_pct,
        "n": report.stats.n,
        "by_phase": {k: stats(v) for k, v in report.by_phase.items()},
        "by_gpu": {k: stats(v) for k, v in report.by_gpu.items()},
        "rows": report.rows,
    }


def calibrate(
    measurements: Annotated[Path, typer.Argument(help="CSV: gpu,model,tp,phase,batch,tokens,time_ms")],
    check_only: Annotated[bool, typer.Option("--check", help="Only report the fit of the current table.")] = False,
    kernel_table: KernelTableOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """Fit a kernel table to measured phase times (-o TABLE.yaml), or --check the current table's error.

    Example: pdplan calibrate my_h100_runs.csv --check --format json
    """
    from pdplan.calibrate.phase_times import check, fit, read_measurements  # scipy: loaded only when calibrating

    catalog = catalog_from(hardware_db)
    rows = read_measurements(measurements)
    report = (
        check(rows, catalog, kernel_table=kernel_table) if check_only else fit(rows, catalog, kernel_table=kernel_table)
    )
    document = _calibration_document(report)
    report_output = output if check_only else None
    if report.table is not None and output is not None:
        text = yaml.safe_dump(report.table.model_dump(mode="json"), sort_keys=False)
        write_atomic(output, text)
        stderr_console.print(f"wrote kernel table {output}", highlight=False, markup=False, soft_wrap=True)
    summary = [{"group": "all", **_stat_row(report.stats)}]
    summary += [{"group": f"phase={k}", **_stat_row(v)} for k, v in report.by_phase.items()]
    summary += [{"group": f"gpu={k}", **_stat_row(v)} for k, v in report.by_gpu.items()]
    emit(
        fmt,
        report_output,
        records=summary if fmt is Format.table else report.rows,
        document=document,
        title="calibration error (absolute %)",
    )


def _stat_row(stats: Any) -> dict[str, Any]:
    return {"median_abs_pct": stats.median_abs_pct, "p90_abs_pct": stats.p90_abs_pct, "n": stats.n}
