"""Catalogue commands: ``pdplan hardware list|show``, ``pdplan models list|show``, ``pdplan validate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from pdplan.cli.common import (
    FormatOpt,
    HardwareDbOpt,
    OutputOpt,
    catalog_from,
    emit,
    stderr_console,
)
from pdplan.errors import SpecError, UnknownNameError
from pdplan.io.catalog import Catalog, looks_like_path
from pdplan.io.files import read_yaml_mapping
from pdplan.io.validation import validate_files
from pdplan.report.render import Format
from pdplan.specs.hardware import GpuSpec, LinkSpec
from pdplan.specs.model import ModelSpec

hardware_app = typer.Typer(
    help="GPUs and links in the hardware catalogue.\n\nExample: pdplan hardware show h100-sxm",
    no_args_is_help=True,
)
models_app = typer.Typer(
    help="Model presets (or your own YAML / HF config.json).\n\nExample: pdplan models list",
    no_args_is_help=True,
)

KindOpt = Annotated[str, typer.Option("--kind", help="What to list: gpus or links.")]


def gpu_record(gpu: GpuSpec) -> dict[str, Any]:
    """One GPU as a flat record in human units (the table/CSV/Markdown view)."""
    return {
        "name": gpu.name,
        "bf16_tflops": gpu.bf16_flops_per_s / 1e12,
        "fp8_tflops": None if gpu.fp8_flops_per_s is None else gpu.fp8_flops_per_s / 1e12,
        "memory_gib": gpu.memory_bytes / 2**30,
        "memory_tb_per_s": gpu.memory_bytes_per_s / 1e12,
        "scale_up": gpu.scale_up_fabric,
        "scale_up_gb_per_s": gpu.scale_up_bytes_per_s / 1e9,
        "gpus_per_node": gpu.gpus_per_node,
        "tdp_w": gpu.tdp_w,
        "usd_per_gpu_hour": None if gpu.price is None else gpu.price.typical_usd_per_gpu_hour,
    }


def link_record(link: LinkSpec) -> dict[str, Any]:
    """One link as a flat record in human units."""
    return {
        "name": link.name,
        "kind": link.kind,
        "scope": link.scope,
        "line_rate_gbit_per_s": link.line_rate_bytes_per_s * 8 / 1e9,
        "efficiency": link.efficiency,
        "latency_us": link.per_message_latency_s * 1e6,
    }


def _load_all(catalog: Catalog, kind: str) -> list[Any]:
    if kind == "gpus":
        return [catalog.gpu(n) for n in catalog.names("gpu")]
    if kind == "links":
        return [catalog.link(n) for n in catalog.names("link")]
    raise SpecError(f"--kind must be gpus or links, got {kind!r}", field="--kind")


@hardware_app.command("list")
def hardware_list(
    kind: KindOpt = "gpus",
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """List catalogue GPUs (default) or links.

    Example: pdplan hardware list --kind links --format csv
    """
    specs = _load_all(catalog_from(hardware_db), kind)
    to_record = gpu_record if kind == "gpus" else link_record
    emit(
        fmt,
        output,
        records=[to_record(s) for s in specs],
        document=[s.model_dump(mode="json") for s in specs],
        title=f"pdplan {kind}",
    )


def _is_link_file(path: Path) -> bool:
    """True if a hardware file given by path is a link (a broken file is left to the GPU loader)."""
    try:
        data = read_yaml_mapping(path)
    except SpecError:
        return False
    return "line_rate_bytes_per_s" in data and "bf16_flops_per_s" not in data


def _hardware_spec(catalog: Catalog, name: str) -> GpuSpec | LinkSpec:
    """A GPU or link by name (either catalogue) or by path (kind read from the file)."""
    if looks_like_path(name):
        return catalog.link(name) if _is_link_file(Path(name)) else catalog.gpu(name)
    key = name.strip().lower()
    if key in catalog.names("link"):
        return catalog.link(name)
    if key in catalog.names("gpu"):
        return catalog.gpu(name)
    raise UnknownNameError("gpu or link", name, [*catalog.names("gpu"), *catalog.names("link")])


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="GPU or link name, or a path to a YAML file.")],
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """Show one GPU or link with every fact and its source.

    Example: pdplan hardware show h100-sxm --format json
    """
    spec = _hardware_spec(catalog_from(hardware_db), name)
    document = spec.model_dump(mode="json")
    records = [
        {"field": key, "value": value, "source": spec.sources.get(key, "")}
        for key, value in document.items()
        if key not in ("sources",)
    ]
    emit(fmt, output, records=records, document=document, title=spec.display_name)


def model_record(model: ModelSpec) -> dict[str, Any]:
    """One model as a flat record: sizes and KV footprint."""
    return {
        "name": model.name,
        "family": model.family,
        "attention": model.attention_kind,
        "layers": model.num_layers,
        "total_params_b": model.total_params() / 1e9,
        "active_params_b": model.active_params() / 1e9,
        "kv_bytes_per_token": model.kv_bytes_per_token(2),
        "kv_bytes_per_token_fp8": model.kv_bytes_per_token(1),
        "linear_state_bytes_per_seq": model.linear_state_bytes_per_sequence(),
        "max_context": model.max_position_embeddings,
    }


def model_document(model: ModelSpec) -> dict[str, Any]:
    """A model as JSON: the contract keys first, then the spec and derived values."""
    record = model_record(model)
    return {
        "name": model.name,
        "kv_bytes_per_token": record["kv_bytes_per_token"],
        "derived": record,
        "spec": model.model_dump(mode="json"),
    }


@models_app.command("list")
def models_list(
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """List model presets with parameter counts and KV bytes per token (BF16 and FP8).

    Example: pdplan models list --format markdown
    """
    catalog = catalog_from(hardware_db)
    models = [catalog.model(n) for n in catalog.names("model")]
    emit(
        fmt,
        output,
        records=[model_record(m) for m in models],
        document=[model_document(m) for m in models],
        title="pdplan models",
    )


@models_app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="Preset name, model YAML path or HF config.json path.")],
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """Show one model: its architecture and derived sizes.

    Example: pdplan models show deepseek-v3 --format json
    """
    model = catalog_from(hardware_db).model(name)
    record = model_record(model)
    records = [{"field": key, "value": value} for key, value in record.items()]
    emit(fmt, output, records=records, document=model_document(model), title=model.display_name)


def validate(
    files: Annotated[list[Path], typer.Argument(help="YAML (or HF config.json) files to check.")],
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> int:
    """Schema-check input files (GPU, link, model, workload, scenario, kernel table). Exit 2 if any is bad.

    Example: pdplan validate hardware_db/gpus/*.yaml examples/*.yaml
    """
    result = validate_files(files)
    records = [{"file": r.file, "kind": r.kind, "ok": r.ok, "error": r.error} for r in result.files]
    document = {
        "ok": result.ok,
        "errors": [{"file": r.file, "message": r.error} for r in result.files if not r.ok],
        "files": records,
    }
    emit(fmt, output, records=records, document=document, title="pdplan validate")
    bad = [r for r in result.files if not r.ok]
    if bad:  # exit 2 always comes with one stderr line naming the (first) bad file
        n_more = len(bad) - 1
        more = f" (and {n_more} more invalid file{'s' if n_more > 1 else ''})" if n_more else ""
        message = " ".join(f"{bad[0].error}{more}".split())
        stderr_console.print(f"error: {message}", highlight=False, markup=False, soft_wrap=True)
    return 0 if result.ok else 2
