"""Read a Hugging Face ``config.json`` into a :class:`~pdplan.specs.model.ModelSpec`.

One builder per supported ``model_type`` (:data:`pdplan.io.hf_families.BUILDERS`) maps HF keys to ModelSpec
fields, following the module layout of the matching ``transformers`` model. A key the builder needs and the file
lacks is an error naming the key. Some keys may be absent from real configs because ``transformers`` fills them
with a class default (``tie_word_embeddings``, bias flags, ``num_key_value_heads`` = heads,
``head_dim`` = hidden / heads); those defaults are applied explicitly and listed in the spec's
``notes``. Features pdplan does not model (OPT's embedding projection, MLA attention biases) raise SpecError.
"""

from __future__ import annotations

import re
from pathlib import Path

from pdplan.errors import SpecError
from pdplan.io.hf_families import BUILDERS, SUPPORTED_MODEL_TYPES
from pdplan.io.hf_quant import quantization_fields
from pdplan.io.hf_reader import HfConfig, read_json
from pdplan.specs.model import ModelSpec

__all__ = ["SUPPORTED_MODEL_TYPES", "load_hf_config"]


def _default_name(path: Path) -> tuple[str, str]:
    """(id, display name) from the file stem, or the folder name for ``.../<model>/config.json``."""
    label = path.parent.name if path.stem == "config" and path.parent.name else path.stem
    ident = re.sub(r"[^a-z0-9._-]+", "-", label.lower()).strip("-._")
    return ident or "hf-model", label or "hf-model"


def load_hf_config(path: str | Path, *, name: str | None = None) -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config.json (model_type in SUPPORTED_MODEL_TYPES).

    The id is ``name`` if given, else the file name (its folder's for ``.../config.json``).
    Raises SpecError naming the file and the key on unreadable files, bad JSON, unsupported
    model_type, missing keys or values the spec rejects.
    """
    p, source = Path(path), str(path)
    data = read_json(p, source)
    model_type = data.get("model_type")
    if not isinstance(model_type, str):
        raise SpecError("missing required key 'model_type'", source=source, field="model_type")
    builder = BUILDERS.get(model_type)
    if builder is None:
        raise SpecError(
            f"unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}",
            source=source,
            field="model_type",
        )
    cfg = HfConfig(data, source)
    fields = builder(cfg) | quantization_fields(cfg.data.get("quantization_config"), cfg.source, cfg.defaults)
    ident, label = _default_name(p)
    notes = f"Converted from config.json (model_type {model_type})."
    if cfg.defaults:
        notes += " Defaults applied: " + "; ".join(cfg.defaults) + "."
    fields |= {
        "schema_version": 1,
        "name": name or ident,
        "display_name": label,
        "family": model_type,
        "source": f"Hugging Face config.json: {source}",
        "notes": notes,
    }
    return ModelSpec.from_mapping(fields, source=source)
