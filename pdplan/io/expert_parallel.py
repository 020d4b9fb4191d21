"""Expert-parallel communication defaults (``pdplan/data/expert_parallel.yaml``, each with its source)."""

from __future__ import annotations

from functools import lru_cache

from pdplan.io.files import packaged_yaml
from pdplan.specs.perf_data import ExpertParallelDefaults


@lru_cache(maxsize=1)
def expert_parallel_defaults() -> ExpertParallelDefaults:
    """The packaged EP defaults."""
    data = packaged_yaml("expert_parallel.yaml")
    return ExpertParallelDefaults(**data)
