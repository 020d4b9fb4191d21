"""Colocated deployments (3x-CHUNKED of benchmarks/closed_form_vs_sim.py, and the same three
instances with the prefill-first scheduler) vs the simulator.

A fast subset of the benchmark grid (6,000 requests instead of 20,000, so the tolerances of
tests/reference/test_closed_form_vs_sim.py apply: P90 within ±12 %, P99 within ±15 %, goodput within
±10 %). The coding workload is the hard case for both schedulers: with short outputs a request's
decode window is dominated by what the prefill queue still holds when its own prompt leaves it
(chunked: the share of chunk-carrying steps is nearly all-or-nothing,
pdplan/queueing/chunk_window.py; prefill-first: the stall is the busy time it starts in, spread
over few steps, pdplan/queueing/colocated_queue.py). Seeds fixed: deterministic.
"""

from __future__ import annotations

import pytest
from support.goodput_bracket import goodput_bracket

from pdplan.evaluation import evaluate
from pdplan.io.overrides import apply_overrides
from pdplan.io.scenario import default_scenario_path, load_scenario
from pdplan.sim.compare import simulate_scenario
from pdplan.specs.command_line import ScenarioOverrides
from pdplan.specs.scenario import Scenario

REQUESTS = 6_000


def _colocated(workload: str, scheduler: str = "chunked") -> Scenario:
    return apply_overrides(
        load_scenario(default_scenario_path()),
        # kernels: the 2,048-token chunk budget these tolerances were set at. At vLLM's 8,192 budget (default engine)
        # the chunked coding case misses (TPOT P90 +23 %, goodput -15 % against the simulator): recorded in the report
        ScenarioOverrides(workload=workload, colocated=3, scheduler=scheduler, engine="kernels"),
    )


@pytest.mark.parametrize("scheduler", ["chunked", "prefill-first"])
@pytest.mark.parametrize("workload", ["chat", "splitwise-coding"])
def test_colocated_percentiles(workload: str, scheduler: str) -> None:
    sc = _colocated(workload, scheduler)
    rate = 0.5 * evaluate(sc).stability_limit_rps
    err = simulate_scenario(sc, rate=rate, n_requests=REQUESTS).relative_error()
    for key in ("ttft_s", "tpot_s"):
        assert abs(err[key]["p90"]) < 0.12, (key, err[key])
        assert abs(err[key]["p99"]) < 0.15, (key, err[key])


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["chunked", "prefill-first"])
def test_colocated_goodput(scheduler: str) -> None:
    """Goodput within ±10 %: two 4,000-request runs at closed / 1.1 and closed / 0.9 (tests/support/goodput_bracket.py),
    the decision the 4,000-request bisection made in about eight."""
    bracket = goodput_bracket(_colocated("splitwise-coding", scheduler), 0.10, 4_000)
    assert bracket.holds(), bracket
