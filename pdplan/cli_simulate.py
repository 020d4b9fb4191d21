"""``pdplan simulate``: the closed form of ``evaluate`` next to a discrete-event simulation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdplan.cli_common import FormatOpt, HardwareDbOpt, KernelTablesOpt, OutputOpt, catalog_from, emit, warn
from pdplan.errors import SpecError
from pdplan.render import Format
from pdplan.specs.scenario import ScenarioOverrides, apply_overrides, load_scenario

if TYPE_CHECKING:
    from pdplan.serving.simulate import Comparison

Opt = typer.Option


def simulate_command(
    scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (default: bundled).",
                                                    dir_okay=False)] = None,
    model: Annotated[str | None, Opt("--model", help="Model name or path.")] = None,
    gpu: Annotated[str | None, Opt("--gpu", help="GPU for both roles.")] = None,
    prefill_gpu: Annotated[str | None, Opt("--prefill-gpu")] = None,
    decode_gpu: Annotated[str | None, Opt("--decode-gpu")] = None,
    tp: Annotated[int | None, Opt("--tp", min=1, help="TP for both roles.")] = None,
    prefill_tp: Annotated[int | None, Opt("--prefill-tp", min=1)] = None,
    decode_tp: Annotated[int | None, Opt("--decode-tp", min=1)] = None,
    xpyd: Annotated[str | None, Opt("--xpyd", help="Disaggregated counts, e.g. 2P1D.")] = None,
    colocated: Annotated[int | None, Opt("--colocated", min=1,
                                         help="N colocated instances.")] = None,
    scheduler: Annotated[str | None, Opt("--scheduler", help="prefill-first|chunked.")] = None,
    link: Annotated[str | None, Opt("--link", help="KV link name or path.")] = None,
    granularity: Annotated[str | None, Opt("--granularity", help="request|layer|chunk.")] = None,
    routing: Annotated[str | None, Opt("--routing",
                                       help="random|round-robin|least-work.")] = None,
    isl: Annotated[int | None, Opt("--isl", min=1, help="Fixed input length.")] = None,
    osl: Annotated[int | None, Opt("--osl", min=1, help="Fixed output length.")] = None,
    workload: Annotated[str | None, Opt("--workload", help="Workload YAML or preset.")] = None,
    ttft_slo: Annotated[str | None, Opt("--ttft-slo", help="e.g. 2s, 250ms.")] = None,
    tpot_slo: Annotated[str | None, Opt("--tpot-slo", help="e.g. 100ms.")] = None,
    attainment: Annotated[float | None, Opt("--attainment", help="Target, e.g. 0.9.")] = None,
    rate: Annotated[float | None, Opt("--rate", help="Poisson rate (req/s).")] = None,
    concurrency: Annotated[int | None, Opt("--concurrency", min=1,
                                           help="Closed loop: C clients.")] = None,
    dtype: Annotated[str | None, Opt("--dtype", help="bf16|fp8 weights/GEMMs.")] = None,
    kv_dtype: Annotated[str | None, Opt("--kv-dtype", help="bf16|fp8 KV cache.")] = None,
    requests: Annotated[int, Opt("--requests", min=100,
                                 help="Simulated requests per run.")] = 20_000,
    seed: Annotated[int, Opt("--seed", min=0, help="Seed of lengths, arrivals, routing.")] = 0,
    goodput: Annotated[bool, Opt("--goodput", help="Also find the simulated goodput "
                                 "(bisection on rate, ~8 runs).")] = False,
    step: Annotated[str, Opt("--step", help="Decode step in the simulator: linear (as the "
                             "closed form) | roofline (slower; tests the linear fit too).")] = "linear",
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Simulate one deployment and compare it with the closed form of `evaluate`.

    Example: pdplan simulate examples/default.yaml --rate 8 --goodput --format json
    """
    from pdplan.serving import default_scenario_path
    from pdplan.serving.simulate import simulate_scenario

    if rate is not None and rate <= 0:
        raise SpecError("must be > 0", field="--rate")
    if rate is None and concurrency is None and not goodput:
        raise SpecError("give --rate R or --concurrency C (or --goodput)", field="--rate")
    base = load_scenario(scenario or default_scenario_path())
    ov = ScenarioOverrides(
        model=model, gpu=gpu, prefill_gpu=prefill_gpu, decode_gpu=decode_gpu, tp=tp,
        prefill_tp=prefill_tp, decode_tp=decode_tp, xpyd=xpyd, colocated=colocated,
        scheduler=scheduler, link=link, granularity=granularity, routing=routing, isl=isl,
        osl=osl, workload=workload, ttft_slo=ttft_slo, tpot_slo=tpot_slo,
        attainment=attainment, dtype=dtype, kv_dtype=kv_dtype)
    sc = apply_overrides(base, ov)
    if step not in ("linear", "roofline"):
        raise SpecError(f"{step!r} is not one of linear, roofline", field="--step")
    result = simulate_scenario(sc, catalog=catalog_from(hardware_db, kernel_tables), rate=rate,
                               concurrency=concurrency, n_requests=requests, seed=seed,
                               goodput=goodput, step="roofline" if step == "roofline" else "linear")
    for line in result.evaluation.warnings:
        warn(line)
    emit(fmt, output, records=comparison_records(result), document=result.to_document(),
         columns=["quantity", "closed_form", "simulated", "rel_error"],
         title=f"pdplan simulate — {result.evaluation.name or 'scenario'}")


def comparison_records(cmp: Comparison) -> list[dict[str, Any]]:
    """Rows quantity / closed form / simulated / relative error (latencies in ms)."""
    rows: list[dict[str, Any]] = []
    err = cmp.relative_error()

    def add(name: str, closed: Any, sim: Any, rel: Any, scale: float = 1.0) -> None:
        rows.append({"quantity": name,
                     "closed_form": None if closed is None else closed * scale,
                     "simulated": None if sim is None else sim * scale, "rel_error": rel})

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
