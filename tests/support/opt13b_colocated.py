"""The OPT-13B colocated pick of ``examples/opt-13b-a100-distserve.yaml`` (1x a100-sxm-80gb TP2 chunked, its workload
and SLOs), next to its decode-KV knee (docs/accuracy.md §6): one scenario for the unit test of the colocated KV limit
and the reference test against the simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdplan.io.scenario import scenario_from_dict
from pdplan.specs.scenario import Scenario


def opt13b_colocated(engine: str, output_mean: int = 200, ttft: str = "250ms") -> Scenario:
    """The example's model, workload and SLOs on its colocated TP2 chunked pick, under ``engine``; ``output_mean`` and
    ``ttft`` move it onto its KV limit (400 tokens and 1 s: the goodput is the decode-KV limit)."""
    data: dict[str, Any] = {
        "model": "opt-13b",
        "mode": "colocated",
        "colocated": {"gpu": "a100-sxm-80gb", "tp": 2, "count": 1, "scheduler": "chunked"},
        "workload": {
            "input_tokens": {"dist": "lognormal", "mean": 600, "sigma": 1.0, "min": 4, "max": 1800},
            "output_tokens": {"dist": "lognormal", "mean": output_mean, "sigma": 1.0, "min": 2, "max": 1024},
        },
        "slo": {"ttft": ttft, "tpot": "100ms", "percentile": 90, "attainment": 0.9},
        "ttft_convention": "B",
        "engine": engine,
    }
    return scenario_from_dict(data, source="test", base_dir=Path.cwd())
