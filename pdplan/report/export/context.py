"""The facts an export needs besides the plan, looked up once: the model's Hugging Face id, each GPU's vendor and
node size (catalogue), images / ports / engine behaviour and node labels (``pdplan/data/export``), and the colocated
chunk pdplan prices chunked prefill with (``pdplan/data/serving_defaults.yaml``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdplan.errors import SpecError
from pdplan.io.export_data import export_targets, node_labels
from pdplan.io.serving_defaults import serving_defaults
from pdplan.report.export.common import ExportContext, GpuFacts

if TYPE_CHECKING:
    from pdplan.io.catalog import Catalog
    from pdplan.specs.export import PlanDocument


def export_context(
    catalog: Catalog, doc: PlanDocument, gpus: list[str], *, model_id: str | None = None, source: str = "<plan>"
) -> ExportContext:
    """The :class:`ExportContext` for ``doc``'s GPU types ``gpus``; ``model_id`` overrides the preset's ``hf_id``."""
    facts = {}
    for name in gpus:
        spec = catalog.gpu(name)
        facts[name] = GpuFacts(name, spec.display_name, spec.vendor, spec.gpus_per_node)
    defaults = serving_defaults()
    return ExportContext(
        model_id=model_id or hf_model_id(catalog, doc, source),
        gpus=facts,
        targets=export_targets(),
        node_labels=node_labels().labels,
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
