"""The colocated chunk queue against the simulator near its stable limit (issue #23 item 4).

``benchmarks/chunk_queue_vs_sim.py`` sets ``pdplan/queueing/chunk_window.py`` ``chunk_queue`` and the chunked TTFT of
``pdplan/queueing/colocated_queue.py`` beside the simulator at 95 % of the closed form's stable limit (figures in
docs/accuracy.md §6; tests/reference/test_colocated_vs_sim.py checks the percentiles only at half of it).

* Long prompts (3x chat and splitwise-coding, 2,048-token budget): the drain-corrected ρ against the simulated
  chunk-busy fraction, recorded within 0.007, held to 0.03; P99 TTFT recorded -4.8 % and +6.0 %, held to the ~15 % of
  the issue.
* Short prompts (the MLPerf DGX-H100 deployment, 222-token prompts at a ~3,600-token chunk): every step takes all the
  prompts that arrived during the step before. The gated bulk mean TTFT (the script's docstring), priced at the
  simulator's own decode batch, checks that explanation (held to 6 %); the closed form's ρ (recorded +0.009, held to
  0.03) agrees. P99 TTFT: recorded +7.5 % (the landing-step wait of colocated_chunked) before the overlap scheduler's
  extra iteration (TensorRT-LLM, k = 1) entered both sides on 2026-12-07; then 0.445 against 0.529 s, −16.0 %, a
  strict xfail while the closed form's next iteration was a plain step or the per-step mean of the chunk-carrying
  ones; since the drain steps' spread (a drain step carries the K ≥ 1 prompts of the step before;
  pdplan/serving/overlap_ttft.py ``drain_step_var_s2``) is coupled to the TTFT, 0.472 s, −10.8 %, held to the
  issue's 15 %. Known miss, xfail (strict: it fails once the benchmark's estimate
  agrees): the prefill wait P99, +26 % (the benchmark's own sum of the fluid M/G/1 wait and the rest of the landing
  step, taken independent).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("chunk_queue_vs_sim")]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
FRACTION = 0.95
BUSY_TOLERANCE = 0.03
GATED_TOLERANCE = 0.06
P99_TARGET = 0.15


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCH))
        for name in ("chunk_queue_vs_sim", "mlperf_server"):
            mp.delitem(sys.modules, name, raising=False)
        import chunk_queue_vs_sim

        return chunk_queue_vs_sim


@pytest.fixture(scope="module")
def points(bench: ModuleType) -> dict[str, Any]:
    return {case.name: bench.point(case, FRACTION) for case in bench.cases()}


@pytest.mark.parametrize("name", ["3x chat", "3x splitwise-coding"])
def test_long_prompts_busy_fraction(points: dict[str, Any], name: str) -> None:
    pt = points[name]
    assert abs(pt.closed["busy"] - pt.sim["busy"]) < BUSY_TOLERANCE, (pt.closed["busy"], pt.sim["busy"])


@pytest.mark.parametrize("name", ["3x chat", "3x splitwise-coding"])
def test_long_prompts_ttft_p99(points: dict[str, Any], name: str) -> None:
    pt = points[name]
    assert abs(pt.closed_ttft_p99_s / pt.sim["ttft_p99"] - 1.0) < P99_TARGET, (pt.closed_ttft_p99_s, pt.sim)


def test_short_prompts_gated_bulk_mean(points: dict[str, Any]) -> None:
    pt = points["MLPerf DGX-H100"]
    assert pt.gated_sim_s is not None
    assert abs(pt.gated_sim_s / pt.sim["ttft_mean"] - 1.0) < GATED_TOLERANCE, (pt.gated_sim_s, pt.sim["ttft_mean"])


def test_short_prompts_busy_fraction(points: dict[str, Any]) -> None:
    pt = points["MLPerf DGX-H100"]
    assert abs(pt.closed["busy"] - pt.sim["busy"]) < BUSY_TOLERANCE, (pt.closed["busy"], pt.sim["busy"])


@pytest.mark.xfail(
    strict=True, reason="fluid wait + rest of the landing step taken independent, short prompts (docs/accuracy.md §6)"
)
def test_short_prompts_wait_p99(points: dict[str, Any]) -> None:
    pt = points["MLPerf DGX-H100"]
    assert abs(pt.closed["wait_p99"] / pt.sim["wait_p99"] - 1.0) < P99_TARGET, (pt.closed, pt.sim)


def test_short_prompts_ttft_p99(points: dict[str, Any]) -> None:
    pt = points["MLPerf DGX-H100"]
    assert abs(pt.closed_ttft_p99_s / pt.sim["ttft_p99"] - 1.0) < P99_TARGET, (pt.closed_ttft_p99_s, pt.sim)
