"""Engine settings pdplan assumes when a scenario leaves them out (``pdplan/data/serving_defaults.yaml``, sourced)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

from pdplan.io.files import parse_yaml
from pdplan.specs.serving_defaults import ServingDefaults


@lru_cache(maxsize=1)
def serving_defaults() -> ServingDefaults:
    """The packaged serving defaults."""
    text = (resources.files("pdplan") / "data" / "serving_defaults.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = parse_yaml(text)
    data.pop("schema_version")
    return ServingDefaults(**data)
