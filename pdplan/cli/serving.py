"""``pdplan evaluate`` (one deployment) and ``pdplan transfer`` (KV transfer of one request)."""

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
from pdplan.io.overrides import ScenarioOverrides
from pdplan.report.render import Format

if TYPE_CHECKING:
    from pdplan.serving import Evaluation

Opt = typer.Option


def evaluate_command(
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
    rate: Annotated[float | None, Opt("--rate", help="Poisson rate (req/s) to report at.")] = None,
    concurrency: ConcurrencyOpt = None,
    dtype: DtypeOpt = None,
    kv_dtype: KvDtypeOpt = None,
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Evaluate one deployment: goodput, binding constraint, and latencies at a rate.

    Example: pdplan evaluate examples/default.yaml --rate 8 --format json
    """
    from pdplan.serving import evaluate  # lazy: scipy loads in ~1 s

    positive_rate(rate)
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
    result = evaluate(sc, catalog=catalog_from(hardware_db, kernel_tables), rate=rate, concurrency=concurrency)
    for line in result.warnings:
        warn(line)
    emit(
        fmt,
        output,
        records=evaluation_records(result),
        document=result.to_document(),
        columns=["quantity", "value"],
        title=f"pdplan evaluate — {result.name or 'scenario'}",
    )


def evaluation_records(ev: Evaluation) -> list[dict[str, Any]]:
    """Two-column quantity/value rows for the table, CSV and Markdown views (human units)."""
    rows: list[tuple[str, Any]] = [("mode", ev.mode), ("model", ev.model)]
    for role in ("prefill", "decode", "colocated"):
        spec = ev.deployment.get(role)
        if spec:
            extra = f" {spec['scheduler']}" if "scheduler" in spec else ""
            rows.append((role, f"{spec['count']}× {spec['gpu']} TP{spec['tp']} PP{spec['pp']}{extra}"))
    rows += [
        ("num_gpus", ev.num_gpus),
        ("goodput_rps", ev.goodput_rps),
        ("goodput_rps_per_gpu", ev.goodput_rps_per_gpu),
        ("goodput_rps_per_usd_hour", ev.goodput_rps_per_usd_hour),
        ("stability_limit_rps", f"{ev.stability_limit_rps:.4g} ({ev.stability_binding})"),
        ("binding_constraint", ev.binding_constraint),
        ("convention", ev.convention),
    ]
    op = ev.operating_point
    if ev.closed_loop is not None:
        rows += [("concurrency", ev.closed_loop.concurrency), ("throughput_rps", ev.closed_loop.throughput_rps)]
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
    gpu: Annotated[str | None, Opt("--gpu", help="GPU (prefill time for layer/chunk; HBM for TP re-layout).")] = None,
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

    doc = one_transfer(
        catalog_from(hardware_db, kernel_tables),
        model=model,
        tokens=tokens,
        link=link,
        granularity=granularity,
        prefill_tp=prefill_tp,
        decode_tp=decode_tp,
        gpu=gpu,
        kv_dtype=kv_dtype,
    )
    emit(
        fmt,
        output,
        records=[{"quantity": k, "value": v} for k, v in doc.items()],
        document=doc,
        columns=["quantity", "value"],
        title="pdplan transfer",
    )
