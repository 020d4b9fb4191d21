"""One request's KV transfer from catalogue names (the library call behind ``pdplan transfer``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.io.engines import DEFAULT_ENGINE
from pdplan.io.perf_data import perf_data
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import prefill_time_s
from pdplan.perf.sharding import sharding_error
from pdplan.serving.resolve import DTYPE_BYTES
from pdplan.specs.command_line import flag
from pdplan.transfer.kv import transfer_for_request
from pdplan.transfer.kv_inputs import GRANULARITIES, TransferConfig
from pdplan.transfer.plane_setup import resolve_data_plane

if TYPE_CHECKING:
    from pdplan.specs.model import ModelSpec


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
    backend: str | None = None,
    block_tokens: int | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """Keys ``bytes``, ``time_s``, ``exposed_s`` (+ messages, prefill time, bandwidth ...); with a data plane (the
    default: the engine's connector; ``backend="none"`` turns it off) also the data plane's ``backend``,
    ``block_tokens``, ``descriptors`` and ``overhead_s`` (:mod:`pdplan.transfer.plane_setup`, under ``engine``'s
    connector, default vLLM's).

    Layer/chunk granularity overlaps the transfer with prefill, so it needs ``gpu`` (the prefill
    time comes from the roofline at batch 1); a TP mismatch needs it for the re-layout HBM rate.
    """
    if granularity not in GRANULARITIES:
        raise SpecError(f"{granularity!r} is not one of {', '.join(GRANULARITIES)}", field=flag("granularity"))
    if kv_dtype not in DTYPE_BYTES:
        raise SpecError(f"{kv_dtype!r} is not one of bf16, fp8", field=flag("kv_dtype"))
    spec = catalog.model(model)
    for role_tp, field in ((prefill_tp, "prefill_tp"), (decode_tp, "decode_tp")):
        sharding = sharding_error(spec, role_tp)
        if sharding is not None:
            raise SpecError(sharding[1], field=flag(field))
    if tokens > spec.max_position_embeddings:
        raise SpecError(
            f"{tokens} tokens exceed {spec.name}'s context window of {spec.max_position_embeddings}", field="--tokens"
        )
    link_spec = catalog.link(link)
    needs_gpu = granularity != "request" or prefill_tp != decode_tp
    if needs_gpu and gpu is None:
        raise SpecError(
            f"layer/chunk granularity and a TP mismatch need {flag('gpu')} (prefill time, HBM bandwidth)",
            field=flag("gpu"),
        )
    prefill_s, hbm = (None, None) if gpu is None else _prefill(catalog, spec, gpu, tokens, prefill_tp, kv_dtype)
    from pdplan.io.serving_defaults import serving_defaults

    chunk = chunk_tokens or serving_defaults().prefill_chunk_tokens
    cfg = TransferConfig(
        granularity=granularity,
        prefill_tp=prefill_tp,
        decode_tp=decode_tp,
        chunk_tokens=chunk if granularity == "chunk" else None,
        prefill_hbm_bytes_per_s=hbm,
        decode_hbm_bytes_per_s=hbm,
        data_plane=resolve_data_plane(backend, block_tokens, catalog.engine(engine or DEFAULT_ENGINE)),
    )
    doc: dict[str, Any] = {"model": spec.name, "tokens": tokens, "link": link_spec.name}
    doc.update(
        transfer_for_request(
            spec, float(tokens), link_spec, cfg, kv_dtype_bytes=DTYPE_BYTES[kv_dtype], prefill_time_s=prefill_s
        )
    )
    doc["prefill_time_s"] = prefill_s
    return doc


def _prefill(catalog: Catalog, model: ModelSpec, gpu: str, tokens: int, tp: int, kv_dtype: str) -> tuple[float, float]:
    """(prefill time of the request alone on ``gpu`` at TP ``tp``, s; the GPU's HBM bandwidth, B/s)."""
    gpu_spec = catalog.gpu(gpu)
    table = catalog.kernel_table(gpu_spec.name)
    time_s = prefill_time_s(
        model,
        gpu_spec,
        table,
        batch=1,
        tokens=tokens,
        tp=tp,
        precision=Precision(kv_bytes=DTYPE_BYTES[kv_dtype]),
        data=perf_data(model, gpu_spec, table, tp=tp),
    )
    return float(time_s), gpu_spec.memory_bytes_per_s
