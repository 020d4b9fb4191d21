"""Performance-model commands: ``pdplan roofline`` and ``pdplan calibrate``."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
from pdplan.errors import SpecError
from pdplan.report.render import Format

if TYPE_CHECKING:
    from pdplan.calibrate.host_terms import HostTerm
    from pdplan.io.benchmark_results import RunFlags
    from pdplan.io.catalog import Catalog


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
    phase: Annotated[PhaseChoice, typer.Option("--phase", help="prefill or decode.", case_sensitive=False)],
    batch: Annotated[int, typer.Option("--batch", min=1, help="Prompts (prefill) or sequences (decode).")],
    tokens: Annotated[int, typer.Option("--tokens", min=1, help="Prompt length, or mean decode context.")],
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor parallelism.")] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1, help="Pipeline parallelism.")] = 1,
    dtype: Annotated[Dtype, typer.Option("--dtype", help="Weights/GEMM dtype.", case_sensitive=False)] = Dtype.bf16,
    kv_dtype: Annotated[Dtype, typer.Option("--kv-dtype", help="KV-cache dtype.", case_sensitive=False)] = Dtype.bf16,
    kernel_table: KernelTableOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """Time of one prefill or decode pass with a per-operator breakdown and what bounds it.

    Example: pdplan roofline --model llama-3.1-70b --gpu h100-sxm --tp 4 --phase decode --batch 64 --tokens 2048
    """
    from pdplan.io.kernel_tables import load_kernel_table
    from pdplan.io.perf_data import perf_data
    from pdplan.io.serving_defaults import serving_defaults
    from pdplan.perf.memory import instance_memory
    from pdplan.perf.precision import Precision
    from pdplan.perf.roofline import phase_time
    from pdplan.report.perf import RooflineRun, roofline_view, roofline_warnings

    catalog = catalog_from(hardware_db)
    model_spec, gpu_spec = catalog.model(model), catalog.gpu(gpu)
    from pdplan.perf.sharding import sharding_error

    sharding = sharding_error(model_spec, tp, pp)
    if sharding is not None:
        raise SpecError(sharding[1], field=f"--{sharding[0]}")
    table = load_kernel_table(kernel_table or gpu_spec.name)
    # an FP8 checkpoint is served in FP8 (weights never wider than stored; pdplan.serving.resolve.precision_of)
    weight_bytes = min(DTYPE_BYTES[dtype], model_spec.checkpoint_weight_bytes)
    precision = Precision(weight_bytes=weight_bytes, kv_bytes=DTYPE_BYTES[kv_dtype])
    time = phase_time(
        model_spec, gpu_spec, table, phase=phase.value, batch=batch, tokens=tokens, tp=tp, pp=pp, precision=precision,
        data=perf_data(model_spec, gpu_spec, table, tp=tp),
    )  # fmt: skip
    memory = instance_memory(
        model_spec,
        gpu_spec.memory_bytes,
        defaults=serving_defaults(),
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
    measurements: Annotated[
        list[Path],
        typer.Argument(
            help="Phase times CSV (gpu,model,tp,phase,batch,tokens,time_ms), or benchmark results: CSV "
            "(engine,gpu,model,tp,isl,osl,concurrency,ttft_ms,tpot_ms), vllm bench serve JSON, "
            "SGLang bench_serving JSONL."
        ),
    ],
    check_only: Annotated[bool, typer.Option("--check", help="Only report the fit of the current table.")] = False,
    kernel_table: KernelTableOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="Benchmark runs: the profile to check or to start the fit from (name or YAML). Phase times: the "
            "profile the fitted table will run under (default vllm), checked for host time counted twice.",
        ),
    ] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Benchmark JSON: the GPU (not recorded).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Benchmark JSON: the model, if not recorded.")] = None,
    tp: Annotated[int | None, typer.Option("--tp", min=1, help="Benchmark JSON: tensor parallelism.")] = None,
    isl: Annotated[float | None, typer.Option("--isl", min=1, help="Benchmark JSON: mean input length.")] = None,
    osl: Annotated[float | None, typer.Option("--osl", min=1, help="Benchmark JSON: mean output length.")] = None,
    dtype: Annotated[Dtype | None, typer.Option("--dtype", help="Benchmark JSON: weights/GEMM dtype.")] = None,
    kv_dtype: Annotated[Dtype | None, typer.Option("--kv-dtype", help="Benchmark JSON: KV-cache dtype.")] = None,
) -> None:
    """Fit a kernel table to measured phase times (-o TABLE.yaml), or an engine profile to benchmark results
    (-o ENGINE.yaml, usable as --engine FILE); --check only reports the current error.

    Example: pdplan calibrate my_h100_runs.csv --check --format json
    Example: pdplan calibrate results/*.json --gpu h100-sxm --tp 2 --engine vllm -o my-vllm.yaml
    """
    from pdplan.io.benchmark_results import RunFlags, looks_like_benchmark_csv

    if any(p.suffix.lower() != ".csv" or looks_like_benchmark_csv(p) for p in measurements):
        flags = RunFlags(
            engine=engine, gpu=gpu, model=model, tp=tp, isl=isl, osl=osl,
            dtype=dtype.value if dtype else None, kv_dtype=kv_dtype.value if kv_dtype else None,
        )  # fmt: skip
        _calibrate_runs(measurements, flags, check_only, kernel_table, fmt, output, hardware_db)
        return
    if len(measurements) != 1:
        raise SpecError(f"phase-time calibration reads one CSV, got {len(measurements)} files", field="MEASUREMENTS")
    from pdplan.calibrate.phase_times import check, fit, read_measurements  # scipy: loaded only when calibrating
    from pdplan.report.perf import calibration_view, kernel_table_yaml
    from pdplan.report.render import write_atomic

    catalog = catalog_from(hardware_db)
    rows = read_measurements(measurements[0])
    report = (
        check(rows, catalog, kernel_table=kernel_table) if check_only else fit(rows, catalog, kernel_table=kernel_table)
    )
    if report.table is not None and output is not None:
        write_atomic(output, kernel_table_yaml(report.table))
        stderr_console.print(f"wrote kernel table {output}", highlight=False, markup=False, soft_wrap=True)
    if report.table is not None:
        _host_terms_notes(report.host_terms, catalog, engine)
    emit(calibration_view(report), fmt, output if check_only else None)


def _host_terms_notes(terms: tuple[HostTerm, ...], catalog: Catalog, engine: str | None) -> None:
    """After a phase-time fit: which host terms went into the table, and a warning for each one the engine profile
    it will run under (``--engine``, else the default) adds again (:mod:`pdplan.calibrate.host_terms`)."""
    from pdplan.calibrate.host_terms import describe, double_counted
    from pdplan.io.engines import DEFAULT_ENGINE

    stderr_console.print(describe(terms), highlight=False, markup=False, soft_wrap=True)
    label = engine or f"{DEFAULT_ENGINE} (default)"
    for line in double_counted(terms, catalog.engine(engine or DEFAULT_ENGINE), label):
        warn(line)


def _calibrate_runs(
    files: list[Path],
    flags: RunFlags,
    check_only: bool,
    kernel_table: Path | None,
    fmt: Format,
    output: Path | None,
    hardware_db: list[Path] | None,
) -> None:
    """``pdplan calibrate`` on benchmark results (:mod:`pdplan.calibrate.benchmarks`)."""
    from pdplan.calibrate.benchmarks import check_runs, fit_runs, one_engine, profile_yaml
    from pdplan.io.benchmark_results import read_benchmark_results
    from pdplan.report.calibrate_runs import runs_view
    from pdplan.report.render import write_atomic

    catalog = catalog_from(hardware_db, [kernel_table] if kernel_table is not None else None)
    runs = read_benchmark_results(files, flags)
    if kernel_table is not None:
        from pdplan.calibrate.host_terms import table_host_note
        from pdplan.io.kernel_tables import load_kernel_table

        note = table_host_note(load_kernel_table(kernel_table).framework.decode_step_overhead_s, str(kernel_table))
        if note is not None:
            warn(note)
    taken = sorted({f for run in runs for f in run.from_flags})
    if taken:
        count = sum(1 for run in runs if run.from_flags)
        warn(f"{', '.join(taken)} of {count} of {len(runs)} runs from the command line (their files do not say)")
    if check_only:
        emit(runs_view(check_runs(runs, catalog, flags.engine)), fmt, output)
        return
    engine = one_engine(runs)  # a profile holds one engine's overheads
    base = flags.engine or engine
    name = output.stem if output is not None else f"{Path(base).stem}-fitted"
    report = fit_runs(runs, catalog, base, files=[str(f) for f in files], name=name)
    if output is not None:
        write_atomic(output, profile_yaml(report.engine))
        stderr_console.print(f"wrote engine profile {output}", highlight=False, markup=False, soft_wrap=True)
    emit(runs_view(report), fmt, None)
