"""``pdplan simulate``: the closed form of ``evaluate`` next to a discrete-event simulation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdplan.cli.common import FormatOpt, HardwareDbOpt, KernelTablesOpt, OutputOpt, catalog_from, emit, warn
from pdplan.cli.options import (
    AttainmentOpt,
    ColocatedOpt,
    ConcurrencyOpt,
    DecodeGpuOpt,
    DecodeTpOpt,
    DtypeOpt,
    GpuOpt,
    GranularityOpt,
    IslOpt,
    KvDtypeOpt,
    LinkOpt,
    ModelOpt,
    OslOpt,
    PrefillGpuOpt,
    PrefillTpOpt,
    RoutingOpt,
    ScenarioArg,
    SchedulerOpt,
    TpOpt,
    TpotSloOpt,
    TtftSloOpt,
    WorkloadOpt,
    XpydOpt,
    positive_rate,
    scenario_from_flags,
)
from pdplan.errors import SpecError
from pdplan.io.overrides import ScenarioOverrides
from pdplan.report.render import Format

if TYPE_CHECKING:
    from pdplan.sim.compare import Comparison

Opt = typer.Option


def simulate_command(
    scenario: ScenarioArg = None,
    model: ModelOpt = None,
    gpu: GpuOpt = None,
    prefill_gpu: PrefillGpuOpt = None,
    decode_gpu: DecodeGpuOpt = None,
    tp: TpOpt = None,
    prefill_tp: PrefillTpOpt = None,
    decode_tp: DecodeTpOpt = None,
    xpyd: XpydOpt = None,
    colocated: ColocatedOpt = None,
    scheduler: SchedulerOpt = None,
    link: LinkOpt = None,
    granularity: GranularityOpt = None,
    routing: RoutingOpt = None,
    isl: IslOpt = None,
    osl: OslOpt = None,
    workload: WorkloadOpt = None,
    ttft_slo: TtftSloOpt = None,
    tpot_slo: TpotSloOpt = None,
    attainment: AttainmentOpt = None,
    rate: Annotated[float | None, Opt("--rate", help="Poisson rate (req/s).")] = None,
    concurrency: ConcurrencyOpt = None,
    dtype: DtypeOpt = None,
    kv_dtype: KvDtypeOpt = None,
    requests: Annotated[int, Opt("--requests", min=100, help="Simulated requests per run.")] = 20_000,
    seed: Annotated[int, Opt("--seed", min=0, help="Seed of lengths, arrivals, routing.")] = 0,
    goodput: Annotated[
        bool, Opt("--goodput", help="Also find the simulated goodput (bisection on rate, ~8 runs).")
    ] = False,
    step: Annotated[
        str,
        Opt(
            "--step",
            help="Decode step in the simulator: linear (as the "
            "closed form) | roofline (slower; tests the linear fit too).",
        ),
    ] = "linear",
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Simulate one deployment and compare it with the closed form of `evaluate`.

    Example: pdplan simulate examples/default.yaml --rate 8 --goodput --format json
    """
    from pdplan.sim.compare import simulate_scenario

    positive_rate(rate)
    if rate is None and concurrency is None and not goodput:
        raise SpecError("give --rate R or --concurrency C (or --goodput)", field="--rate")
    sc = scenario_from_flags(
        scenario,
        ScenarioOverrides(
            model=model,
            gpu=gpu,
            prefill_gpu=prefill_gpu,
            decode_gpu=decode_gpu,
            tp=tp,
            prefill_tp=prefill_tp,
            decode_tp=decode_tp,
            xpyd=xpyd,
            colocated=colocated,
            scheduler=scheduler,
            link=link,
            granularity=granularity,
            routing=routing,
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
    if step not in ("linear", "roofline"):
        raise SpecError(f"{step!r} is not one of linear, roofline", field="--step")
    result = simulate_scenario(
        sc,
        catalog=catalog_from(hardware_db, kernel_tables),
        rate=rate,
        concurrency=concurrency,
        n_requests=requests,
        seed=seed,
        goodput=goodput,
        step="roofline" if step == "roofline" else "linear",
    )
    for line in result.evaluation.warnings:
        warn(line)
    emit(
        fmt,
        output,
        records=comparison_records(result),
        document=result.to_document(),
        columns=["quantity", "closed_form", "simulated", "rel_error"],
        title=f"pdplan simulate — {result.evaluation.name or 'scenario'}",
    )


def comparison_records(cmp: Comparison) -> list[dict[str, Any]]:
    """Rows quantity / closed form / simulated / relative error (latencies in ms)."""
    rows: list[dict[str, Any]] = []
    err = cmp.relative_error()

    def add(name: str, closed: Any, sim: Any, rel: Any, scale: float = 1.0) -> None:
        rows.append(
            {
                "quantity": name,
                "closed_form": None if closed is None else closed * scale,
                "simulated": None if sim is None else sim * scale,
                "rel_error": rel,
            }
        )

    if cmp.simulated is not None:
        sim = cmp.simulated.as_dict()
        add("rate_rps", cmp.closed_form["rate_rps"], sim["rate_rps"], None)
        for key in ("ttft_s", "tpot_s"):
            for stat, value in cmp.closed_form[key].items():
                add(f"{key[:-2]}_{stat}_ms", value, sim[key][stat], err[key][stat], 1e3)
        add("attainment", cmp.closed_form["attainment"], sim["attainment"], err["attainment"])
        for k, v in cmp.closed_form["utilisation"].items():
            add(f"utilisation_{k}", v, sim["utilisation"].get(k), err["utilisation"].get(k))
    add("goodput_rps", cmp.goodput_closed_rps, cmp.goodput_simulated_rps, err.get("goodput_rps"))
    add("seconds", None, cmp.seconds, None)
    return rows
