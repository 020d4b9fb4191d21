"""Defaults of the external workload formats pdplan reads (``pdplan/data/workload_formats.yaml``, sourced).

Mooncake's trace block size and inference-perf's schema defaults: each applies only where a file leaves the value
out, as the tool that wrote the file would (docs/reuse_workloads.md §3, §5).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pdplan.io.files import packaged_yaml


@lru_cache(maxsize=1)
def workload_format_defaults() -> dict[str, Any]:
    """The packaged defaults, keyed by format (``mooncake``, ``inference_perf``) with their ``sources``."""
    data = packaged_yaml("workload_formats.yaml")
    return data


def mooncake_block_tokens() -> int:
    """Tokens per hash block of Mooncake's published traces (512)."""
    return int(workload_format_defaults()["mooncake"]["block_tokens"])
