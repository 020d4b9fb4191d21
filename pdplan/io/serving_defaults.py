"""Engine settings pdplan assumes when a scenario leaves them out (``pdplan/data/serving_defaults.yaml``, sourced)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from pdplan.io.files import parse_yaml


@dataclass(frozen=True)
class ServingDefaults:
    """Engine settings with their sources (see ``pdplan/data/serving_defaults.yaml``)."""

    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    prefill_chunk_tokens: int
    sources: dict[str, str]


@lru_cache(maxsize=1)
def serving_defaults() -> ServingDefaults:
    """The packaged serving defaults."""
    text = (resources.files("pdplan") / "data" / "serving_defaults.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = parse_yaml(text)
    data.pop("schema_version")
    return ServingDefaults(**data)
