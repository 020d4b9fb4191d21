"""``pdplan evaluate`` (one deployment) and ``pdplan transfer`` (KV transfer of one request)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pdplan.cli_common import FormatOpt, HardwareDbOpt, KernelTablesOpt, OutputOpt, catalog_from, emit, warn
from pdplan.errors import SpecError
from pdplan.render import Format
from pdplan.specs.scenario import ScenarioOverrides, apply_overrides, load_scenario

if TYPE_CHECKING:
    from pdplan.serving import Evaluation

Opt = typer.Option


def evaluate_command(
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
    rate: Annotated[float | None, Opt("--rate", help="Poisson rate (req/s) to report at.")] = None,
    concurrency: Annotated[int | None, Opt("--concurrency", min=1,
                                           help="Closed loop: C clients.")] = None,
    dtype: Annotated[str | None, Opt("--dtype", help="bf16|fp8 weights/GEMMs.")] = None,
    kv_dtype: Annotated[str | None, Opt("--kv-dtype", help="bf16|fp8 KV cache.")] = None,
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Evaluate one deployment: goodput, binding constraint, and latencies at a rate.

    Example: pdplan evaluate examples/default.yaml --rate 8 --format json
    """
    from pdplan.serving import default_scenario_path, evaluate  # lazy: scipy loads in ~1 s

    if rate is not None and rate <= 0:
        raise SpecError("must be > 0", field="--rate")
    base = load_scenario(scenario or default_scenario_path())
    ov = ScenarioOverrides(
        model=model, gpu=gpu, prefill_gpu=prefill_gpu, decode_gpu=decode_gpu, tp=tp,
        prefill_tp=prefill_tp, decode_tp=decode_tp, xpyd=xpyd, colocated=colocated,
        scheduler=scheduler, link=link, granularity=granularity, routing=routing, isl=isl,
        osl=osl, workload=workload, ttft_slo=ttft_slo, tpot_slo=tpot_slo,
        attainment=attainment, dtype=dtype, kv_dtype=kv_dtype)
    sc = apply_overrides(base, ov)
    result = evaluate(sc, catalog=catalog_from(hardware_db, kernel_tables), rate=rate, concurrency=concurrency)
    for line in result.warnings:
        warn(line)
    emit(fmt, output, records=evaluation_records(result), document=result.to_document(),
         columns=["quantity", "value"], title=f"pdplan evaluate — {result.name or 'scenario'}")


def evaluation_records(ev: Evaluation) -> list[dict[str, Any]]:
    """Two-column quantity/value rows for the table, CSV and Markdown views (human units)."""
    rows: list[tuple[str, Any]] = [("mode", ev.mode), ("model", ev.model)]
    for role in ("prefill", "decode", "colocated"):
        spec = ev.deployment.get(role)
        if spec:
            extra = f" {spec['scheduler']}" if "scheduler" in spec else ""
            rows.append((role, f"{spec['count']}× {spec['gpu']} TP{spec['tp']} PP{spec['pp']}"
                         f"{extra}"))
    rows += [("num_gpus", ev.num_gpus), ("goodput_rps", ev.goodput_rps),
             ("goodput_rps_per_gpu", ev.goodput_rps_per_gpu),
             ("goodput_rps_per_usd_hour", ev.goodput_rps_per_usd_hour),
             ("stability_limit_rps", f"{ev.stability_limit_rps:.4g} ({ev.stability_binding})"),
             ("binding_constraint", ev.binding_constraint), ("convention", ev.convention)]
    op = ev.operating_point
    if ev.closed_loop is not None:
        rows += [("concurrency", ev.closed_loop.concurrency),
                 ("throughput_rps", ev.closed_loop.throughput_rps)]
    if op is not None:
        rows.append(("rate_rps", op.rate_rps))
        for name, summ in (("ttft", op.ttft_s), ("tpot", op.tpot_s)):
            rows += [(f"{name}_{k}_ms", v * 1e3) for k, v in summ.as_dict().items()]
        rows.append(("attainment", op.attainment))
        rows += [(f"utilisation_{k}", v) for k, v in op.utilisation.items()]
        rows.append(("operating_binding_constraint", op.binding_constraint))
    return [{"quantity": k, "value": v} for k, v in rows]


def transfer_command(
    model: Annotated[str, Opt("--model", help="Model name or path.")],
    tokens: Annotated[int, Opt("--tokens", min=1, help="Prompt tokens of the request.")],
    link: Annotated[str, Opt("--link", help="Link name or path.")],
    granularity: Annotated[str, Opt("--granularity", help="request|layer|chunk.")] = "request",
    prefill_tp: Annotated[int, Opt("--prefill-tp", min=1)] = 1,
    decode_tp: Annotated[int, Opt("--decode-tp", min=1)] = 1,
    gpu: Annotated[str | None, Opt("--gpu", help="GPU (prefill time for layer/chunk; "
                                   "HBM for TP re-layout).")] = None,
    kv_dtype: Annotated[str, Opt("--kv-dtype", help="bf16|fp8.")] = "bf16",
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """KV-cache transfer of one request: bytes, link time, and the part exposed in TTFT.

    Example: pdplan transfer --model opt-66b --tokens 512 --link ib-hdr --format json
    """
    from pdplan.serving.transfer_one import one_transfer

    doc = one_transfer(catalog_from(hardware_db, kernel_tables), model=model, tokens=tokens, link=link,
                       granularity=granularity, prefill_tp=prefill_tp, decode_tp=decode_tp,
                       gpu=gpu, kv_dtype=kv_dtype)
    emit(fmt, output, records=[{"quantity": k, "value": v} for k, v in doc.items()],
         document=doc, columns=["quantity", "value"], title="pdplan transfer")

