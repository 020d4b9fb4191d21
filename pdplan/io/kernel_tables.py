"""Kernel cost tables on disk: the packaged ones (``pdplan/data/kernel_tables/<gpu>.yaml``) and the user's own."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from pdplan.errors import SpecError, UnknownNameError
from pdplan.io.files import load_spec_file, read_yaml_mapping
from pdplan.specs.cross_gpu_error import CrossGpuError
from pdplan.specs.kernel_table import KernelTable, MoeParams

TABLE_DIR = Path(str(resources.files("pdplan"))) / "data" / "kernel_tables"
"""Folder of the packaged kernel tables (package data)."""


def packaged_table_ids() -> list[str]:
    """GPU ids with a kernel table shipped inside the package (``pdplan/data/kernel_tables/``)."""
    return sorted(p.stem for p in TABLE_DIR.glob("*.yaml"))


def load_kernel_table(path_or_gpu_id: str | Path) -> KernelTable:
    """Load a kernel table from a YAML path or the packaged table of a GPU id (``h100-sxm``)."""
    candidate = Path(path_or_gpu_id)
    if candidate.suffix in {".yaml", ".yml"} or candidate.exists():
        return load_spec_file(KernelTable, candidate)
    gpu_id = str(path_or_gpu_id).lower()
    packaged = TABLE_DIR / f"{gpu_id}.yaml"
    if not packaged.is_file():
        raise UnknownNameError("kernel table", gpu_id, packaged_table_ids())
    return load_spec_file(KernelTable, packaged)


@cache
def cross_gpu_error() -> CrossGpuError:
    """The cross-GPU validation's error bands (``pdplan/data/cross_gpu_error.yaml``), printed with a plan whose kernel
    table is borrowed."""
    return load_spec_file(CrossGpuError, TABLE_DIR.parent / "cross_gpu_error.yaml")


def read_moe_entry(directory: Path, gpu_name: str, key: str) -> MoeParams | None:
    """A per-GPU MoE kernel entry shipped beside the kernel tables (``<directory>/<gpu_name>.yaml``, the
    :class:`MoeParams` under ``key``: the W4A16 and CUTLASS entries), or None if that GPU has no file; SpecError naming
    the file and ``key`` if the entry is malformed."""
    path = directory / f"{gpu_name}.yaml"
    if not path.is_file():
        return None
    data = read_yaml_mapping(path)
    try:
        return MoeParams(**data[key])
    except (KeyError, TypeError, ValueError) as err:
        raise SpecError(f"bad {key} entry: {err}", source=str(path), field=key) from err
