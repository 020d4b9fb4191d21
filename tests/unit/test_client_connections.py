"""The benchmark client's connection cap (benchmarks/client_connections.py): vLLM's ``bench serve`` ran 100
connections, so a concurrency above 100 queues at the client (Little's law on a measured row, the TTFT it adds, and
which rows it applies to)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "client_connections.py"


def _client_connections() -> ModuleType:
    spec = importlib.util.spec_from_file_location("client_connections", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_client_connection_cap() -> None:
    cc = _client_connections()
    # Little's law on the TP8 1024/1024 C = 512 row: 512 x 1023 x 5.333 ms / (22.295 s + 1023 x 5.333 ms) = 101
    assert cc.in_service_from_measured(512, 1024, 22.295, 5.333e-3) == pytest.approx(101.0, abs=0.5)
    # priced at 100 clients: TTFT 1 s, TPOT 10 ms -> cycle 1 + 10.23 = 11.23 s; wait (5.12 - 1) x 11.23 = 46.27 s
    assert cc.client_ttft_s(512, 100, 1024, 1.0, 0.01) == pytest.approx(1.0 + 4.12 * 11.23)
    assert cc.client_ttft_s(64, 100, 1024, 1.0, 0.01) == 1.0
    row = {"engine": "vllm"}
    assert cc.connections_of(row, "measured=2025-12-08T00:00:00.000Z") == 100
    assert cc.connections_of(row, "measured=2026-03-27T08:01:51Z") is None
    assert cc.connections_of({"engine": "trtllm"}, "measured=2025-12-08") is None
