"""Catalogue and validation reports: ``pdplan hardware list|show``, ``pdplan models list|show``, ``pdplan validate``.

Records are flat and in human units (TFLOP/s, GiB, Gbit/s, µs) for the table, CSV and Markdown views; the JSON
documents are the specs themselves (SI units, as in the YAML files). Library use::

    from pdplan import open_catalog
    from pdplan.report.catalog import model_show_view
    model_show_view(open_catalog().model("deepseek-v3")).document["kv_bytes_per_token"]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pdplan.report.render import View
from pdplan.units import GIB

if TYPE_CHECKING:
    from pdplan.io.validation import ValidationResult
    from pdplan.specs.hardware import GpuSpec, LinkSpec
    from pdplan.specs.model import ModelSpec
    from pdplan.specs.storage import StorageSpec


def gpu_record(gpu: GpuSpec) -> dict[str, Any]:
    """One GPU as a flat record in human units (the table/CSV/Markdown view)."""
    return {
        "name": gpu.name,
        "bf16_tflops": gpu.bf16_flops_per_s / 1e12,
        "fp8_tflops": None if gpu.fp8_flops_per_s is None else gpu.fp8_flops_per_s / 1e12,
        "memory_gib": gpu.memory_bytes / GIB,
        "memory_tb_per_s": gpu.memory_bytes_per_s / 1e12,
        "scale_up": gpu.scale_up_fabric,
        "scale_up_gb_per_s": gpu.scale_up_bytes_per_s / 1e9,
        "gpus_per_node": gpu.gpus_per_node,
        "tdp_w": gpu.tdp_w,
        "usd_per_gpu_hour": None if gpu.price is None else gpu.price.typical_usd_per_gpu_hour,
    }


def link_record(link: LinkSpec) -> dict[str, Any]:
    """One link as a flat record in human units."""
    return {
        "name": link.name,
        "kind": link.kind,
        "scope": link.scope,
        "line_rate_gbit_per_s": link.line_rate_bytes_per_s * 8 / 1e9,
        "efficiency": link.efficiency,
        "latency_us": link.per_message_latency_s * 1e6,
    }


def gpus_view(gpus: Sequence[GpuSpec]) -> View:
    """``pdplan hardware list``: one record per GPU; JSON is the list of specs."""
    return View(records=[gpu_record(g) for g in gpus], document=_dumps(gpus), title="pdplan gpus")


def links_view(links: Sequence[LinkSpec]) -> View:
    """``pdplan hardware list --kind links``: one record per link; JSON is the list of specs."""
    return View(records=[link_record(k) for k in links], document=_dumps(links), title="pdplan links")


def storage_record(tier: StorageSpec) -> dict[str, Any]:
    """One storage tier as a flat record in human units."""
    return {
        "name": tier.name,
        "kind": tier.kind,
        "capacity_gib": None if tier.capacity_bytes is None else tier.capacity_bytes / GIB,
        "read_gb_per_s": tier.read_bytes_per_s / 1e9,
        "gpu_path_gb_per_s": tier.gpu_path_bytes_per_s / 1e9,
        "latency_us": None if tier.latency_s is None else tier.latency_s * 1e6,
        "usd_per_gib_hour": tier.price_usd_per_gib_hour,
    }


def storage_view(tiers: Sequence[StorageSpec]) -> View:
    """``pdplan hardware list --kind storage``: one record per storage tier; JSON is the list of specs."""
    return View(records=[storage_record(t) for t in tiers], document=_dumps(tiers), title="pdplan storage tiers")


def _dumps(specs: Sequence[GpuSpec | LinkSpec | StorageSpec]) -> list[dict[str, Any]]:
    return [s.model_dump(mode="json") for s in specs]


def hardware_show_view(spec: GpuSpec | LinkSpec | StorageSpec) -> View:
    """``pdplan hardware show``: one row per field with its source; JSON is the spec."""
    document = spec.model_dump(mode="json")
    records = [
        {"field": key, "value": value, "source": spec.sources.get(key, "")}
        for key, value in document.items()
        if key not in ("sources",)
    ]
    return View(records=records, document=document, title=spec.display_name)


def model_record(model: ModelSpec) -> dict[str, Any]:
    """One model as a flat record: sizes and KV footprint."""
    return {
        "name": model.name,
        "family": model.family,
        "attention": model.attention_kind,
        "layers": model.num_layers,
        "total_params_b": model.total_params() / 1e9,
        "active_params_b": model.active_params() / 1e9,
        "kv_bytes_per_token": model.kv_bytes_per_token(2),
        "kv_bytes_per_token_fp8": model.kv_bytes_per_token(1),
        "linear_state_bytes_per_seq": model.linear_state_bytes_per_sequence(),
        "max_context": model.max_position_embeddings,
    }


def model_document(model: ModelSpec) -> dict[str, Any]:
    """A model as JSON: the contract keys first, then the spec and derived values."""
    record = model_record(model)
    return {
        "name": model.name,
        "kv_bytes_per_token": record["kv_bytes_per_token"],
        "derived": record,
        "spec": model.model_dump(mode="json"),
    }


def models_list_view(models: Sequence[ModelSpec]) -> View:
    """``pdplan models list``: parameter counts and KV bytes per token (BF16 and FP8) per model."""
    return View(
        records=[model_record(m) for m in models],
        document=[model_document(m) for m in models],
        title="pdplan models",
    )


def window_rows(model: ModelSpec) -> dict[str, Any]:
    """A windowed model's sliding window as ``models show`` rows (none without one): its tokens, the layers it
    covers, and how a sequence's KV counts it (:mod:`pdplan.specs.model_kv`): every layer windowed, a sequence holds
    min(L, window) tokens (Mistral-7B v0.1: 4,096 on 32 of 32 layers); beside global layers, a fixed window of K/V
    per sequence (gpt-oss-120b: 128 on 18 of 36 layers, 18·128·8·(64 + 64)·2 B = 4,718,592 B)."""
    sw = model.sliding_window
    if sw is None:
        return {}
    held = (
        f"a sequence holds min(L, {sw.window:,}) tokens"
        if model.all_layers_windowed
        else f"{model.window_kv_bytes_per_sequence(2):,.0f} B (bf16) of window K/V per sequence"
    )
    return {
        "sliding_window_tokens": sw.window,
        "sliding_window_layers": f"{len(sw.layers)} of {model.num_layers} ({held})",
    }


def model_show_view(model: ModelSpec) -> View:
    """``pdplan models show``: one row per derived value (and the sliding window, :func:`window_rows`); JSON is
    :func:`model_document` (its ``spec`` holds the window)."""
    rows = model_record(model) | window_rows(model)
    records = [{"field": key, "value": value} for key, value in rows.items()]
    return View(records=records, document=model_document(model), title=model.display_name)


def validation_view(result: ValidationResult) -> View:
    """``pdplan validate``: one record per file; JSON ``ok``, ``errors`` (docs/architecture.md §4) and ``files``."""
    records = [{"file": r.file, "kind": r.kind, "ok": r.ok, "error": r.error} for r in result.files]
    document = {
        "ok": result.ok,
        "errors": [{"file": r.file, "message": r.error} for r in result.files if not r.ok],
        "files": records,
    }
    return View(records=records, document=document, title="pdplan validate")


def validation_error(result: ValidationResult) -> str | None:
    """The one stderr line of a failed validation, naming the first bad file (None when every file is good)."""
    bad = [r for r in result.files if not r.ok]
    if not bad:
        return None
    n_more = len(bad) - 1
    more = f" (and {n_more} more invalid file{'s' if n_more > 1 else ''})" if n_more else ""
    return " ".join(f"{bad[0].error}{more}".split())
