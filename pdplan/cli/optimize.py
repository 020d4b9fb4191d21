"""``pdplan optimize``: the main job — search deployments and write a capacity-review report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from pdplan.cli.common import (
    FormatOpt,
    HardwareDbOpt,
    KernelTablesOpt,
    OutputOpt,
    catalog_from,
    stderr_console,
    warn,
    write_renderable,
    write_text,
)
from pdplan.cli.options import (
    AttainmentOpt,
    DtypeOpt,
    IslOpt,
    KvDtypeOpt,
    ModelOpt,
    OslOpt,
    ScenarioArg,
    TpotSloOpt,
    TtftSloOpt,
    WorkloadOpt,
    positive_rate,
    scenario_from_flags,
)
from pdplan.errors import SpecError
from pdplan.io.overrides import ScenarioOverrides, parse_xpyd
from pdplan.report.render import Format

if TYPE_CHECKING:
    from pdplan.search.results import PlanResult

Opt = typer.Option


def _progress() -> Progress:
    """A transient progress display on stderr (silent when stderr is not a terminal)."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=stderr_console,
        transient=True,
        disable=not stderr_console.is_terminal,
    )


def optimize_command(
    scenario: ScenarioArg = None,
    gpus: Annotated[int | None, Opt("--gpus", min=1, help="GPU budget: maximise goodput per GPU within it.")] = None,
    rate: Annotated[float | None, Opt("--rate", help="Target req/s: meet it at the fewest GPUs or lowest $.")] = None,
    objective: Annotated[str | None, Opt("--objective", help="gpus | cost | tokens-per-dollar.")] = None,
    top: Annotated[int, Opt("--top", min=1, max=50, help="Plans to report.")] = 5,
    plot: Annotated[
        Path | None, Opt("--plot", help="Also draw the Pareto front and latency-vs-rate (PNG/SVG).", dir_okay=False)
    ] = None,
    model: ModelOpt = None,
    gpu: Annotated[str | None, Opt("--gpu", help="GPU(s) for both roles, comma-separated.")] = None,
    prefill_gpu: Annotated[str | None, Opt("--prefill-gpu", help="Prefill GPU(s), comma-separated.")] = None,
    decode_gpu: Annotated[str | None, Opt("--decode-gpu", help="Decode GPU(s), comma-separated.")] = None,
    tp: Annotated[int | None, Opt("--tp", min=1, help="Only this TP degree.")] = None,
    prefill_tp: Annotated[int | None, Opt("--prefill-tp", min=1)] = None,
    decode_tp: Annotated[int | None, Opt("--decode-tp", min=1)] = None,
    link: Annotated[str | None, Opt("--link", help="KV link(s), comma-separated.")] = None,
    granularity: Annotated[str | None, Opt("--granularity", help="request|layer|chunk (comma-separated).")] = None,
    routing: Annotated[str | None, Opt("--routing", help="random|round-robin|least-work.")] = None,
    scheduler: Annotated[str | None, Opt("--scheduler", help="Colocated baseline: prefill-first|chunked.")] = None,
    xpyd: Annotated[str | None, Opt("--xpyd", help="Only plans with these counts, e.g. 2P1D.")] = None,
    colocated: Annotated[int | None, Opt("--colocated", min=1, help="Only N colocated instances.")] = None,
    isl: IslOpt = None,
    osl: OslOpt = None,
    workload: WorkloadOpt = None,
    ttft_slo: TtftSloOpt = None,
    tpot_slo: TpotSloOpt = None,
    attainment: AttainmentOpt = None,
    dtype: DtypeOpt = None,
    kv_dtype: KvDtypeOpt = None,
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Search xPyD deployments (and the colocated baseline) for the best plan under the SLO.

    Example: pdplan optimize examples/h100-prefill-l40s-decode.yaml --rate 20 --objective cost --format markdown
    """
    from pdplan.report import write_plot  # lazy: scipy loads in ~1 s
    from pdplan.search.optimize import optimize
    from pdplan.search.overrides import SearchOverrides, with_search_overrides

    positive_rate(rate)
    if xpyd is not None and colocated is not None:
        raise SpecError("give either --xpyd or --colocated, not both", field="--xpyd")
    counts = parse_xpyd(xpyd) if xpyd is not None else None
    if objective is not None and objective not in ("gpus", "cost", "tokens-per-dollar"):
        raise SpecError(f"{objective!r} is not one of gpus, cost, tokens-per-dollar", field="--objective")
    sc = scenario_from_flags(
        scenario,
        ScenarioOverrides(
            model=model,
            isl=isl,
            osl=osl,
            workload=workload,
            ttft_slo=ttft_slo,
            tpot_slo=tpot_slo,
            attainment=attainment,
            dtype=dtype,
            kv_dtype=kv_dtype,
        ),
    )
    sc = with_search_overrides(
        sc, SearchOverrides(gpu, prefill_gpu, decode_gpu, tp, prefill_tp, decode_tp, link, granularity, routing)
    )
    sc = with_search_overrides(sc, SearchOverrides(scheduler=scheduler))
    analyse = fmt in (Format.markdown, Format.json) or plot is not None
    with _progress() as progress:
        task = progress.add_task("optimizing", total=None)
        result = optimize(
            sc,
            catalog=catalog_from(hardware_db, kernel_tables),
            budget_gpus=gpus,
            rate_rps=rate,
            objective=objective,
            top=top,
            analyse=analyse,
            xpyd=counts,
            colocated_count=colocated,
            stage=lambda name: progress.update(task, description=name),
        )
    if fmt is not Format.table:  # the table view lists the warnings itself
        for line in result.warnings:
            warn(line)
    if plot is not None:
        write_plot(result, plot)
        stderr_console.print(f"wrote {plot}", highlight=False, markup=False, soft_wrap=True)
    _emit(result, fmt, output)


def _emit(result: PlanResult, fmt: Format, output: Path | None) -> None:
    from pdplan.report import render_optimize

    rendered = render_optimize(result, fmt)
    if isinstance(rendered, str):
        write_text(rendered, output)
    else:
        write_renderable(rendered, output)
