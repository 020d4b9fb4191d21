"""Model files: a model YAML (keys = :class:`~pdplan.specs.model.ModelSpec` fields) and the bundled presets."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pdplan.io.files import read_yaml_mapping
from pdplan.specs.model import ModelSpec


def builtin_models_dir() -> Path:
    """The shipped model presets (package data ``pdplan/data/models/``)."""
    return Path(str(resources.files("pdplan"))) / "data" / "models"


def load_model_yaml(path: str | Path) -> ModelSpec:
    """Read one model YAML (keys = ModelSpec fields); any problem → SpecError (file, field)."""
    return ModelSpec.from_mapping(read_yaml_mapping(Path(path)), source=str(path))


def list_preset_paths() -> dict[str, Path]:
    """Bundled presets, id → ``pdplan/data/models/<id>.yaml`` (package data, found after install)."""
    entries = sorted(builtin_models_dir().glob("*.yaml"), key=lambda e: e.name)
    return {e.name.removesuffix(".yaml"): e for e in entries}
