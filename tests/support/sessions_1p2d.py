"""The Llama-3.1-8B 1P2D H100 session scenario (chat SLO, InfiniBand NDR, layer-wise transfer) that the PPD and
session-spread unit tests price, each with its own sessions and cache settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdplan.io.scenario import scenario_from_dict
from pdplan.specs.scenario import Scenario


def sessions_1p2d(name: str, sessions: dict[str, Any], cache: dict[str, Any], **extra: Any) -> Scenario:
    """The scenario ``name`` with these ``sessions`` and ``cache`` blocks (and any other top-level keys)."""
    data: dict[str, Any] = {
        "schema_version": 1,
        "name": name,
        "model": "llama-3.1-8b",
        "workload": {"sessions": sessions},
        "cache": cache,
        "slo": {"ttft": "200ms", "tpot": "30ms", "percentile": 90, "attainment": 0.9},
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "decode": {"gpu": "h100-sxm", "tp": 1, "count": 2},
        "link": "ib-ndr",
        "granularity": "layer",
        **extra,
    }
    return scenario_from_dict(data, source="test", base_dir=Path("."))
