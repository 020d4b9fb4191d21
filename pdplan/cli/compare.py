"""``pdplan compare``: chosen plans side by side, from plan files and/or one search per ``--gpu`` in one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdplan.cli.common import (
    FormatOpt,
    HardwareDbOpt,
    KernelTablesOpt,
    OutputOpt,
    catalog_from,
    prepare_output,
    warn,
    with_progress,
    write_rendered,
)
from pdplan.cli.options import HeadroomOpt, PriceOpt, RateOpt, load_scenario_arg, parse_prices, positive_rate
from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.report.render import Format
from pdplan.specs.command_line import FLAGS, ScenarioOverrides

if TYPE_CHECKING:
    from pdplan.report.compare import CompareEntry

Opt = typer.Option


def compare_command(
    plans: Annotated[
        list[Path] | None,
        typer.Argument(metavar="[PLAN.json]...", help="`pdplan optimize --format json` outputs.", dir_okay=False),
    ] = None,
    gpu: Annotated[
        list[str] | None,
        Opt(FLAGS["gpu"], help="Search the scenario on this GPU type (repeatable: one search per --gpu)."),
    ] = None,
    scenario: Annotated[
        Path | None, Opt("--scenario", help="Scenario of the --gpu searches (default: bundled).", dir_okay=False)
    ] = None,
    rank: Annotated[int, Opt("--rank", min=1, help="Which ranked plan of each file (1 = the recommended one).")] = 1,
    rate: RateOpt = None,
    gpus: Annotated[int | None, Opt(FLAGS["gpus"], min=1, help="--gpu searches: a GPU budget.")] = None,
    objective: Annotated[
        str | None, Opt(FLAGS["objective"], help="--gpu searches: gpus | cost | tokens-per-dollar.")
    ] = None,
    headroom: HeadroomOpt = None,
    price: PriceOpt = None,
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Compare chosen plans side by side: GPUs, $/h, $/month, $/year, goodput, TTFT/TPOT P90, binding constraint,
    headroom.

    Example: pdplan compare --gpu h100-sxm --gpu h200-sxm --rate 20
    """
    from pdplan.report.compare import render_compare

    fmt = prepare_output(fmt, output)
    positive_rate(rate)
    if not plans and not gpu:
        raise SpecError("give PLAN.json files or --gpu NAME (one search per GPU type) to compare", field="compare")
    entries = [_file_entry(path, rank) for path in plans or []]
    for name in gpu or []:
        entries.append(
            _search_entry(name, scenario, rate, gpus, objective, headroom, price, hardware_db, kernel_tables)
        )
    if all(e.plan is None for e in entries):
        reasons = "; ".join(f"{e.source}: {e.infeasible}" for e in entries)
        raise NoFeasiblePlanError(f"no feasible plan to compare ({reasons})", binding_constraint=reasons)
    for e in entries:
        if e.plan is None:
            warn(f"{e.source}: no feasible plan ({e.infeasible})")
    write_rendered(render_compare(entries, fmt), output)


def _file_entry(path: Path, rank: int) -> CompareEntry:
    """Plan ``rank`` of the ``optimize --format json`` file ``path`` (SpecError naming the file: exit 2)."""
    from pdplan.io.export_data import read_plan_document
    from pdplan.io.files import read_text_file
    from pdplan.report.compare import CompareEntry

    doc = read_plan_document(str(path))  # validates: one line naming the file when it is not a plan document
    if rank > len(doc.plans):
        raise SpecError(f"--rank {rank} but the file has {len(doc.plans)} plans", source=str(path))
    raw: dict[str, Any] = json.loads(read_text_file(path))
    planning = raw.get("planning")
    headroom = planning.get("headroom") if isinstance(planning, dict) else None
    return CompareEntry(
        source=str(path),
        plan=doc.plans[rank - 1],
        headroom=float(headroom) if isinstance(headroom, int | float) else None,
        rank=rank,
    )


def _search_entry(
    gpu: str,
    scenario: Path | None,
    rate: float | None,
    gpus: int | None,
    objective: str | None,
    headroom: float | None,
    price: list[str] | None,
    hardware_db: list[Path] | None,
    kernel_tables: list[Path] | None,
) -> CompareEntry:
    """The recommended plan of ``optimize`` on the scenario with ``--gpu gpu``; a search with no feasible plan
    (exit 3 alone) is an entry that says why."""
    from pdplan.io.overrides import search_scenario
    from pdplan.report.compare import CompareEntry
    from pdplan.search.optimize import optimize  # lazy: scipy loads in ~1 s

    sc = search_scenario(load_scenario_arg(scenario), ScenarioOverrides(gpu=gpu))
    source = f"{FLAGS['gpu']} {gpu}"
    try:
        result = with_progress(
            f"optimizing on {gpu}",
            lambda stage: optimize(
                sc,
                catalog=catalog_from(hardware_db, kernel_tables),
                budget_gpus=gpus,
                rate_rps=rate,
                objective=objective.lower() if objective else None,
                top=1,
                analyse=False,
                headroom=headroom,
                prices=parse_prices(price),
                stage=stage,
            ),
        )
    except NoFeasiblePlanError as err:
        return CompareEntry(source=source, plan=None, headroom=headroom, infeasible=str(err))
    return CompareEntry(source=source, plan=result.best.to_document(), headroom=result.planning.headroom, rank=1)
