"""``pdplan export``: a plan from ``optimize --format json`` as a Dynamo manifest or vLLM / SGLang launch commands."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from pdplan.cli.common import HardwareDbOpt, OutputOpt, catalog_from, warn, write_text

if TYPE_CHECKING:
    from pdplan.io.catalog import Catalog
    from pdplan.report.export import ExportContext
    from pdplan.specs.export import PlanDocument

Opt = typer.Option


class ExportTarget(StrEnum):
    dynamo = "dynamo"
    vllm = "vllm"
    sglang = "sglang"


class DynamoBackend(StrEnum):
    vllm = "vllm"
    sglang = "sglang"


def export_command(
    plan: Annotated[str, typer.Argument(help="`pdplan optimize --format json` output, or - to read it from stdin.")],
    to: Annotated[ExportTarget, Opt("--to", help="dynamo|vllm|sglang.", case_sensitive=False)],
    rank: Annotated[int, Opt("--rank", help="Which ranked plan (1 = the recommended one).")] = 1,
    backend: Annotated[
        DynamoBackend, Opt("--backend", help="Engine of Dynamo's workers (with --to dynamo).", case_sensitive=False)
    ] = DynamoBackend.vllm,
    model_id: Annotated[
        str | None, Opt("--model-id", help="Hugging Face id or path to serve (default: the model preset's hf_id).")
    ] = None,
    hardware_db: HardwareDbOpt = None,
    output: OutputOpt = None,
) -> None:
    """Write a plan as a deployment: Dynamo DynamoGraphDeployment YAML, or vllm serve / SGLang launch commands.

    Example: pdplan optimize --format json -o plan.json && pdplan export plan.json --to dynamo -o dgd.yaml
    """
    from pdplan.io.export_data import read_plan_document
    from pdplan.report.export import export_plan, plan_gpus

    source = "<stdin>" if plan == "-" else plan
    doc = read_plan_document(plan, sys.stdin.read() if plan == "-" else None)
    gpus = plan_gpus(doc, rank, source)
    ctx = _context(catalog_from(hardware_db), doc, gpus, model_id, source)
    result = export_plan(doc, target=to.value, rank=rank, ctx=ctx, source=source, backend=backend.value)
    for line in result.warnings:
        warn(line)
    write_text(result.text, output)


def _context(catalog: Catalog, doc: PlanDocument, gpus: list[str], model_id: str | None, source: str) -> ExportContext:
    """The catalogue facts and export data an export needs, looked up once."""
    from pdplan.io.export_data import export_targets, node_labels
    from pdplan.io.serving_defaults import serving_defaults
    from pdplan.report.export import ExportContext, GpuFacts

    facts = {}
    for name in gpus:
        spec = catalog.gpu(name)
        facts[name] = GpuFacts(name, spec.display_name, spec.vendor, spec.gpus_per_node)
    defaults = serving_defaults()
    return ExportContext(
        model_id=model_id or _hf_id(catalog, doc, source),
        gpus=facts,
        targets=export_targets(),
        node_labels=node_labels().labels,
        colocated_chunk_tokens=defaults.prefill_chunk_tokens,
        colocated_chunk_source=defaults.sources["prefill_chunk_tokens"],
    )


def _hf_id(catalog: Catalog, doc: PlanDocument, source: str) -> str:
    from pdplan.errors import SpecError

    name = doc.model_name
    if name is None:
        raise SpecError("the plan document names no model (inputs.model); pass --model-id", source=source)
    try:
        model = catalog.model(name)
    except SpecError as err:
        raise SpecError(f"{err}; pass --model-id (or --hardware-db with the model's YAML)", source=source) from None
    if model.hf_id is None:
        raise SpecError(
            f"model {name!r} has no hf_id (no public checkpoint is recorded); pass --model-id", source=source
        )
    return model.hf_id
