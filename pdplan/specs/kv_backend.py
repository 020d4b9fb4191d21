"""KV data plane as data: the transfer backends (``pdplan/data/kv_backends.yaml``) and an engine's KV connector.

A **backend** (NIXL over UCX, NCCL point-to-point, Mooncake Transfer Engine, TCP) is what moves the bytes and what
each move costs beyond the wire: ``per_descriptor_s`` (posting one descriptor: one contiguous region of one layer's
K or V on one rank pair), ``per_transfer_s`` (one request's transfer launch: building the descriptor lists, the
notification), an optional ``bandwidth_cap_bytes_per_s`` (a host-bound protocol such as TCP never reaches the
NICs' line rate), ``staging`` (copies through host memory on either side, and whether they pipeline with the
wire) and the ``tiers`` it reaches (``gpu``, ``host``, ``storage``).

A **connector** (an engine profile's ``kv_connector``: vLLM's NixlConnector, SGLang's disaggregation transfer
backend, TensorRT-LLM's cache transceiver) names its backend and how it cuts a request into descriptors
(``split``): ``block`` (one per KV block per layer per K/V per rank pair: vLLM NixlConnector), ``layer`` (one per
layer per K/V per rank pair), ``buffer`` (one per rank pair: the KV gathered into one send buffer first). Its
``block_tokens`` is the engine's default KV block (page) size and ``block_tokens_supported`` the sizes the engine
accepts (what a search may choose from). Every number carries its source; the formulas that use them are in
:mod:`pdplan.transfer.data_plane`.
"""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from pdplan.specs.base import FrozenModel

Text = Annotated[str, Field(min_length=1)]
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
PosInt = Annotated[int, Field(strict=True, ge=1)]
Tier = Literal["gpu", "host", "storage"]
Split = Literal["block", "layer", "buffer"]
Side = Literal["prefill", "decode"]


class SourcedTime(FrozenModel):
    """A time in seconds (>= 0) and where it comes from."""

    value: NonNegative
    source: Text


class SourcedRate(FrozenModel):
    """A rate in bytes per second (> 0: a backend with no bandwidth is refused) and where it comes from."""

    value: Positive
    source: Text


class Staging(FrozenModel):
    """Copies through host memory: on which ``sides``, at what rate per GPU, and whether they pipeline with the
    wire (``overlapped``: the slowest stage sets the per-byte time) or run before/after it (their times add)."""

    sides: Annotated[list[Side], Field(min_length=1)]
    bytes_per_s: SourcedRate
    overlapped: bool
    source: Text


class KvBackendSpec(FrozenModel):
    """One transfer backend (module docstring)."""

    description: Text
    per_descriptor_s: SourcedTime
    per_transfer_s: SourcedTime
    bandwidth_cap_bytes_per_s: SourcedRate | None = None
    """Aggregate rate one transfer reaches whatever the link (None: the link's ``line_rate·efficiency·lanes``)."""
    staging: Staging | None = None
    """None: GPU memory is read and written in place (GPUDirect RDMA, CUDA IPC)."""
    tiers: Annotated[list[Tier], Field(min_length=1)]
    tiers_source: Text


class KvBackendCatalog(FrozenModel):
    """The backends file: ``backends`` by name."""

    schema_version: Literal[1] = 1
    backends: Annotated[dict[Text, KvBackendSpec], Field(min_length=1)]


class KvConnector(FrozenModel):
    """An engine's KV connector (module docstring)."""

    name: Text
    backend: Text
    split: Split
    block_tokens: PosInt
    block_tokens_supported: Annotated[list[PosInt], Field(min_length=1)]
    source: Text
    granularities: Annotated[list[Literal["request", "layer", "chunk"]], Field(min_length=1)] | None = None
    """The KV-transfer granularities the connector runs (``optimize`` offers this engine only these; None: not
    restricted, for a user profile that does not say)."""
    granularities_source: Text | None = None

    @model_validator(mode="after")
    def _default_supported(self) -> "KvConnector":
        if self.block_tokens not in self.block_tokens_supported:
            raise ValueError(f"block_tokens {self.block_tokens} is not in block_tokens_supported")
        return self
