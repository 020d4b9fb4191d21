"""Llama-3.1-70B on one 2x H100 colocated chunked instance under vLLM, chat workload (the default example's colocated
baseline): one scenario for the unit test of the ``on_demand`` admission queue and the reference test of its pinned
limit against the simulator."""

from __future__ import annotations

from pathlib import Path

from pdplan.io.scenario import scenario_from_dict
from pdplan.specs.scenario import Scenario


def llama70b_chat() -> Scenario:
    """35,090 KV tokens for 1,628-token mean prompts: the P99 bound holds few sequences and lies far below λ_pin."""
    data = {
        "model": "llama-3.1-70b",
        "mode": "colocated",
        "colocated": {"gpu": "h100-sxm", "tp": 2, "count": 1, "scheduler": "chunked"},
        "workload": "chat",
        "slo": {"ttft": "2s", "tpot": "100ms", "percentile": 90, "attainment": 0.9},
        "ttft_convention": "A",
        "engine": "vllm",
    }
    return scenario_from_dict(data, source="test", base_dir=Path.cwd())
