"""Capacity-planning margins pdplan assumes when neither the scenario nor the command line gives them
(``pdplan/data/planning_defaults.yaml``, sourced): the rate headroom, instance redundancy and the price move of the
sensitivity table."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from pdplan.io.files import parse_yaml


@dataclass(frozen=True)
class PlanningDefaults:
    """Planning margins with their sources (see ``pdplan/data/planning_defaults.yaml``)."""

    headroom: float
    redundancy: str
    price_sensitivity: float
    sources: dict[str, str]


@lru_cache(maxsize=1)
def planning_defaults() -> PlanningDefaults:
    """The packaged planning defaults."""
    text = (resources.files("pdplan") / "data" / "planning_defaults.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = parse_yaml(text)
    data.pop("schema_version")
    return PlanningDefaults(**data)
