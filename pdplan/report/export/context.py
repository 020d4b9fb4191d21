"""The facts an export needs besides the plan, looked up once: the model's Hugging Face id, each GPU's vendor and
node size (catalogue), images / ports / engine behaviour and node labels (``pdplan/data/export``), and the colocated
chunk pdplan prices chunked prefill with (``pdplan/data/serving_defaults.yaml``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pdplan.errors import SpecError
from pdplan.io.export_data import export_targets, node_labels
from pdplan.io.serving_defaults import serving_defaults
from pdplan.report.export.common import ExportContext, GpuFacts
from pdplan.report.export.trtllm_data import trtllm_data
from pdplan.specs.export import NodeLabel

if TYPE_CHECKING:
    from pdplan.io.catalog import Catalog
    from pdplan.specs.export import PlanDocument


def export_context(
    catalog: Catalog,
    doc: PlanDocument,
    gpus: list[str],
    *,
    model_id: str | None = None,
    node_labels_given: Sequence[str] = (),
    source: str = "<plan>",
    gpus_per_node: int | None = None,
) -> ExportContext:
    """The :class:`ExportContext` for ``doc``'s GPU types ``gpus``; ``model_id`` overrides the preset's ``hf_id``,
    ``node_labels_given`` (``GPU=KEY=VALUE``, from ``--node-label``) add to or replace the packaged node labels,
    ``gpus_per_node`` (``--gpus-per-node``) replaces the catalogue's node size of every GPU type."""
    if gpus_per_node is not None and gpus_per_node < 1:
        raise SpecError(f"--gpus-per-node must be at least 1, got {gpus_per_node}", field="--gpus-per-node")
    facts = {}
    for name in gpus:
        spec = catalog.gpu(name)
        node = spec.gpus_per_node if gpus_per_node is None else gpus_per_node
        facts[name] = GpuFacts(name, spec.display_name, spec.vendor, node, spec.memory_bytes, spec.gpus_per_node)
    defaults = serving_defaults()
    if model_id is not None:
        check_model_id(model_id, field="--model-id", source=None)
    return ExportContext(
        model_id=model_id if model_id is not None else check_model_id(hf_model_id(catalog, doc, source), source=source),
        gpus=facts,
        targets=export_targets(),
        node_labels={**node_labels().labels, **dict(parse_node_label(text) for text in node_labels_given)},
        colocated_chunk_tokens=defaults.prefill_chunk_tokens,
        colocated_chunk_source=defaults.sources["prefill_chunk_tokens"],
        sglang=catalog.engine("sglang"),
        trtllm=trtllm_data(),
        storage_kinds={name: catalog.storage(name).kind for name in tier_storages(doc)},
        model_is_moe=model_is_moe(catalog, doc),
        model_experts=model_experts(catalog, doc),
    )


def tier_storages(doc: PlanDocument) -> set[str]:
    """The storage entries the plans' cache tiers name (``plans[].cache.tier_sizes[].storage``)."""
    names = set()
    for plan in doc.plans:
        cache = plan.get("cache")
        tiers = cache.get("tier_sizes") if isinstance(cache, dict) else None
        for tier in tiers if isinstance(tiers, list) else ():
            if isinstance(tier, dict) and isinstance(tier.get("storage"), str):
                names.add(tier["storage"])
    return names


def model_is_moe(catalog: Catalog, doc: PlanDocument) -> bool | None:
    """Whether the plan's model preset (``inputs.model``) has MoE layers; None where the document names no model or
    the catalogue does not hold it (a plan exported with ``--model-id`` for a model pdplan has no preset of)."""
    name = doc.model_name
    if name is None:
        return None
    try:
        return catalog.model(name).is_moe
    except SpecError:
        return None


def model_experts(catalog: Catalog, doc: PlanDocument) -> int | None:
    """Routed experts per MoE layer of the plan's model preset (``moe.num_experts``); None for a dense model or one
    the catalogue does not hold."""
    if not model_is_moe(catalog, doc) or doc.model_name is None:
        return None
    moe = catalog.model(doc.model_name).moe
    return None if moe is None else moe.num_experts


def hf_model_id(catalog: Catalog, doc: PlanDocument, source: str) -> str:
    """The ``hf_id`` of the plan's model preset (``inputs.model``); SpecError suggesting ``--model-id`` otherwise."""
    name = doc.model_name
    if name is None:
        raise SpecError("the plan document names no model (inputs.model); pass --model-id", source=source)
    try:
        model = catalog.model(name)
    except SpecError as err:
        raise SpecError(f"{err}; pass --model-id (or --hardware-db with the model's YAML)", source=source) from None
    if model.hf_id is None:
        raise SpecError(
            f"model {name!r} has no hf_id (no public checkpoint is recorded); pass --model-id", source=source
        )
    return model.hf_id


MODEL_ID = re.compile(r"[A-Za-z0-9_./~][A-Za-z0-9_./:@+~-]{0,255}")
"""A Hugging Face repository id (``org/name``, letters, digits, ``-_.``) or a local checkpoint path (``/`` and
``~``; ``:``, ``@`` and ``+`` for revisions and mounts); no whitespace, quote, ``$`` or control character, and no
leading ``-`` (it would read as a flag). Every target writes it quoted as well; this grammar keeps it one word."""

_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
"""Kubernetes label key (optional DNS-subdomain prefix, then a name of at most 63 characters) and value grammar
(kubernetes.io/docs/concepts/overview/working-with-objects/labels, "Syntax and character set")."""


def check_model_id(model_id: str, *, field: str | None = None, source: str | None) -> str:
    """``model_id`` when it matches :data:`MODEL_ID`; SpecError naming it and the grammar otherwise."""
    if not MODEL_ID.fullmatch(model_id):
        raise SpecError(
            f"model id {model_id!r} is not a Hugging Face id or path (letters, digits and -_./:@+~, at most 256, "
            "not starting with -)",
            source=source,
            field=field,
        )
    return model_id


def parse_node_label(text: str) -> tuple[str, NodeLabel]:
    """``h100-nvl=nvidia.com/gpu.product=NVIDIA-H100-NVL`` → (GPU name, label); SpecError naming the form otherwise."""
    gpu, sep, rest = text.partition("=")
    key, sep2, value = rest.partition("=")
    if not (sep and sep2 and gpu.strip() and key.strip() and value.strip()):
        raise SpecError(
            f"{text!r} is not GPU=KEY=VALUE (e.g. h100-sxm=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3)",
            field="--node-label",
        )
    if not _LABEL_KEY.fullmatch(key.strip()) or not _LABEL_VALUE.fullmatch(value.strip()):
        raise SpecError(
            f"{text!r}: KEY and VALUE must follow Kubernetes label syntax (a name of at most 63 of A-Z a-z 0-9 -_., "
            "an optional DNS prefix before /)",
            field="--node-label",
        )
    return gpu.strip().lower(), NodeLabel(key=key.strip(), value=value.strip(), source="--node-label")
