"""Scenario files: read a scenario YAML, resolve its workload (preset name or file), apply CLI overrides.

:func:`load_scenario` turns every failure into one-line :class:`~pdplan.errors.SpecError` naming the file and the
field; the schema itself is :class:`pdplan.specs.scenario.Scenario` (no file I/O there).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.io.files import read_yaml_mapping
from pdplan.io.workloads import list_presets, load_preset_workload, load_workload
from pdplan.specs.base import first_error_line
from pdplan.specs.scenario import Scenario
from pdplan.specs.workload import WorkloadSpec

SCENARIO_KEYS = ("mode", "prefill", "decode", "colocated", "slo")
"""Top-level keys by which ``pdplan validate`` recognises a scenario file."""


def resolve_workload(name_or_path: str, base_dir: Path) -> WorkloadSpec:
    """A preset name (``chat``) or a workload YAML path (relative to ``base_dir``)."""
    if name_or_path in list_presets():
        return load_preset_workload(name_or_path)
    path = Path(name_or_path)
    if not path.is_absolute():
        path = base_dir / path
    if path.suffix.lower() in (".yaml", ".yml") or path.exists():
        return load_workload(path)
    return load_preset_workload(name_or_path)  # unknown name → error with suggestions


def scenario_from_dict(data: dict[str, Any], *, source: str, base_dir: Path) -> Scenario:
    """Validate a scenario mapping; pydantic and workload errors become one-line SpecError."""
    try:
        return Scenario.model_validate(data, context={"base_dir": base_dir, "resolve_workload": resolve_workload})
    except ValidationError as err:
        field, message = first_error_line(err)
        top = field == "(top level)"
        raise SpecError(message, source=source, field=None if top else field) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    path = Path(path)
    return scenario_from_dict(read_yaml_mapping(path), source=str(path), base_dir=path.parent)


def revalidate(scenario: Scenario, update: dict[str, Any], *, source: str = "overrides") -> Scenario:
    """``scenario`` with ``update`` applied, validated again (CLI overrides; docs/architecture.md §8)."""
    data = scenario.model_dump()
    data.update(update)
    try:
        return Scenario.model_validate(data, context={"base_dir": Path.cwd(), "resolve_workload": resolve_workload})
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(message, source=source, field=field) from None


def default_scenario_path() -> Path:
    """The bundled default scenario (package data, identical to ``examples/default.yaml``)."""
    return Path(str(resources.files("pdplan") / "data" / "default_scenario.yaml"))
