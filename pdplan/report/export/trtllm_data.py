"""What ``pdplan export --to trtllm`` reads besides the plan: ``pdplan/data/export/trtllm.yaml`` (the TensorRT-LLM
release, ports, KV transfer backend, routers, granularity and vendors, each with its source)."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field

from pdplan.specs.base import FrozenModel, validate_spec
from pdplan.specs.export import Granularity, Vendor

Policy = Literal["random", "round-robin", "least-work", "least-loaded", "power-of-two"]


class TrtllmData(FrozenModel):
    """``pdplan/data/export/trtllm.yaml``."""

    version: str
    backend: str
    colocated_port: int = Field(ge=1, le=65535)
    context_port: int = Field(ge=1, le=65535)
    generation_port: int = Field(ge=1, le=65535)
    server_port: int = Field(ge=1, le=65535)
    cache_transceiver_backend: str
    routers: dict[Policy, str]
    moe_backends: dict[str, str] = Field(default_factory=dict)
    """``MoeConfig.backend`` per priced MoE kernel (``sources.moe_backends``); a kernel not listed writes none."""
    kv_transfer_granularity: Granularity
    vendors: list[Vendor]
    sources: dict[str, str]


@lru_cache(maxsize=1)
def trtllm_data() -> TrtllmData:
    """The packaged ``trtllm.yaml``, validated."""
    from pdplan.io.files import packaged_yaml

    return validate_spec(TrtllmData, packaged_yaml("export/trtllm.yaml"), "pdplan/data/export/trtllm.yaml")
