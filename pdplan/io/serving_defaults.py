"""Engine settings pdplan assumes when a scenario leaves them out (``pdplan/data/serving_defaults.yaml``, sourced)."""

from __future__ import annotations

from functools import lru_cache

from pdplan.io.files import packaged_yaml
from pdplan.specs.serving_defaults import ServingDefaults


@lru_cache(maxsize=1)
def serving_defaults() -> ServingDefaults:
    """The packaged serving defaults."""
    data = packaged_yaml("serving_defaults.yaml")
    return ServingDefaults(**data)
