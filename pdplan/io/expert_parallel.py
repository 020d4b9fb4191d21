"""Expert-parallel communication defaults (``pdplan/data/expert_parallel.yaml``, each with its source)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

from pdplan.io.files import parse_yaml
from pdplan.specs.perf_data import ExpertParallelDefaults


@lru_cache(maxsize=1)
def expert_parallel_defaults() -> ExpertParallelDefaults:
    """The packaged EP defaults."""
    text = (resources.files("pdplan") / "data" / "expert_parallel.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = parse_yaml(text)
    data.pop("schema_version")
    return ExpertParallelDefaults(**data)
