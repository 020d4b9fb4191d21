"""Performance-model commands: ``pdplan roofline`` and ``pdplan calibrate``."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from pdplan.cli.common import (
    FormatOpt,
    HardwareDbOpt,
    KernelTableOpt,
    OutputOpt,
    catalog_from,
    emit,
    stderr_console,
    warn,
)
from pdplan.report.render import Format


class PhaseChoice(StrEnum):
    prefill = "prefill"
    decode = "decode"


class Dtype(StrEnum):
    bf16 = "bf16"
    fp8 = "fp8"


DTYPE_BYTES = {Dtype.bf16: 2.0, Dtype.fp8: 1.0}


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
    from pdplan.io.kernel_tables import load_kernel_table
    from pdplan.perf.memory import instance_memory
    from pdplan.perf.roofline import Precision, phase_time
    from pdplan.report.perf import RooflineRun, roofline_view, roofline_warnings

    catalog = catalog_from(hardware_db)
    model_spec, gpu_spec = catalog.model(model), catalog.gpu(gpu)
    table = load_kernel_table(kernel_table or gpu_spec.name)
    # an FP8 checkpoint is served in FP8 (weights never wider than stored; pdplan.serving.inputs.precision_of)
    weight_bytes = min(DTYPE_BYTES[dtype], model_spec.checkpoint_weight_bytes)
    precision = Precision(weight_bytes=weight_bytes, kv_bytes=DTYPE_BYTES[kv_dtype])
    time = phase_time(
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
    run = RooflineRun(model_spec, gpu_spec, table, batch=batch, tokens=tokens, tp=tp, pp=pp, time=time, memory=memory)
    for line in roofline_warnings(run):
        warn(line)
    emit(roofline_view(run), fmt, output)


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
    from pdplan.report.perf import calibration_view, kernel_table_yaml
    from pdplan.report.render import write_atomic

    catalog = catalog_from(hardware_db)
    rows = read_measurements(measurements)
    report = (
        check(rows, catalog, kernel_table=kernel_table) if check_only else fit(rows, catalog, kernel_table=kernel_table)
    )
    if report.table is not None and output is not None:
        write_atomic(output, kernel_table_yaml(report.table))
        stderr_console.print(f"wrote kernel table {output}", highlight=False, markup=False, soft_wrap=True)
    emit(calibration_view(report), fmt, output if check_only else None)
