"""Trace replay in ``simulate`` (pdplan.sim.trace_replay): a trace's gaps scaled to a rate, its own arrivals replayed
(bursts queue behind each other), and ``pdplan simulate`` on a trace without a rate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.trace_files import write_trace

Cli = Callable[..., Any]
SMALL = Path(__file__).parents[1] / "data" / "small_scenario.yaml"


def test_trace_gaps_scale_to_the_rate() -> None:
    from pdplan.sim.trace_replay import native_rate_rps, scaled_arrivals_s

    arrivals = np.array([0.0, 1.0, 3.0])
    assert native_rate_rps(arrivals) == pytest.approx(2 / 3)
    # rate 2 req/s: every gap x (2/3)/2 = 1/3
    assert scaled_arrivals_s(arrivals, 2.0) == pytest.approx([0.0, 1 / 3, 1.0])


def _trace_scenario(tmp_path: Path, arrivals: list[float]) -> Any:
    from pdplan.io.scenario import load_scenario

    write_trace(tmp_path, arrivals)
    text = SMALL.read_text().split("workload:")[0]
    tail = SMALL.read_text().split("slo:")[1]
    path = tmp_path / "sc.yaml"
    path.write_text(text + "workload:\n  trace: trace.csv\n  arrival: trace\nslo:" + tail)
    return load_scenario(path)


def test_simulate_replays_the_trace_arrivals(tmp_path: Path) -> None:
    from pdplan.sim.compare import simulate_scenario

    # 400 requests in bursts of 20 arriving together every 20 s: the trace's own rate is 399/380 req/s
    arrivals = [20.0 * (i // 20) for i in range(400)]
    sc = _trace_scenario(tmp_path, arrivals)
    replay = simulate_scenario(sc, n_requests=100)
    assert replay.settings["arrivals"] == "trace"
    assert replay.settings["requests"] == 400
    assert replay.evaluation.operating_point is not None
    assert replay.evaluation.operating_point.rate_rps == pytest.approx(399 / 380)
    as_poisson = sc.model_copy(update={"workload": sc.workload.model_copy(update={"arrival": "poisson"})})
    poisson = simulate_scenario(as_poisson, rate=399 / 380, n_requests=400)
    assert replay.simulated is not None
    assert poisson.simulated is not None
    # bursts of 20 queue behind each other: the replay's TTFT tail is far above Poisson arrivals at the same rate
    assert replay.simulated.ttft_s.p90 > 3.0 * poisson.simulated.ttft_s.p90


def test_simulate_cli_runs_a_trace_without_a_rate(cli: Cli, tmp_path: Path) -> None:
    _trace_scenario(tmp_path, [0.5 * i for i in range(200)])
    result = cli("simulate", tmp_path / "sc.yaml", "--format", "json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["simulation"]["arrivals"] == "trace"
