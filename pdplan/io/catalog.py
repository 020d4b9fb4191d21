"""The only code that finds catalogue files: GPUs, links and models, built in or the user's own.

Resolution order for a name (case-insensitive): user folders given with ``--hardware-db DIR`` (later wins),
then folders in ``PDPLAN_HARDWARE_DB`` (``os.pathsep``-separated), then the built-in ``hardware_db/``.
A folder may hold ``gpus/*.yaml``, ``links/*.yaml``, ``storage/*.yaml`` and ``models/*.yaml``; the file name
(without ``.yaml``) is the name users type and must equal the spec's ``name`` field. Any name may instead be a path
to a YAML file (models also accept a Hugging Face ``config.json``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, cast

from pydantic import BaseModel

from pdplan.errors import SpecError, UnknownNameError
from pdplan.io.engines import ENGINE_DIR, load_engine
from pdplan.io.files import load_spec_file
from pdplan.io.kernel_tables import TABLE_DIR, load_kernel_table
from pdplan.io.models import builtin_models_dir, load_model_yaml
from pdplan.specs.arguments import check_paths
from pdplan.specs.engine import EngineProfile
from pdplan.specs.hardware import GpuSpec, LinkSpec, PriceRange
from pdplan.specs.kernel_table import KernelTable
from pdplan.specs.model import ModelSpec

if TYPE_CHECKING:  # loaded where a storage tier is read: the default path has none (start-up, issue #27)
    from pdplan.specs.storage import StorageSpec

HARDWARE_DB_ENV = "PDPLAN_HARDWARE_DB"
Kind = Literal["gpu", "link", "storage", "model", "kernel table", "engine"]
_SUBDIR: dict[Kind, str] = {
    "gpu": "gpus",
    "link": "links",
    "storage": "storage",
    "model": "models",
    "kernel table": "kernel_tables",
    "engine": "engines",
}
SpecT = TypeVar("SpecT", bound=BaseModel)


def builtin_hardware_dir() -> Path:
    """The shipped ``hardware_db/``: inside the wheel (``pdplan/_hardware_db``) or beside the source tree."""
    packaged = Path(str(resources.files("pdplan"))) / "_hardware_db"
    if packaged.is_dir():
        return packaged
    source_tree = Path(__file__).resolve().parents[2] / "hardware_db"
    if source_tree.is_dir():
        return source_tree
    raise SpecError("the built-in hardware_db/ is missing from this installation; reinstall pdplan")


def looks_like_path(name: str) -> bool:
    """True for ``./x.yaml``, ``dir/config.json`` and the like: anything with a separator or a file suffix."""
    return "/" in name or os.sep in name or name.lower().endswith((".yaml", ".yml", ".json"))


def _scan(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.stem.lower(): p for p in sorted(folder.glob("*.yaml"))}


@dataclass(frozen=True)
class Catalog:
    """Name → file maps for each kind. Build one with :func:`open_catalog`."""

    files: dict[Kind, dict[str, Path]] = field(default_factory=dict)
    kernel_table_files: tuple[Path, ...] = ()
    """User kernel tables (``--kernel-table``), each applying to the GPU its ``gpu:`` field names."""
    prices: tuple[tuple[str, float], ...] = ()
    """(GPU name, USD per GPU-hour) replacing the catalogue's price range (``optimize --price``)."""

    def names(self, kind: Kind) -> list[str]:
        """Sorted names of one kind."""
        return sorted(self.files.get(kind, {}))

    def path_of(self, kind: Kind, name: str) -> Path:
        """The file behind a name or path; UnknownNameError with suggestions otherwise."""
        if looks_like_path(name):
            return Path(name)
        known = self.files.get(kind, {})
        found = known.get(name.strip().lower())
        if found is None:
            raise UnknownNameError(kind, name, known)
        return found

    def gpu(self, name: str) -> GpuSpec:
        """Load a GPU by name or path (its price replaced where :attr:`prices` names it)."""
        spec = _load_named(GpuSpec, self.path_of("gpu", name), looks_like_path(name))
        price = dict(self.prices).get(spec.name)
        if price is None:
            return spec
        return spec.model_copy(
            update={
                "price": PriceRange(low_usd_per_gpu_hour=price, high_usd_per_gpu_hour=price),
                "sources": {**spec.sources, "price": f"command line (--price {spec.name}={price:g})"},
            }
        )

    def with_prices(self, prices: dict[str, float] | None) -> Catalog:
        """This catalogue with GPU prices replaced (USD per GPU-hour by GPU name; each name must be known)."""
        if not prices:
            return self
        for name in prices:
            self.path_of("gpu", name)  # an unknown GPU fails here, with suggestions
        merged = {**dict(self.prices), **{k.lower(): v for k, v in prices.items()}}
        return dataclasses.replace(self, prices=tuple(sorted(merged.items())))

    def link(self, name: str) -> LinkSpec:
        """Load a link by name or path."""
        return _load_named(LinkSpec, self.path_of("link", name), looks_like_path(name))

    def storage(self, name: str) -> StorageSpec:
        """Load a storage tier (host DRAM, local SSD, remote pool) by name or path."""
        from pdplan.specs.storage import StorageSpec  # lazy: start-up (issue #27)

        return _load_named(StorageSpec, self.path_of("storage", name), looks_like_path(name))

    def list_storage(self) -> list[str]:
        """Sorted names of the storage tiers."""
        return self.names("storage")

    def kernel_table(self, gpu_name: str) -> KernelTable:
        """The kernel table for this GPU: a ``--kernel-table`` file naming it, else ``kernel_tables/<gpu>.yaml`` of a
        ``--hardware-db`` folder or the package, else one borrowed from the nearest measured GPU
        (:meth:`borrowed_kernel_table`)."""
        for path in self.kernel_table_files:
            table = _load_table_cached(_cache_key(path))
            if table.gpu.lower() == gpu_name.lower():
                return table
        found = self.files.get("kernel table", {}).get(gpu_name.strip().lower())
        if found is not None:
            return _load_table_cached(_cache_key(found))
        return self.borrowed_kernel_table(gpu_name)

    def borrowed_kernel_table(self, gpu_name: str) -> KernelTable:
        """A GPU with no kernel table of its own borrows the efficiencies of the nearest part with one: the same
        architecture first, a measured (calibrated) table before a derived one, then the nearest memory-bandwidth /
        bf16-FLOPs ratio (log distance: the ratio sets where the roofline's ridge sits, so which kernels are compute-
        and which memory-bound), then the name. The copy says so: ``calibrated: false``, ``derived_from`` the source,
        and a ``sources`` entry every report prints. Its peaks are the GPU's own datasheet numbers; a GPU file without
        ``sm_count`` takes the source's (stated in the sources).

        Example: an H100 NVL (3.9 TB/s, 989 TFLOPS) borrows h100-sxm's (ratio 3.39e-3 against 3.94e-3; h200-sxm's
        4.85e-3 is further)."""
        gpu = self.gpu(gpu_name)
        ratio = gpu.memory_bytes_per_s / gpu.bf16_flops_per_s
        donors = []
        for name, path in sorted(self.files.get("kernel table", {}).items()):
            if name in self.files.get("gpu", {}) and name != gpu.name:
                donor_gpu = self.gpu(name)
                table = _load_table_cached(_cache_key(path))
                gap = abs(math.log(donor_gpu.memory_bytes_per_s / donor_gpu.bf16_flops_per_s / ratio))
                donors.append((donor_gpu.architecture != gpu.architecture, not table.calibrated, gap, name, table))
        if not donors:
            raise SpecError(
                f"no kernel table for GPU {gpu.name!r} and none of another GPU to borrow from; "
                "give one with --kernel-table FILE or put it in a --hardware-db folder's kernel_tables/",
                field="gpu",
            )
        other_arch, _, _, name, table = min(donors, key=lambda d: d[:4])
        part = f"another architecture's part ({self.gpu(name).architecture})" if other_arch else gpu.architecture
        note = (
            f"borrowed by pdplan from {name} (nearest {part} with a table, by memory-bandwidth/FLOPs ratio; "
            "docs/accuracy_method.md §10)"
        )
        if gpu.sm_count is None and table.sm_count is not None:
            note += f"; sm_count {table.sm_count} from {name} ({gpu.name}'s file gives none)"
        return table.model_copy(
            update={
                "gpu": gpu.name,
                "calibrated": False,
                "derived_from": name,
                "sm_count": gpu.sm_count or table.sm_count,
                "sources": {**table.sources, "borrowed": note},
            }
        )

    def engine(self, name: str) -> EngineProfile:
        """An engine profile by name (``--hardware-db`` folders' ``engines/``, then the package) or YAML path."""
        return load_engine(name, self.files.get("engine", {}))

    def model(self, name: str) -> ModelSpec:
        """Load a model by preset name, YAML path or Hugging Face ``config.json`` path."""
        path = self.path_of("model", name)
        if path.suffix.lower() == ".json":
            from pdplan.io.hf_config import load_hf_config  # lazy: a config.json only (start-up, issue #27)

            return load_hf_config(path)
        spec = _load_model_cached(_cache_key(path))
        _check_name(spec.name, path, looks_like_path(name))
        return spec


def _cache_key(path: Path) -> str:
    """The resolved path when the file exists (one cache entry per file), else the path as given."""
    return str(path.resolve()) if path.exists() else str(path)


def _check_name(declared: str, path: Path, by_path: bool) -> None:
    """A catalogue entry's ``name`` must equal its file name (a file given as a path may be named anything)."""
    if not by_path and declared.lower() != path.stem.lower():
        raise SpecError(
            f"name {declared.lower()!r} does not match the file name {path.stem!r}", source=str(path), field="name"
        )


def _load_named(cls: type[SpecT], path: Path, by_path: bool) -> SpecT:
    spec = cast(SpecT, _load_cached(cls, _cache_key(path)))
    _check_name(str(getattr(spec, "name", "")), path, by_path)
    return spec


@lru_cache(maxsize=256)
def _load_cached(cls: type[SpecT], path: str) -> SpecT:
    return load_spec_file(cls, Path(path))


@lru_cache(maxsize=64)
def _load_table_cached(path_or_gpu: str) -> KernelTable:
    return load_kernel_table(path_or_gpu)


@lru_cache(maxsize=256)
def _load_model_cached(path: str) -> ModelSpec:
    return load_model_yaml(Path(path))


def user_dirs_from_env() -> list[Path]:
    """Folders named in ``PDPLAN_HARDWARE_DB``."""
    raw = os.environ.get(HARDWARE_DB_ENV, "")
    return [Path(part) for part in raw.split(os.pathsep) if part.strip()]


def open_catalog(extra_dirs: Sequence[Path] = (), kernel_tables: Sequence[Path] = ()) -> Catalog:
    """Built-in catalogue overlaid by ``PDPLAN_HARDWARE_DB`` folders, then by ``extra_dirs``; ``kernel_tables``
    replace the packaged kernel table of the GPU each names."""
    check_paths(extra_dirs, "extra_dirs")
    check_paths(kernel_tables, "kernel_tables")
    extra_dirs, kernel_tables = [Path(d) for d in extra_dirs], [Path(t) for t in kernel_tables]
    builtin = builtin_hardware_dir()
    files: dict[Kind, dict[str, Path]] = {
        "gpu": _scan(builtin / "gpus"),
        "link": _scan(builtin / "links"),
        "storage": _scan(builtin / "storage"),
        "model": _scan(builtin_models_dir()),
        "kernel table": _scan(TABLE_DIR),
        "engine": _scan(ENGINE_DIR),
    }
    for folder in [*user_dirs_from_env(), *extra_dirs]:
        if not folder.is_dir():
            raise SpecError("hardware database folder does not exist", source=str(folder))
        if not os.access(folder, os.R_OK | os.X_OK):
            raise SpecError("hardware database folder cannot be read (permission denied)", source=str(folder))
        for kind, sub in _SUBDIR.items():
            files[kind].update(_scan(folder / sub))
    for path in kernel_tables:
        table = _load_table_cached(str(path))  # fail early, naming the file, if a table is bad
        if table.gpu.lower() not in files["gpu"]:
            raise UnknownNameError("GPU", table.gpu, files["gpu"], source=f"{path}: gpu")
    return Catalog(files=files, kernel_table_files=tuple(kernel_tables))
