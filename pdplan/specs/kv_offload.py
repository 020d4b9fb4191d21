"""Engine KV-offload mechanisms as data (:class:`KvOffloadCatalog`, ``pdplan/data/kv_offload.yaml``).

Each mechanism (vLLM's native CPU offloading, the LMCache and Mooncake connectors, SGLang's HiCache, TensorRT-LLM's
block reuse with host offload, Dynamo's KVBM, Mooncake Store) lists which tiers it keeps, its block size, whether a
lower tier holds copies of the upper ones (inclusive) or only what the upper ones evicted (exclusive), whether loading
overlaps the prefill layer by layer, and how it evicts. Every fact carries its source, ``repository path @ commit``;
a fact that could not be found has ``value: null`` and ``source: "not found"``, never a guess. The tier model reads
``inclusion`` and ``layerwise_overlap`` (:mod:`pdplan.cache.tiers`).
"""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from pdplan.specs.base import FrozenModel
from pdplan.specs.hardware import CatalogueId

NOT_FOUND = "not found"


class _Fact(FrozenModel):
    source: Annotated[str, Field(min_length=1)]

    def _check(self, value: object) -> None:
        if value is None and self.source != NOT_FOUND:
            raise ValueError(f"a null value needs source {NOT_FOUND!r}")
        if value is not None and (self.source == NOT_FOUND or "@" not in self.source):
            raise ValueError("a value needs a source 'repository path @ commit'")


class TiersFact(_Fact):
    value: list[Literal["gpu-hbm", "host-dram", "local-ssd", "remote-pool"]] | None

    @model_validator(mode="after")
    def _sourced(self) -> "TiersFact":
        self._check(self.value)
        return self


class TextFact(_Fact):
    value: Annotated[str, Field(min_length=1)] | None

    @model_validator(mode="after")
    def _sourced(self) -> "TextFact":
        self._check(self.value)
        return self


class InclusionFact(_Fact):
    value: Literal["inclusive", "exclusive"] | None

    @model_validator(mode="after")
    def _sourced(self) -> "InclusionFact":
        self._check(self.value)
        return self


class FlagFact(_Fact):
    value: bool | None

    @model_validator(mode="after")
    def _sourced(self) -> "FlagFact":
        self._check(self.value)
        return self


class OffloadMechanism(FrozenModel):
    """One engine's KV-offload mechanism."""

    name: CatalogueId
    engine: Literal["vllm", "sglang", "trtllm", "dynamo", "mooncake"]
    display_name: Annotated[str, Field(min_length=1)]
    tiers: TiersFact
    block_tokens: TextFact
    """Tokens per offloaded block (a number, or the engine option that sets it)."""
    inclusion: InclusionFact
    layerwise_overlap: FlagFact
    eviction: TextFact
    notes: list[str] = Field(default_factory=list)


class KvOffloadCatalog(FrozenModel):
    """The mechanisms, by name."""

    schema_version: Literal[1]
    mechanisms: list[OffloadMechanism]

    def get(self, name: str) -> OffloadMechanism:
        """The mechanism called ``name`` (KeyError if none)."""
        for mechanism in self.mechanisms:
            if mechanism.name == name:
                return mechanism
        raise KeyError(name)
