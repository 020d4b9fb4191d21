"""``pdplan optimize``: the main job — search deployments and write a capacity-review report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, get_args

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
    write_rendered,
)
from pdplan.cli.options import (
    BudgetUsdOpt,
    HeadroomOpt,
    PriceOpt,
    RateOpt,
    RedundancyOpt,
    ScenarioArg,
    load_scenario_arg,
    parse_prices,
    positive_rate,
    takes_overrides,
)
from pdplan.errors import SpecError
from pdplan.report.render import Format
from pdplan.specs.overrides import FLAGS, ScenarioOverrides

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


@takes_overrides
def optimize_command(
    scenario: ScenarioArg = None,
    gpus: Annotated[
        int | None, Opt(FLAGS["gpus"], min=1, help="GPU budget: maximise goodput per GPU within it.")
    ] = None,
    rate: RateOpt = None,
    objective: Annotated[str | None, Opt("--objective", help="gpus | cost | tokens-per-dollar.")] = None,
    top: Annotated[int, Opt("--top", min=1, max=50, help="Plans to report.")] = 5,
    plot: Annotated[
        Path | None,
        Opt(FLAGS["plot"], help="Also draw the Pareto front and latency-vs-rate (PNG/SVG).", dir_okay=False),
    ] = None,
    *,
    overrides: ScenarioOverrides,
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    headroom: HeadroomOpt = None,
    redundancy: RedundancyOpt = None,
    price: PriceOpt = None,
    budget_usd_per_hour: BudgetUsdOpt = None,
) -> None:
    """Search xPyD deployments (and the colocated baseline) for the best plan under the SLO.

    Example: pdplan optimize examples/h100-prefill-l40s-decode.yaml --rate 20 --objective cost --format markdown
    """
    from pdplan.search.optimize import optimize  # lazy: scipy loads in ~1 s
    from pdplan.search.overrides import instance_counts, search_scenario
    from pdplan.types import Objective

    positive_rate(rate)
    counts, colocated = instance_counts(overrides)
    if objective is not None and objective not in get_args(Objective):
        raise SpecError(f"{objective!r} is not one of {', '.join(get_args(Objective))}", field="--objective")
    sc = search_scenario(load_scenario_arg(scenario), overrides)
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
            headroom=headroom,
            redundancy=redundancy,
            prices=parse_prices(price),
            budget_usd_per_hour=budget_usd_per_hour,
            stage=lambda name: progress.update(task, description=name),
        )
    _report(result, fmt, output, plot)


def _report(result: PlanResult, fmt: Format, output: Path | None, plot: Path | None) -> None:
    """Warnings on stderr (the table view lists them itself), the plot file if asked, the report."""
    from pdplan.report import render_optimize, write_plot

    if fmt is not Format.table:
        for line in result.warnings:
            warn(line)
    if plot is not None:
        write_plot(result, plot)
        stderr_console.print(f"wrote {plot}", highlight=False, markup=False, soft_wrap=True)
    write_rendered(render_optimize(result, fmt), output)
