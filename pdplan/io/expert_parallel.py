"""Expert-parallel communication defaults (``pdplan/data/expert_parallel.yaml``, each with its source)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from pdplan.io.files import parse_yaml


@dataclass(frozen=True)
class ExpertParallelDefaults:
    """EP all-to-all and weight-gather constants (see the data file for sources)."""

    inter_node_bytes_per_s_per_gpu: float
    dispatch_latency_s: dict[str, float]
    combine_latency_s: dict[str, float]
    dispatch_bytes_per_element: float
    combine_bytes_per_element: float
    gather_overlap_jitter: float
    sources: dict[str, str]


@lru_cache(maxsize=1)
def expert_parallel_defaults() -> ExpertParallelDefaults:
    """The packaged EP defaults."""
    text = (resources.files("pdplan") / "data" / "expert_parallel.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = parse_yaml(text)
    data.pop("schema_version")
    return ExpertParallelDefaults(**data)
