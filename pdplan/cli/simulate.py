"""``pdplan simulate``: the closed form of ``evaluate`` next to a discrete-event simulation."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

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
from pdplan.specs.ceilings import MAX_REQUESTS
from pdplan.specs.command_line import FLAGS, ScenarioOverrides

if TYPE_CHECKING:
    from pdplan.sim.compare import Comparison

Opt = typer.Option
StepOpt = Annotated[
    str,
    Opt(
        "--step",
        help="Decode step in the simulator: linear (as the closed form) | roofline (slower; tests the linear fit too).",
    ),
]
SessionStartOpt = Annotated[
    str,
    Opt(
        "--session-start",
        help="A sessions workload's sessions in progress at t = 0: measured (placed with the run's own mean turn "
        "latency, 2-6 runs: offers the nominal rate but for the sample) | zero (as if turns took no time: one run, "
        "offers less than the nominal rate where turns are long against the think time).",
    ),
]


@takes_overrides
def simulate_command(
    scenario: ScenarioArg = None,
    *,
    overrides: ScenarioOverrides,
    rate: RateOpt = None,
    concurrency: ConcurrencyOpt = None,
    requests: Annotated[int, Opt("--requests", min=100, max=MAX_REQUESTS, help="Simulated requests per run.")] = 20_000,
    seed: Annotated[int, Opt("--seed", min=0, help="Seed of lengths, arrivals, routing.")] = 0,
    goodput: Annotated[
        bool, Opt("--goodput", help="Also find the simulated goodput (bisection on rate, ~8 runs).")
    ] = False,
    step: StepOpt = "linear",
    session_start: SessionStartOpt = "measured",
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Simulate one deployment and compare it with the closed form of `evaluate`.

    A sessions workload's run prints the rate its counted requests offered (offered_rps) beside the rate the closed
    form is evaluated at, and warns where they differ by more than 5 %.

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
    start = session_start.lower()
    if start not in ("measured", "zero"):
        raise SpecError(f"{session_start!r} is not one of measured, zero", field="--session-start")
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
            turn_latency_s=None if start == "measured" else 0.0,
        ),
    )
    for line in result.evaluation.warnings:
        warn(line)
    offered = offered_gap(result)
    if offered is not None:
        warn(offered)
    view = comparison_view(result)
    rows = list(view.records)
    last = len(rows) - 1 if rows and rows[-1]["quantity"] == "seconds" else len(rows)  # the run time stays last
    emit(dataclasses.replace(view, records=[*rows[:last], *cache_records(result), *rows[last:]]), fmt, output)


def cache_records(result: Comparison) -> list[dict[str, Any]]:
    """A KV-reuse workload's prefix cache, closed form beside the simulation: the token hit ratio of every tier (and
    all together), and the share of requests with a hit (simulated only); sessions on xPyD add the turn placement's
    rows (:data:`TURN_ROWS`, simulated only), a tier behind storage NICs on xPyD the decode path's share of the bytes
    read and the busiest storage NIC of each side (:data:`SNICS`). None for other workloads."""
    if result.reuse is None:
        return []
    sim = result.reuse
    cache = result.evaluation.cache
    closed = {} if cache is None else {t.name: t.token_hit_ratio for t in cache.tiers}

    def row(name: str, closed_value: float | None, sim_value: float) -> dict[str, Any]:
        rel = None if closed_value is None or sim_value == 0 else closed_value / sim_value - 1.0
        return {"quantity": name, "closed_form": closed_value, "simulated": sim_value, "rel_error": rel}

    rows = [row("token_hit_ratio", None if cache is None else cache.token_hit_ratio, sim["token_hit_ratio"])]
    rows += [row(f"token_hit_ratio_{t['name']}", closed.get(t["name"]), t["token_hit_ratio"]) for t in sim["tiers"]]
    rows.append(row("request_hit_share", None, sim["request_hit_share"]))
    rate = result.settings.get("rate_rps")
    if sim.get("offered_rps") is not None and rate is not None:
        rows.append(row("offered_rps", rate, sim["offered_rps"]))
    turns = sim.get("turn_placement")
    if turns is not None:
        rows += [row(key, None, turns[key]) for key in TURN_ROWS if turns[key] is not None]
    reads = sim.get("read_paths")
    if reads is not None:
        dual = None if cache is None else cache.dual_path
        use = {} if dual is None else dual.utilisation
        rows.append(row("read_paths_de_share", None if dual is None else dual.de_fraction, reads["de_share"]))
        rows += [
            row(f"read_paths_{k.replace(' ', '_')}_utilisation", use.get(k), reads["utilisation"][k]) for k in SNICS
        ]
    return rows


OFFERED_REL_TOL = 0.05
"""``pdplan simulate`` warns where a sessions run's offered rate is off the nominal one by more than this share."""


def offered_gap(result: Comparison) -> str | None:
    """A warning where a sessions run's counted requests offered a rate more than :data:`OFFERED_REL_TOL` off the
    nominal rate the closed form is evaluated at (the sessions' sample, or ``--session-start zero`` at a load
    where turns take long against the think time: :mod:`pdplan.sim.reuse_sessions`, Stationary start); None
    otherwise."""
    sim, rate = result.reuse, result.settings.get("rate_rps")
    offered = None if sim is None else sim.get("offered_rps")
    if offered is None or rate is None or abs(offered / rate - 1.0) <= OFFERED_REL_TOL:
        return None
    return (
        f"the simulated sessions offered {offered:.4g} req/s against the nominal {rate:.4g} req/s the closed form is "
        f"evaluated at ({offered / rate - 1.0:+.1%}; session start {result.settings.get('session_start')}): compare "
        "the two at the offered rate (pdplan evaluate --rate), or simulate more requests"
    )


SNICS = ("PE SNIC", "DE SNIC")
"""The storage NICs whose busiest utilisation a run with storage read paths shows (:mod:`pdplan.sim.storage_paths`;
the closed form's ``cache.dual_path`` figure beside it where the scenario reads ``dual``)."""


TURN_ROWS = (
    "ttft_turn1_p50_s",
    "ttft_turn1_p90_s",
    "ttft_turn2_p50_s",
    "ttft_turn2_p90_s",
    "share_on_decode",
    "decode_hit_ratio",
    "pd_kv_bytes_per_s",
    "transfer_reduction",
)
"""Rows of a multi-turn run's turn placement (PPD, :mod:`pdplan.sim.turn_stats`), simulated only."""
