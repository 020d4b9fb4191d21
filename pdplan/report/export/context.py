"""The facts an export needs besides the plan, looked up once: the model's Hugging Face id, each GPU's vendor and
node size (catalogue), images / ports / engine behaviour and node labels (``pdplan/data/export``), and the colocated
chunk pdplan prices chunked prefill with (``pdplan/data/serving_defaults.yaml``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pdplan.errors import SpecError
from pdplan.io.export_data import export_targets, node_labels
from pdplan.io.serving_defaults import serving_defaults
from pdplan.report.export.common import ExportContext, GpuFacts
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
) -> ExportContext:
    """The :class:`ExportContext` for ``doc``'s GPU types ``gpus``; ``model_id`` overrides the preset's ``hf_id``,
    ``node_labels_given`` (``GPU=KEY=VALUE``, from ``--node-label``) add to or replace the packaged node labels."""
    facts = {}
    for name in gpus:
        spec = catalog.gpu(name)
        facts[name] = GpuFacts(name, spec.display_name, spec.vendor, spec.gpus_per_node)
    defaults = serving_defaults()
    return ExportContext(
        model_id=model_id or hf_model_id(catalog, doc, source),
        gpus=facts,
        targets=export_targets(),
        node_labels={**node_labels().labels, **dict(parse_node_label(text) for text in node_labels_given)},
        colocated_chunk_tokens=defaults.prefill_chunk_tokens,
        colocated_chunk_source=defaults.sources["prefill_chunk_tokens"],
    )


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


def parse_node_label(text: str) -> tuple[str, NodeLabel]:
    """``h100-nvl=nvidia.com/gpu.product=NVIDIA-H100-NVL`` → (GPU name, label); SpecError naming the form otherwise."""
    gpu, sep, rest = text.partition("=")
    key, sep2, value = rest.partition("=")
    if not (sep and sep2 and gpu.strip() and key.strip() and value.strip()):
        raise SpecError(
            f"{text!r} is not GPU=KEY=VALUE (e.g. h100-sxm=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3)",
            field="--node-label",
        )
    return gpu.strip().lower(), NodeLabel(key=key.strip(), value=value.strip(), source="--node-label")
