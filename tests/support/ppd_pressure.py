"""The PPD cache-pressure case several tests price (benchmarks/ppd_cache_pressure.py's scenario): Qwen3-30B-A3B 1P1D
on H100, decode DP4/EP4 (each rank its own session KV), sessions of fixed turns, new and output tokens and an
exponential think time, every held Turn 2+ appended on decode (``ppd``) under session-affine routing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.resolve import ResolvedScenario, resolve


def pressure_sessions(turns: int = 4, new: int = 2000, output: int = 100, think_s: float = 20.0) -> dict[str, Any]:
    """The ``sessions`` block: fixed turns, new and output tokens, an exponential think time of mean ``think_s``."""
    fixed = {"dist": "fixed"}
    return {"turns": {**fixed, "value": turns}, "new_tokens": {**fixed, "value": new},
            "output_tokens": {**fixed, "value": output},
            "think_time": {"dist": "exponential", "mean": f"{think_s}s"}, "system_prompt_tokens": 0}  # fmt: skip


def pressure_case(sessions: dict[str, Any] | None = None, name: str = "ppd-cache-pressure") -> ResolvedScenario[Any]:
    """The case resolved, by default with 4-turn sessions of 2,000 new and 100 output tokens and 20 s of think."""
    doc: dict[str, Any] = {
        "schema_version": 1, "name": name, "model": "qwen3-30b-a3b", "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "decode": {"gpu": "h100-sxm", "tp": 1, "dp": 4, "ep": 4, "count": 1},
        "link": "ib-ndr", "granularity": "layer", "routing": "least-loaded", "engine": "vllm",
        "workload": {"sessions": sessions or pressure_sessions()},
        "cache": {"prefix_caching": True, "routing": "affinity", "turn_placement": {"policy": "ppd"}},
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }  # fmt: skip
    return resolve(scenario_from_dict(doc, source="test", base_dir=Path(".")), open_catalog())
