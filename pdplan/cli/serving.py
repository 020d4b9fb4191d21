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
    prepare_output,
    progress,
    warn,
    write_text,
)
from pdplan.cli.options import (
    ConcurrencyOpt,
    RateOpt,
    ScenarioArg,
    positive_rate,
    scenario_from_flags,
    takes_overrides,
)
from pdplan.report.render import Format
from pdplan.specs.overrides import ScenarioOverrides

Opt = typer.Option


@takes_overrides
def evaluate_command(
    scenario: ScenarioArg = None,
    *,
    overrides: ScenarioOverrides,
    rate: RateOpt = None,
    concurrency: ConcurrencyOpt = None,
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> None:
    """Evaluate one deployment: goodput, binding constraint, and latencies at a rate.

    Example: pdplan evaluate examples/default.yaml --rate 8 --format json
    """
    from pdplan.report.serving import evaluation_view
    from pdplan.serving import evaluate  # lazy: scipy loads in ~1 s

    fmt = prepare_output(fmt, output)
    positive_rate(rate)
    sc = scenario_from_flags(scenario, overrides)
    with progress() as shown:
        shown.add_task("evaluating", total=None)
        result = evaluate(sc, catalog=catalog_from(hardware_db, kernel_tables), rate=rate, concurrency=concurrency)
    for line in result.warnings:
        warn(line)
    if fmt is Format.markdown:  # a one-deployment review, not the quantity table
        from pdplan.report.evaluate_markdown import evaluation_markdown

        write_text(evaluation_markdown(result), output)
        return
    emit(evaluation_view(result), fmt, output)


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
    from pdplan.report.serving import transfer_view
    from pdplan.serving.transfer_one import one_transfer

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
    )
    emit(transfer_view(doc), fmt, output)
