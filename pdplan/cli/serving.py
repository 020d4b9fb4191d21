"""``pdplan evaluate`` (one deployment) and ``pdplan transfer`` (KV transfer of one request)."""

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
    warn_granularity_not_run,
    warn_host_time_twice,
    with_progress,
    write_text,
)
from pdplan.cli.options import (
    ConcurrencyOpt,
    PriceOpt,
    RateOpt,
    RequestsOpt,
    ScenarioArg,
    WarmupOpt,
    parse_prices,
    start_scenario,
    takes_overrides,
)
from pdplan.report.render import Format
from pdplan.specs.command_line import ScenarioOverrides

Opt = typer.Option


@takes_overrides
def evaluate_command(
    scenario: ScenarioArg = None,
    *,
    overrides: ScenarioOverrides,
    rate: RateOpt = None,
    concurrency: ConcurrencyOpt = None,
    requests: RequestsOpt = None,
    warmup: WarmupOpt = None,
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    price: PriceOpt = None,
) -> None:
    """Evaluate one deployment: goodput, binding constraint, and latencies at a rate.

    Example: pdplan evaluate examples/default.yaml --rate 8 --format json
    """
    from pdplan.evaluation import evaluate
    from pdplan.report.serving import evaluation_view

    fmt, sc = start_scenario(scenario, overrides, fmt, output, rate)
    catalog = catalog_from(hardware_db, kernel_tables)
    warn_host_time_twice(catalog, sc)
    result = with_progress(
        "evaluating",
        lambda _stage: evaluate(
            sc,
            catalog=catalog,
            rate=rate,
            concurrency=concurrency,
            requests=requests,
            warmup=warmup,
            prices=parse_prices(price),
        ),
    )
    warn_granularity_not_run(catalog, sc, search=False)  # after the result: bad input stays one error line
    for line in result.warnings:
        warn(line)
    if fmt is Format.markdown:  # a one-deployment review, not the quantity table
        from pdplan.report.evaluate_markdown import evaluation_markdown

        write_text(evaluation_markdown(result), output)
        return
    emit(evaluation_view(result), fmt, output)


def transfer_command(
    model: Annotated[str, Opt("--model", help="Model name or path.")],
    tokens: Annotated[int | None, Opt("--tokens", min=1, help="Prompt tokens of the request.")] = None,
    link: Annotated[str | None, Opt("--link", help="Link name or path.")] = None,
    granularity: Annotated[str, Opt("--granularity", help="request|layer|chunk.")] = "request",
    prefill_tp: Annotated[int, Opt("--prefill-tp", min=1)] = 1,
    decode_tp: Annotated[int, Opt("--decode-tp", min=1)] = 1,
    gpu: Annotated[str | None, Opt("--gpu", help="GPU (prefill time for layer/chunk; HBM for TP re-layout).")] = None,
    kv_dtype: Annotated[str, Opt("--kv-dtype", help="bf16|fp8.")] = "bf16",
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    sweep: Annotated[
        str | None,
        Opt("--sweep", help="KV throughput per length, e.g. 1K,8K,32K,128K (needs --gpu; K = 1024)."),
    ] = None,
    tp: Annotated[int | None, Opt("--tp", min=1, help="--sweep: TP of the prefill instance.")] = None,
    backend: Annotated[
        str | None, Opt("--backend", help="KV data plane: engine|nixl-ucx|nccl-p2p|mooncake-te|tcp or a YAML.")
    ] = None,
    block_tokens: Annotated[int | None, Opt("--block-tokens", help="KV block size (default: the engine's).")] = None,
    engine: Annotated[str | None, Opt("--engine", help="Engine whose connector splits the KV (default vllm).")] = None,
) -> None:
    """KV-cache transfer of one request: bytes, link time, and the part exposed in TTFT.

    With --sweep: per prompt length, the KV bytes, prefill time and KV throughput (Gb/s) one prefill instance
    emits (PrfaaS, arXiv 2604.15039 Table 3).

    Example: pdplan transfer --model opt-66b --tokens 512 --link ib-hdr --format json
    """
    from pdplan.report.serving import kv_sweep_view, transfer_view
    from pdplan.serving.transfer_one import one_transfer

    if sweep is not None:
        from pdplan.errors import SpecError
        from pdplan.serving.prfaas.sweep import kv_throughput_sweep, parse_lengths

        if gpu is None:
            raise SpecError("--sweep needs --gpu (the prefill time comes from its roofline)", field="--gpu")
        sweep_doc = kv_throughput_sweep(
            catalog_from(hardware_db, kernel_tables),
            model=model,
            gpu=gpu,
            tp=tp or prefill_tp,
            lengths=parse_lengths(sweep),
            kv_dtype=kv_dtype,
        )
        emit(kv_sweep_view(sweep_doc), fmt, output)
        return
    if tokens is None or link is None:
        from pdplan.errors import SpecError

        raise SpecError(
            "give --tokens and --link (or --sweep with --gpu)", field="--tokens" if tokens is None else "--link"
        )

    doc = one_transfer(
        catalog_from(hardware_db, kernel_tables),
        model=model,
        tokens=tokens,
        link=link,
        granularity=granularity.lower(),
        prefill_tp=prefill_tp,
        decode_tp=decode_tp,
        gpu=gpu,
        kv_dtype=kv_dtype.lower(),
        backend=backend,
        block_tokens=block_tokens,
        engine=engine,
    )
    emit(transfer_view(doc), fmt, output)
