"""A deployment whose prefill and decode GPUs come from two vendors (B200 prefill, MI300X decode).

pdplan prices such a plan like any other (the KV transfer is bytes over the link), but the serving engines'
disaggregation runs one engine build for both roles — CUDA or ROCm — and documents KV transfer between
instances of one vendor only (vLLM's NIXL/P2P connectors, SGLang's Mooncake/NIXL backends, Dynamo,
TensorRT-LLM), so the reports say that such a plan is a what-if and cannot be deployed as it stands.
"""

from __future__ import annotations

from typing import Any

from pdplan.serving.resolve import DisaggregatedHardware, ResolvedScenario


def cross_vendor_warning(res: ResolvedScenario[Any]) -> str | None:
    """The warning for a disaggregated deployment pairing GPUs of two vendors for KV transfer (None otherwise)."""
    if not isinstance(res.hardware, DisaggregatedHardware):
        return None
    pre, dec = res.hardware.prefill.gpu, res.hardware.decode.gpu
    if pre.vendor == dec.vendor:
        return None
    return (
        f"{pre.name} prefill ({pre.vendor}) with {dec.name} decode ({dec.vendor}): no serving engine supports KV "
        "transfer between GPUs of two vendors (vLLM, SGLang, Dynamo and TensorRT-LLM disaggregate within one "
        "vendor's build), so this pairing is a what-if, not a deployable plan"
    )
