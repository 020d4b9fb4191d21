"""Catalogue commands: ``pdplan hardware list|show``, ``pdplan models list|show``, ``pdplan validate``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pdplan.cli.common import FormatOpt, HardwareDbOpt, OutputOpt, catalog_from, emit, stderr_console
from pdplan.errors import SpecError, UnknownNameError
from pdplan.report.render import Format

if TYPE_CHECKING:
    from pdplan.io.catalog import Catalog
    from pdplan.specs.hardware import GpuSpec, LinkSpec
    from pdplan.specs.storage import StorageSpec

hardware_app = typer.Typer(
    help="GPUs, links and storage tiers in the hardware catalogue.\n\nExample: pdplan hardware show h100-sxm",
    no_args_is_help=True,
)
models_app = typer.Typer(
    help="Model presets (or your own YAML / HF config.json).\n\nExample: pdplan models list",
    no_args_is_help=True,
)

KindOpt = Annotated[str, typer.Option("--kind", help="What to list: gpus, links or storage.")]


@hardware_app.command("list")
def hardware_list(
    kind: KindOpt = "gpus",
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """List catalogue GPUs (default), links or storage tiers.

    Example: pdplan hardware list --kind links --format csv
    """
    from pdplan.report.catalog import gpus_view, links_view, storage_view

    catalog = catalog_from(hardware_db)
    kind = kind.lower()
    if kind == "gpus":
        view = gpus_view([catalog.gpu(n) for n in catalog.names("gpu")])
    elif kind == "links":
        view = links_view([catalog.link(n) for n in catalog.names("link")])
    elif kind == "storage":
        view = storage_view([catalog.storage(n) for n in catalog.list_storage()])
    else:
        raise SpecError(f"--kind must be gpus, links or storage, got {kind!r}", field="--kind")
    emit(view, fmt, output)


def _file_kind(path: Path) -> str:
    """``link``, ``storage`` or ``gpu`` for a hardware file given by path (a broken file is left to the GPU
    loader)."""
    from pdplan.io.files import read_yaml_mapping
    from pdplan.io.storage import STORAGE_KEYS

    try:
        data = read_yaml_mapping(path)
    except SpecError:
        return "gpu"
    if "bf16_flops_per_s" in data:
        return "gpu"
    if "line_rate_bytes_per_s" in data:
        return "link"
    return "storage" if any(key in data for key in STORAGE_KEYS) else "gpu"


def _hardware_spec(catalog: Catalog, name: str) -> GpuSpec | LinkSpec | StorageSpec:
    """A GPU, link or storage tier by name (any catalogue) or by path (kind read from the file)."""
    from pdplan.io.catalog import looks_like_path

    if looks_like_path(name):
        kind = _file_kind(Path(name))
        if kind == "link":
            return catalog.link(name)
        return catalog.storage(name) if kind == "storage" else catalog.gpu(name)
    key = name.strip().lower()
    if key in catalog.names("link"):
        return catalog.link(name)
    if key in catalog.names("storage"):
        return catalog.storage(name)
    if key in catalog.names("gpu"):
        return catalog.gpu(name)
    known = [*catalog.names("gpu"), *catalog.names("link"), *catalog.names("storage")]
    raise UnknownNameError("gpu, link or storage tier", name, known)


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="GPU, link or storage-tier name, or a path to a YAML file.")],
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """Show one GPU, link or storage tier with every fact and its source.

    Example: pdplan hardware show h100-sxm --format json
    """
    from pdplan.report.catalog import hardware_show_view

    emit(hardware_show_view(_hardware_spec(catalog_from(hardware_db), name)), fmt, output)


@models_app.command("list")
def models_list(
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    hardware_db: HardwareDbOpt = None,
) -> None:
    """List model presets with parameter counts and KV bytes per token (BF16 and FP8).

    Example: pdplan models list --format markdown
    """
    from pdplan.report.catalog import models_list_view

    catalog = catalog_from(hardware_db)
    emit(models_list_view([catalog.model(n) for n in catalog.names("model")]), fmt, output)


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
    from pdplan.report.catalog import model_show_view

    emit(model_show_view(catalog_from(hardware_db).model(name)), fmt, output)


def validate(
    files: Annotated[list[Path], typer.Argument(help="YAML (or HF config.json) files to check.")],
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
) -> int:
    """Schema-check input files (GPU, link, model, workload, scenario, kernel table). Exit 2 if any is bad.

    Example: pdplan validate hardware_db/gpus/*.yaml examples/*.yaml
    """
    from pdplan.io.validation import validate_files
    from pdplan.report.catalog import validation_error, validation_view

    result = validate_files(files)
    emit(validation_view(result), fmt, output)
    error = validation_error(result)
    if error is not None:  # exit 2 always comes with one stderr line naming the (first) bad file
        stderr_console.print(f"error: {error}", highlight=False, markup=False, soft_wrap=True)
    return 0 if result.ok else 2
