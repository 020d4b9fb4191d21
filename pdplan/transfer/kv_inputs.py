"""The inputs of a KV transfer (:mod:`pdplan.transfer.kv`): what is sent (:class:`KvShape`), how
(:class:`TransferConfig`), over what (:class:`LinkLike`), and the replication and bandwidth rules they imply
(formulas in the :mod:`pdplan.transfer.kv` docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

from pdplan.errors import SpecError
from pdplan.transfer.data_plane import DataPlane

Granularity = Literal["request", "layer", "chunk"]
GRANULARITIES: tuple[Granularity, ...] = ("request", "layer", "chunk")


class LinkLike(Protocol):
    """What transfer needs of a :class:`pdplan.specs.hardware.LinkSpec` (per port, per dir)."""

    @property
    def line_rate_bytes_per_s(self) -> float: ...
    @property
    def per_message_latency_s(self) -> float: ...
    @property
    def efficiency(self) -> float: ...


class ModelLike(Protocol):
    """What transfer needs of a :class:`pdplan.specs.model.ModelSpec`."""

    @property
    def num_layers(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def attention_kind(self) -> str: ...
    def kv_bytes_per_token(self, kv_dtype_bytes: float) -> float: ...
    def linear_state_bytes_per_sequence(self) -> float: ...


def require(ok: bool, field: str, message: str) -> None:
    """Raise a SpecError naming ``field`` unless ``ok``."""
    if not ok:
        raise SpecError(message, source="transfer", field=field)


@dataclass(frozen=True, slots=True)
class KvShape:
    """What is sent: unsharded KV bytes/token (all KV layers), layers, K/V heads, state."""

    kv_bytes_per_token: float
    num_layers: int
    num_kv_heads: int
    state_bytes_per_sequence: float = 0.0
    kv_parts: int = 2
    """Tensors a layer's KV is kept in, each its own descriptor: K and V (2); MLA's one latent (1)."""
    window_tokens: float | None = None
    """Every layer windowed (:attr:`pdplan.specs.model.ModelSpec.kv_window_tokens`): the decode keeps the last w
    tokens of a prompt, so a transfer after the prefill (request, layer) moves min(l, w) tokens
    (:func:`pdplan.transfer.kv.kv_transfer`). None: no cap."""

    def __post_init__(self) -> None:
        require(self.kv_bytes_per_token >= 0.0, "kv_bytes_per_token", "must be >= 0")
        require(self.num_layers >= 1, "num_layers", "must be >= 1")
        require(self.num_kv_heads >= 1, "num_kv_heads", "must be >= 1")
        require(self.state_bytes_per_sequence >= 0.0, "state_bytes_per_sequence", "must be >= 0")
        require(self.kv_parts in (1, 2), "kv_parts", "must be 1 (MLA latent) or 2 (K and V)")
        require(self.window_tokens is None or self.window_tokens > 0.0, "window_tokens", "must be > 0")


def kv_shape_from_model(model: ModelLike, kv_dtype_bytes: float) -> KvShape:
    """KvShape of a model spec; MLA's latent counts as one K/V head (replicated on every rank).

    The per-sequence state is the linear layers' recurrent + conv state plus, for sliding-window layers, a full
    window of their K/V (``window_kv_bytes_per_sequence``: ``window × window_kv_bytes_per_token``): what a sequence
    holds once its prompt reaches the window, an upper bound for shorter prompts (at most ``window`` tokens of those
    layers' K/V too many). A model whose every layer is windowed sends its K/V per token instead (no window state),
    of at most its window's tokens (``window_tokens``)."""
    heads = 1 if model.attention_kind == "mla" else model.num_kv_heads
    window = getattr(model, "window_kv_bytes_per_sequence", None)
    window_bytes = 0.0 if window is None else float(window(kv_dtype_bytes))
    return KvShape(
        model.kv_bytes_per_token(kv_dtype_bytes),
        model.num_layers,
        heads,
        model.linear_state_bytes_per_sequence() + window_bytes,
        1 if model.attention_kind == "mla" else 2,
        getattr(model, "kv_window_tokens", None),
    )


@dataclass(frozen=True, slots=True)
class TransferConfig:
    """How the KV moves. ``nics_*`` None → one NIC/port per GPU of that side (= its TP); ``data_plane`` adds the
    backend's descriptor, launch and staging costs.
    ``decode_hbm_bytes_per_s`` is needed when tp_p ≠ tp_d (re-layout), ``prefill_hbm_bytes_per_s``
    for chunk granularity (KV re-read)."""

    granularity: Granularity = "request"
    prefill_tp: int = 1
    decode_tp: int = 1
    nics_prefill: int | None = None
    nics_decode: int | None = None
    chunk_tokens: int | None = None
    layer_sync_overhead_s: float = 0.0
    chunk_overhead_s: float = 0.0
    prefill_hbm_bytes_per_s: float | None = None
    decode_hbm_bytes_per_s: float | None = None
    data_plane: DataPlane | None = None
    """The backend and connector split (:mod:`pdplan.transfer.data_plane`); None: the link alone (α–β)."""

    def __post_init__(self) -> None:
        require(
            self.granularity in GRANULARITIES,
            "granularity",
            f"{self.granularity!r} is not one of {', '.join(GRANULARITIES)}",
        )
        for name in ("prefill_tp", "decode_tp", "nics_prefill", "nics_decode", "chunk_tokens"):
            value = getattr(self, name)
            require(value is None or value >= 1, name, f"must be an integer >= 1, got {value!r}")
        require(
            self.granularity != "chunk" or self.chunk_tokens is not None,
            "chunk_tokens",
            "granularity 'chunk' needs chunk_tokens (the chunked-prefill budget C)",
        )
        require(self.layer_sync_overhead_s >= 0.0, "layer_sync_overhead_s", "must be >= 0")
        require(self.chunk_overhead_s >= 0.0, "chunk_overhead_s", "must be >= 0")
        require(
            self.prefill_tp == self.decode_tp or (self.decode_hbm_bytes_per_s or 0.0) > 0.0,
            "decode_hbm_bytes_per_s",
            "TP re-layout (prefill_tp != decode_tp) needs the decode GPU's HBM bandwidth (> 0)",
        )
        require(
            self.granularity != "chunk" or (self.prefill_hbm_bytes_per_s or 0.0) > 0.0,
            "prefill_hbm_bytes_per_s",
            "chunk granularity needs the prefill GPU's HBM bandwidth (> 0) for the KV re-read",
        )

    @property
    def side_nics(self) -> tuple[int, int]:
        """(prefill-side, decode-side) NIC or port count per instance."""
        return (self.nics_prefill or self.prefill_tp, self.nics_decode or self.decode_tp)

    @property
    def lanes(self) -> int:
        """Parallel lanes one transfer uses: the smaller side limits it."""
        return min(self.side_nics)


def replication_factor(num_kv_heads: int, tp: int) -> float:
    """KV copies held by ``tp`` ranks: ``tp·⌈n_kv/tp⌉/n_kv`` (1 if tp | n_kv; 8 heads, tp 16: 2)."""
    return tp * math.ceil(num_kv_heads / tp) / num_kv_heads


def effective_bandwidth_bytes_per_s(link: LinkLike, nics: int) -> float:
    """``line_rate·efficiency·nics``: 4 × 200 Gb/s at 0.87 → 8.7e10 B/s (Mooncake's 87 GB/s)."""
    require(link.line_rate_bytes_per_s > 0.0, "line_rate_bytes_per_s", "must be > 0")
    require(0.0 < link.efficiency <= 1.0, "efficiency", "must be in 0 < efficiency <= 1")
    require(link.per_message_latency_s >= 0.0, "per_message_latency_s", "must be >= 0")
    return link.line_rate_bytes_per_s * link.efficiency * nics
