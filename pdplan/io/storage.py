"""Reading storage-tier files (``hardware_db/storage/*.yaml``) into :class:`~pdplan.specs.storage.StorageSpec`.

The catalogue finds them by name (:meth:`pdplan.io.catalog.Catalog.storage`); ``pdplan validate`` recognises them
by their ``gpu_path_bytes_per_s`` key. Every failure is one :class:`~pdplan.errors.SpecError` line naming the file
and the field (:func:`pdplan.io.files.load_spec_file`).
"""

from __future__ import annotations

from pathlib import Path

from pdplan.io.files import load_spec_file
from pdplan.specs.storage import StorageSpec

STORAGE_KEYS: tuple[str, ...] = ("gpu_path_bytes_per_s",)
"""Top-level keys that mark a file as a storage tier (for ``pdplan validate``)."""


def load_storage(path: Path) -> StorageSpec:
    """Read and validate one storage-tier YAML file."""
    return load_spec_file(StorageSpec, path)
