"""Reading the KV transfer backends (``pdplan/data/kv_backends.yaml``, :mod:`pdplan.specs.kv_backend`)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from pdplan.errors import UnknownNameError
from pdplan.io.files import load_spec_file
from pdplan.specs.kv_backend import KvBackendCatalog, KvBackendSpec

KV_BACKENDS_FILE = Path(str(resources.files("pdplan") / "data" / "kv_backends.yaml"))


def load_kv_backends(path: Path = KV_BACKENDS_FILE) -> KvBackendCatalog:
    """The backends of the packaged file, or of ``path``."""
    if path == KV_BACKENDS_FILE:
        return _packaged()
    return load_spec_file(KvBackendCatalog, path)


def kv_backend(name: str, path: Path = KV_BACKENDS_FILE) -> KvBackendSpec:
    """One backend by name (case-insensitive); UnknownNameError naming the close ones."""
    backends = load_kv_backends(path).backends
    found = backends.get(name.strip().lower())
    if found is None:
        raise UnknownNameError("KV transfer backend", name, backends)
    return found


@lru_cache(maxsize=1)
def _packaged() -> KvBackendCatalog:
    return load_spec_file(KvBackendCatalog, KV_BACKENDS_FILE)
