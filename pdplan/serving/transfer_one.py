"""One request's KV transfer from catalogue names (the library call behind ``pdplan transfer``)."""

from __future__ import annotations

from typing import Any

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.perf.roofline import Precision, prefill_time_s
from pdplan.serving.inputs import DTYPE_BYTES
from pdplan.transfer.kv import GRANULARITIES, TransferConfig, transfer_for_request


def one_transfer(
    catalog: Catalog,
    *,
    model: str,
    tokens: int,
    link: str,
    granularity: str,
    prefill_tp: int = 1,
    decode_tp: int = 1,
    gpu: str | None = None,
    kv_dtype: str = "bf16",
    chunk_tokens: int | None = None,
) -> dict[str, Any]:
    """Keys ``bytes``, ``time_s``, ``exposed_s`` (+ messages, prefill time, bandwidth ...).

    Layer/chunk granularity overlaps the transfer with prefill, so it needs ``gpu`` (the prefill
    time comes from the roofline at batch 1); a TP mismatch needs it for the re-layout HBM rate.
    """
    if granularity not in GRANULARITIES:
        raise SpecError(f"{granularity!r} is not one of {', '.join(GRANULARITIES)}", field="--granularity")
    if kv_dtype not in DTYPE_BYTES:
        raise SpecError(f"{kv_dtype!r} is not one of bf16, fp8", field="--kv-dtype")
    spec = catalog.model(model)
    link_spec = catalog.link(link)
    needs_gpu = granularity != "request" or prefill_tp != decode_tp
    if needs_gpu and gpu is None:
        raise SpecError(
            "layer/chunk granularity and a TP mismatch need --gpu (prefill time, HBM bandwidth)", field="--gpu"
        )
    prefill_s: float | None = None
    hbm: float | None = None
    if gpu is not None:
        gpu_spec = catalog.gpu(gpu)
        hbm = gpu_spec.memory_bytes_per_s
        kvb = DTYPE_BYTES[kv_dtype]
        prefill_s = float(
            prefill_time_s(
                spec,
                gpu_spec,
                catalog.kernel_table(gpu_spec.name),
                batch=1,
                tokens=tokens,
                tp=prefill_tp,
                precision=Precision(kv_bytes=kvb),
            )
        )
    from pdplan.io.serving_defaults import serving_defaults

    chunk = chunk_tokens or serving_defaults().prefill_chunk_tokens
    cfg = TransferConfig(
        granularity=granularity,
        prefill_tp=prefill_tp,
        decode_tp=decode_tp,
        chunk_tokens=chunk if granularity == "chunk" else None,
        prefill_hbm_bytes_per_s=hbm,
        decode_hbm_bytes_per_s=hbm,
    )
    doc: dict[str, Any] = {"model": spec.name, "tokens": tokens, "link": link_spec.name}
    doc.update(
        transfer_for_request(
            spec, float(tokens), link_spec, cfg, kv_dtype_bytes=DTYPE_BYTES[kv_dtype], prefill_time_s=prefill_s
        )
    )
    doc["prefill_time_s"] = prefill_s
    return doc
