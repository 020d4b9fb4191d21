"""Which data plane a deployment's KV transfer uses: the scenario's ``kv_backend`` / ``kv_block_tokens`` against
the engine profile's ``kv_connector`` (:mod:`pdplan.specs.kv_backend`; formulas in
:mod:`pdplan.transfer.data_plane`).

* no ``kv_backend``: the engine's own connector (as ``engine``) where its profile names one, else no data plane (the
  link alone: the ``kernels`` profile); ``none``: the link alone whatever the engine (a ``kv_block_tokens`` then is
  refused, since it would price nothing);
* ``engine``: the connector's backend, split and block size (``kv_block_tokens`` overrides the size; a size the
  engine does not take is refused, naming the ones it does);
* a backend name, or a path to a backends YAML holding one backend: that backend, cut as the engine's connector
  cuts (an engine without a connector is refused: the split is the connector's, not the backend's).
"""

from __future__ import annotations

from pathlib import Path

from pdplan.errors import SpecError
from pdplan.io.kv_backends import kv_backend as packaged_backend
from pdplan.io.kv_backends import load_kv_backends
from pdplan.specs.engine import EngineProfile
from pdplan.specs.kv_backend import KvBackendSpec, KvConnector
from pdplan.transfer.data_plane import DataPlane, data_plane

ENGINE = "engine"
"""The ``kv_backend`` word for the engine profile's own connector backend."""
NONE = "none"
"""The ``kv_backend`` word for no data plane: the KV transfer priced on the link alone (α–β)."""


def resolve_data_plane(
    backend: str | None, block_tokens: int | None, engine: EngineProfile, *, field: str = "kv_backend"
) -> DataPlane | None:
    """The :class:`DataPlane` of ``backend`` / ``block_tokens`` under ``engine`` (module docstring)."""
    if backend is None:
        backend = ENGINE if engine.kv_connector is not None else NONE
    if backend.strip().lower() == NONE:
        if block_tokens is not None:
            raise SpecError("kv_block_tokens needs kv_backend (engine or a backend name) to price", field=field)
        return None
    connector = _connector(engine, field)
    size = connector.block_tokens if block_tokens is None else block_tokens
    if size < 1:
        raise SpecError(f"must be an integer >= 1, got {size}", field="kv_block_tokens")
    if size not in connector.block_tokens_supported:
        supported = ", ".join(str(b) for b in connector.block_tokens_supported)
        raise SpecError(
            f"{engine.name}'s {connector.name} takes block sizes {supported}, not {size}", field="kv_block_tokens"
        )
    name, spec = _backend(connector.backend if backend.strip().lower() == ENGINE else backend)
    return data_plane(name, spec, connector.split, size)


def _connector(engine: EngineProfile, field: str) -> KvConnector:
    if engine.kv_connector is None:
        raise SpecError(f"engine profile {engine.name!r} names no kv_connector (split, block size)", field=field)
    return engine.kv_connector


def _backend(text: str) -> tuple[str, KvBackendSpec]:
    """(name, spec): a packaged name, or the one backend of a YAML file."""
    path = Path(text)
    if path.suffix.lower() in {".yaml", ".yml"}:
        backends = load_kv_backends(path).backends
        if len(backends) != 1:
            raise SpecError(f"holds {len(backends)} backends; give a file with one", source=str(path), field="backends")
        return next(iter(backends.items()))
    return text.strip().lower(), packaged_backend(text)
