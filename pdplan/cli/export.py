"""``pdplan export``: a plan from ``optimize --format json`` as a Dynamo manifest or vLLM / SGLang / TensorRT-LLM
launch commands."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from pdplan.cli.common import HardwareDbOpt, OutputOpt, catalog_from, warn, write_text

Opt = typer.Option


class ExportTarget(StrEnum):
    dynamo = "dynamo"
    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"


class DynamoBackend(StrEnum):
    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"


def export_command(
    plan: Annotated[
        str,
        typer.Argument(metavar="PLAN.json|-", help="`pdplan optimize --format json` output; - reads it from stdin."),
    ],
    to: Annotated[
        ExportTarget,
        Opt("--to", help="A Dynamo manifest, or vLLM / SGLang / TensorRT-LLM launch commands.", case_sensitive=False),
    ],
    rank: Annotated[int, Opt("--rank", help="Which ranked plan (1 = the recommended one).")] = 1,
    backend: Annotated[
        DynamoBackend, Opt("--backend", help="Engine of Dynamo's workers (with --to dynamo).", case_sensitive=False)
    ] = DynamoBackend.vllm,
    model_id: Annotated[
        str | None, Opt("--model-id", help="Hugging Face id or path to serve (default: the model preset's hf_id).")
    ] = None,
    node_label: Annotated[
        list[str] | None,
        Opt("--node-label", help="GPU=KEY=VALUE: the node label that places a GPU type (mixed-GPU Dynamo plans)."),
    ] = None,
    gpus_per_node: Annotated[
        int | None,
        Opt("--gpus-per-node", help="GPUs per node to pack instances onto (default: the catalogue's, per GPU type)."),
    ] = None,
    hardware_db: HardwareDbOpt = None,
    output: OutputOpt = None,
) -> None:
    """Write a plan as a deployment: Dynamo DynamoGraphDeployment YAML, or vllm serve / SGLang / trtllm-serve launch
    commands.

    Example: pdplan optimize --format json -o plan.json && pdplan export plan.json --to dynamo -o dgd.yaml
    """
    from pdplan.io.export_data import read_plan_document
    from pdplan.report.export import export_plan, plan_gpus
    from pdplan.report.export.context import export_context

    source = "<stdin>" if plan == "-" else plan
    doc = read_plan_document(plan, sys.stdin.read() if plan == "-" else None)
    gpus = plan_gpus(doc, rank, source)
    ctx = export_context(
        catalog_from(hardware_db),
        doc,
        gpus,
        model_id=model_id,
        node_labels_given=node_label or (),
        source=source,
        gpus_per_node=gpus_per_node,
    )
    result = export_plan(doc, target=to.value, rank=rank, ctx=ctx, source=source, backend=backend.value)
    for line in result.warnings:
        warn(line)
    write_text(result.text, output)
