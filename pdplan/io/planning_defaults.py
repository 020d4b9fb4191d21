"""Capacity-planning margins pdplan assumes when neither the scenario nor the command line gives them
(``pdplan/data/planning_defaults.yaml``, sourced): the rate headroom, instance redundancy and the price move of the
sensitivity table."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pdplan.io.files import packaged_yaml


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
    data = packaged_yaml("planning_defaults.yaml")
    return PlanningDefaults(**data)
