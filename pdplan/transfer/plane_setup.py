"""Which data plane a deployment's KV transfer uses: the scenario's ``kv_backend`` / ``kv_block_tokens`` against
the engine profile's ``kv_connector`` (:mod:`pdplan.specs.kv_backend`; formulas in
:mod:`pdplan.transfer.data_plane`).

* no ``kv_backend``: the engine's own connector (as ``engine``) where its profile names one, else no data plane (the
  link alone: the ``kernels`` profile); ``none``: the link alone whatever the engine (a ``kv_block_tokens`` still
  sets the engine's KV paging, :mod:`pdplan.perf.kv_blocks`);
* ``engine``: the connector's backend, split and block size (``kv_block_tokens`` overrides the size);
* a backend name, or a path to a backends YAML holding one backend: that backend, cut as the engine's connector
  cuts (an engine without a connector is refused: the split is the connector's, not the backend's).

A ``kv_block_tokens`` the engine does not take (its connector's ``block_tokens_supported``) is refused, naming the
ones it does, whatever the backend. The optimiser's ``search.kv_backends`` / ``search.kv_block_tokens`` lists are
checked the same way, value by value (:func:`search_choices`).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    if block_tokens is not None:
        check_block_tokens(engine, block_tokens)
    if backend.strip().lower() == NONE:
        return None
    connector = _connector(engine, field)
    size = connector.block_tokens if block_tokens is None else block_tokens
    name, spec = _backend(connector.backend if backend.strip().lower() == ENGINE else backend)
    return data_plane(name, spec, connector.split, size)


def check_block_tokens(engine: EngineProfile, size: int, field: str = "kv_block_tokens") -> None:
    """Refuse a block size below 1, or one the engine's connector does not take (naming the ones it does); an engine
    without a connector (``kernels``: kernel time only) takes any."""
    if size < 1:
        raise SpecError(f"must be an integer >= 1, got {size}", field=field)
    connector = engine.kv_connector
    if connector is not None and size not in connector.block_tokens_supported:
        supported = ", ".join(str(b) for b in connector.block_tokens_supported)
        raise SpecError(f"{engine.name}'s {connector.name} takes block sizes {supported}, not {size}", field=field)


@dataclass(frozen=True, slots=True)
class KvChoice:
    """One KV data plane the optimiser tries: a ``kv_backend`` word and a ``kv_block_tokens`` (None: the scenario's
    own, i.e. the engine's default where the scenario sets none)."""

    backend: str | None
    block_tokens: int | None


def search_choices(
    backends: list[str] | None, blocks: list[int] | None, scenario: KvChoice, engine: EngineProfile
) -> tuple[KvChoice, ...]:
    """Every (backend, block size) of the ``search.kv_backends`` × ``search.kv_block_tokens`` lists (a list left out:
    the ``scenario``'s one value), each checked against ``engine`` as :func:`resolve_data_plane` checks the scenario's
    (a value it cannot run: SpecError naming the list). Without either list: the scenario's own choice alone."""
    for size in blocks or []:
        check_block_tokens(engine, size, field="search.kv_block_tokens")
    for word in backends or []:
        resolve_data_plane(word, None, engine, field="search.kv_backends")
    words: list[str | None] = list(backends) if backends else [scenario.backend]
    sizes: list[int | None] = list(blocks) if blocks else [scenario.block_tokens]
    return tuple(KvChoice(b, s) for b in words for s in sizes)


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
