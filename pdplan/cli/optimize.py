"""``pdplan optimize``: the main job — search deployments and write a capacity-review report."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, get_args

import typer

from pdplan.cli.common import (
    FormatOpt,
    HardwareDbOpt,
    KernelTablesOpt,
    OutputOpt,
    catalog_from,
    prepare_output,
    stderr_console,
    warn,
    warn_granularity_not_run,
    warn_host_time_twice,
    with_progress,
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
from pdplan.specs.command_line import FLAGS, ScenarioOverrides

if TYPE_CHECKING:
    from pdplan.search.plans import PlanResult

Opt = typer.Option


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
    growth: Annotated[
        str | None,
        Opt(
            FLAGS["growth"],
            help="Re-plan at +P % traffic for each P (e.g. 20,50,100): the GPUs and $ each needs (a growth table).",
        ),
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
    from pdplan.io.overrides import instance_counts, search_scenario
    from pdplan.search.growth import growth_rows, parse_growth
    from pdplan.search.optimize import optimize  # lazy: scipy loads in ~1 s
    from pdplan.types import Objective

    fmt = prepare_output(fmt, output)
    if plot is not None:
        from pdplan.report.plot import check_plot_path  # lazy: only a plot needs the plot module

        check_plot_path(plot)
    positive_rate(rate)
    growths = parse_growth(growth, FLAGS["growth"])
    objective = objective.lower() if objective is not None else None
    counts, colocated = instance_counts(overrides)
    if objective is not None and objective not in get_args(Objective):
        raise SpecError(f"{objective!r} is not one of {', '.join(get_args(Objective))}", field="--objective")
    sc = search_scenario(load_scenario_arg(scenario), overrides)
    analyse = fmt in (Format.markdown, Format.json) or plot is not None
    catalog = catalog_from(hardware_db, kernel_tables)
    warn_host_time_twice(catalog, sc)

    def search(rate_rps: float | None, budget: int | None, top_k: int, extras: bool) -> PlanResult:
        return with_progress(
            "optimizing",
            lambda stage: optimize(
                sc,
                catalog=catalog,
                budget_gpus=budget,
                rate_rps=rate_rps,
                objective=objective,
                top=top_k,
                analyse=extras,
                xpyd=counts,
                colocated_count=colocated,
                headroom=headroom,
                redundancy=redundancy,
                prices=parse_prices(price),
                budget_usd_per_hour=budget_usd_per_hour,
                stage=stage,
            ),
        )

    result = search(rate, gpus, top, analyse)
    warn_granularity_not_run(catalog, sc, search=True)  # after the result: an infeasible search stays one error line
    if growths:  # the same search as a rate target at each grown rate (a GPU budget would cap the growth)
        result = replace(result, growth=growth_rows(result, growths, lambda r: search(r, None, 1, False)))
    _report(result, fmt, output, plot)


def _report(result: PlanResult, fmt: Format, output: Path | None, plot: Path | None) -> None:
    """Warnings on stderr, the plot file if asked, the report (Markdown embeds the plot)."""
    from pdplan.report import render_optimize
    from pdplan.report.common import all_warnings

    # the table's warnings go to stderr (its own list: all_warnings); the other formats carry theirs in the report
    for line in all_warnings(result) if fmt is Format.table else result.warnings:
        warn(line)
    chart = None
    if plot is not None:
        from pdplan.report import write_plot  # lazy: only a plot needs the plot module

        write_plot(result, plot)
        stderr_console.print(f"wrote {plot}", highlight=False, markup=False, soft_wrap=True)
        chart = chart_link(plot, output)
    write_rendered(render_optimize(result, fmt, chart=chart, inline_warnings=False), output)


def chart_link(plot: Path, output: Path | None) -> str:
    """The plot's path as the Markdown links it: relative to the report's folder (the working folder for stdout),
    with forward slashes."""
    import os

    folder = output.parent if output is not None else Path(".")
    return Path(os.path.relpath(plot.resolve(), folder.resolve())).as_posix()
