"""``pdplan simulate``: the closed form of ``evaluate`` next to a discrete-event simulation."""

from __future__ import annotations

from typing import Annotated

import typer

from pdplan.cli.common import (
    FormatOpt,
    HardwareDbOpt,
    KernelTablesOpt,
    OutputOpt,
    catalog_from,
    emit,
    warn,
    with_progress,
)
from pdplan.cli.options import (
    ConcurrencyOpt,
    RateOpt,
    ScenarioArg,
    start_scenario,
    takes_overrides,
)
from pdplan.errors import SpecError
from pdplan.report.render import Format
from pdplan.specs.command_line import FLAGS, ScenarioOverrides

Opt = typer.Option
StepOpt = Annotated[
    str,
    Opt(
        "--step",
        help="Decode step in the simulator: linear (as the closed form) | roofline (slower; tests the linear fit too).",
    ),
]


@takes_overrides
def simulate_command(
    scenario: ScenarioArg = None,
    *,
    overrides: ScenarioOverrides,
    rate: RateOpt = None,
    concurrency: ConcurrencyOpt = None,
    requests: Annotated[int, Opt("--requests", min=100, help="Simulated requests per run.")] = 20_000,
    seed: Annotated[int, Opt("--seed", min=0, help="Seed of lengths, arrivals, routing.")] = 0,
    goodput: Annotated[
        bool, Opt("--goodput", help="Also find the simulated goodput (bisection on rate, ~8 runs).")
    ] = False,
    step: StepOpt = "linear",
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Simulate one deployment and compare it with the closed form of `evaluate`.

    Example: pdplan simulate examples/default.yaml --rate 8 --goodput --format json
    """
    from pdplan.report.serving import comparison_view
    from pdplan.sim.compare import simulate_scenario
    from pdplan.sim.trace_replay import replays_trace

    fmt, sc = start_scenario(scenario, overrides, fmt, output, rate)
    if rate is None and concurrency is None and not goodput and not replays_trace(sc.workload):
        raise SpecError("give --rate R or --concurrency C (or --goodput)", field=FLAGS["rate"])
    step = step.lower()
    if step not in ("linear", "roofline"):
        raise SpecError(f"{step!r} is not one of linear, roofline", field="--step")
    result = with_progress(
        "simulating",
        lambda stage: simulate_scenario(
            sc,
            catalog=catalog_from(hardware_db, kernel_tables),
            rate=rate,
            concurrency=concurrency,
            n_requests=requests,
            seed=seed,
            goodput=goodput,
            step="roofline" if step == "roofline" else "linear",
            stage=stage,
        ),
    )
    for line in result.evaluation.warnings:
        warn(line)
    emit(comparison_view(result), fmt, output)
