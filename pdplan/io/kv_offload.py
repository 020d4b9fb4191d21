"""Reading the engine KV-offload mechanisms (``pdplan/data/kv_offload.yaml``, :mod:`pdplan.specs.kv_offload`)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from pdplan.io.files import load_spec_file
from pdplan.specs.kv_offload import KvOffloadCatalog

KV_OFFLOAD_FILE = Path(str(resources.files("pdplan") / "data" / "kv_offload.yaml"))


def load_kv_offload(path: Path = KV_OFFLOAD_FILE) -> KvOffloadCatalog:
    """The mechanisms of the packaged file, or of ``path``."""
    if path == KV_OFFLOAD_FILE:
        return _packaged()
    return load_spec_file(KvOffloadCatalog, path)


@lru_cache(maxsize=1)
def _packaged() -> KvOffloadCatalog:
    return load_spec_file(KvOffloadCatalog, KV_OFFLOAD_FILE)
