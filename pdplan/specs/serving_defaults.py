"""Engine settings pdplan assumes when a scenario leaves them out (:class:`ServingDefaults`; schema only).

The values, each with its source, are ``pdplan/data/serving_defaults.yaml`` (read by
:func:`pdplan.io.serving_defaults.serving_defaults`); the memory model takes them as a parameter
(:func:`pdplan.perf.memory.instance_memory`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServingDefaults:
    """Engine settings with their sources (see ``pdplan/data/serving_defaults.yaml``)."""

    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    prefill_chunk_tokens: int
    sources: dict[str, str]
