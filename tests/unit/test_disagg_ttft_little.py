"""The disaggregated-TTFT decomposition of benchmarks/disagg_ttft_little.py: Little's law on a measured row, and the
closed-loop routing simulation it compares pdplan's pooled decode seats with (issue #23)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _little() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # the script imports its neighbours (data_root, moe_rows)
    try:
        spec = importlib.util.spec_from_file_location("disagg_ttft_little", BENCH / "disagg_ttft_little.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def test_little_on_a_measured_row() -> None:
    dl = _little()
    # TensorRT-LLM 1024/1024 C = 6: D = 1023 x 14.014 ms = 14.336 s, cycle 12.345 + 14.336 = 26.681 s,
    # X = 6/26.681 = 0.22488 req/s, N_s = X.D = 3.2239, TTFT/D = 12.345/14.336 = 0.8611
    x, n_s, ratio = dl.little(6, 1024, 12.345, 14.014e-3)
    assert x == pytest.approx(0.22488, rel=1e-4)
    assert n_s == pytest.approx(3.2239, rel=1e-4)
    assert ratio == pytest.approx(0.8611, rel=1e-4)
    assert n_s + x * 12.345 == pytest.approx(6.0)  # every client is decoding or before its first token


def test_round_robin_keeps_the_pooled_seats() -> None:
    dl = _little()
    # C = y.B = 6 over 3 workers of 2 seats, prefill 0.3 s on 16 servers: round-robin never overfills a worker, so
    # TTFT = the prefill (0.3 s +- 5 %); random routing leaves a client waiting behind a full worker for a share of a
    # whole decode (10 s), so its mean is far above the prefill yet below one decode.
    rr = dl.routed_ttft_s(3, 2, 10.0, 0.3, 16, "rr", 1)
    assert rr == pytest.approx(0.3, rel=0.06)
    rand = dl.routed_ttft_s(3, 2, 10.0, 0.3, 16, "random", 1)
    assert 1.0 < rand < 10.0


def test_one_worker_has_nothing_to_route() -> None:
    dl = _little()
    # y = 1: both policies are the same single queue; with C = B every client has its seat: TTFT = the prefill
    assert dl.routed_ttft_s(1, 4, 5.0, 0.2, 4, "random", 2) == pytest.approx(0.2, rel=0.06)
