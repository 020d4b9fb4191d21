"""The benchmark closed loop (benchmark/colocated_loop.py) against its event-by-event replay (sim/bench.py), and by
hand (cohorts, Little's law, groups, the decode step read from the roofline's grid, vLLM's on-demand KV admission:
requests hold ISL + (OSL − 1)/2 tokens on average).

The simulator schedules every step itself (budget, seats, KV, mixed or prefill-only steps) and prices chunks from
its own roofline tables, so it shares neither the cohort/group arithmetic nor the burst staircase with the closed
form. Tolerance 10 % on mean TTFT and TPOT. Points where the closed form misses are recorded in
docs/accuracy_benchmark_loop.md (benchmarks/benchmark_loop_vs_sim.py), not hidden here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from pdplan.benchmark.colocated_loop import LoopInputs, admitted, benchmark_loop, decode_s, settled_groups
from pdplan.benchmark.loop_inputs import benchmark_of
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.queueing import LinearStepTime
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.resolve import resolve
from pdplan.sim.bench import simulate_benchmark

CATALOG = open_catalog()


def _model(engine: str, isl: int, osl: int) -> ColocatedModel:
    sc = scenario_from_dict(
        {
            "model": "qwen3-32b",
            "mode": "colocated",
            "colocated": {"gpu": "h100-sxm", "tp": 2, "count": 1, "scheduler": "chunked"},
            "workload": {
                "input_tokens": {"dist": "fixed", "value": isl},
                "output_tokens": {"dist": "fixed", "value": osl},
            },
            "engine": engine,
        },
        source="test",
        base_dir=Path.cwd(),
    )
    model = build_model(resolve(sc, CATALOG))
    assert isinstance(model, ColocatedModel)
    return model


@pytest.mark.parametrize(
    ("engine", "c", "isl", "osl"),
    [
        ("sglang", 4, 1024, 128),
        ("sglang", 16, 4096, 512),
        ("sglang", 64, 256, 1024),
        ("vllm", 4, 1024, 128),
        ("vllm", 16, 256, 1024),
        ("vllm", 64, 1024, 128),
    ],
)
def test_closed_form_agrees_with_the_replay(engine: str, c: int, isl: int, osl: int) -> None:
    model = _model(engine, isl, osl)
    closed = benchmark_of(model, c, 5 * c, c, grouped=True)  # the replay is deterministic: phase-locked groups
    sim = simulate_benchmark(model, c, 5 * c, c)
    assert closed.mean_tpot_s == pytest.approx(sim.mean_tpot_s, rel=0.10)
    assert closed.mean_ttft_s - sim.extra_s == pytest.approx(sim.mean_ttft_s - sim.extra_s, rel=0.10)


def _hand_inputs(mixed: bool) -> LoopInputs:
    # τ_d(B) = 10 ms + 0.1 ms·B (t2 = 0); a 1,000-token prompt adds 50 ms of prefill work
    step = LinearStepTime(0.010, 1e-4, 0.0)
    return LoopInputs(step, 0.050, 1000.0, 101.0, 4000, 256, 1e9, mixed, 0.0, 0.0)


def test_cohort_by_hand() -> None:
    """Unmixed engine, C = 8, budget 4,000: two prefill steps of 4 prompts (10 + 4·50 = 210 ms each), then 100
    decode steps of 10.8 ms. TTFT: 210 ms for the first four, 420 ms for the rest; TPOT: (210 + 1,080)/100 and
    1,080/100 ms."""
    out = benchmark_loop(_hand_inputs(False), 8, 1000, 8, "test")
    assert out.mean_ttft_s == pytest.approx((4 * 0.210 + 4 * 0.420) / 8)
    assert out.mean_tpot_s == pytest.approx((4 * 12.90e-3 + 4 * 10.80e-3) / 8)
    assert out.throughput_rps == pytest.approx(8 / (0.420 + 1.080))


def test_excess_clients_wait_by_littles_law() -> None:
    seats = dataclasses.replace(_hand_inputs(False), seats=4)
    assert admitted(seats, 8) == 4
    out = benchmark_loop(seats, 8, 1000, 8, "test")
    assert out.effective_concurrency == 4
    assert out.server_queue_s == pytest.approx(4 / out.throughput_rps)


def test_steady_groups_repack_when_they_overflow_the_budget() -> None:
    """Budget 4,000, ISL 1,000, C = 8 from burst groups 4/3/1: with 3 decodes riding, a step fits 3 prompts, so the
    4-group hands one prompt on, the next 3-group keeps 3 and hands one on: 3/3/2. Singletons fit and stay."""
    inp = _hand_inputs(True)
    assert settled_groups(inp, np.array([4, 3, 1])).tolist() == [3, 3, 2]
    assert settled_groups(inp, np.ones(8, dtype=np.int64)).tolist() == [1] * 8


def test_spread_steady_with_an_overlap_step_by_hand() -> None:
    """C = 4 singletons, one overlap step: a step carrying one prompt with 2 decodes riding is 10.2 + 50 ms. The first
    request arrives in the cycle's decode gap (τ_d(3) = 10.3 ms) and also misses the step scheduled behind it
    (2 x 10.3 + 60.2 = 80.8 ms); the others wait for two prompt steps (3 x 60.2 = 180.6 ms). TPOT: the two other
    prompt steps and 98 decode steps of 10.4 ms over 100 tokens."""
    inp = dataclasses.replace(_hand_inputs(True), spread=True, overlap_steps=1.0)
    out = benchmark_loop(inp, 4, 4000, 0, "test")
    assert out.steady_ttft_s == pytest.approx((0.0808 + 3 * 0.1806) / 4)
    assert out.steady_tpot_s == pytest.approx((2 * 0.0602 + 98 * 0.0104) / 100)


def test_startup_burst_weight_by_hand() -> None:
    """C = 4, N = 40, k = 2: w = 2·4/40 = 0.2 on TTFT, 4/40 on TPOT. Burst: one step of 4 prompts (10 + 200 ms), then
    100 decode steps of 10.4 ms. Steady (singletons, no overlap): 10.3 + 60.2 ms for the first, 2 x 60.2 for the
    others; TPOT (2 x 60.2 + 98 x 10.4)/100 ms."""
    inp = dataclasses.replace(_hand_inputs(True), spread=True, startup_cohorts=2.0)
    out = benchmark_loop(inp, 4, 40, 8, "test")
    steady = (0.0705 + 3 * 0.1204) / 4
    assert out.burst_ttft_s == pytest.approx(0.210)
    assert out.mean_ttft_s == pytest.approx(0.2 * 0.210 + 0.8 * steady)
    assert out.mean_tpot_s == pytest.approx(0.1 * 0.0104 + 0.9 * (2 * 0.0602 + 98 * 0.0104) / 100)


def test_eager_steps_take_the_host_launch_time_by_hand() -> None:
    """As the spread test above, with steps that carry prefill floored at H = 100 ms (> their 60.2 ms GPU time): the
    first request waits the decode gap twice and its own eager step (2 x 10.3 + 100 = 120.6 ms), the others three
    eager steps (300 ms). TPOT: the two other eager steps and 98 decode steps of 10.4 ms (CUDA graphs: no floor)."""
    inp = dataclasses.replace(_hand_inputs(True), spread=True, overlap_steps=1.0, eager_step_s=0.100)
    out = benchmark_loop(inp, 4, 4000, 0, "test")
    assert out.steady_ttft_s == pytest.approx((0.1206 + 3 * 0.300) / 4)
    assert out.steady_tpot_s == pytest.approx((2 * 0.100 + 98 * 0.0104) / 100)


def test_eager_floor_below_the_gpu_time_changes_nothing() -> None:
    """H = 10 ms = t0 is at or below every step (each costs t0 plus its decodes and prefill tokens): max(G, H) = G.
    (H = 50 ms would move the burst: its last mixed step carries a few tokens beside 7 decodes, 10.9 ms.)"""
    for mixed in (True, False):
        base = dataclasses.replace(_hand_inputs(mixed), spread=mixed)
        floored = dataclasses.replace(base, eager_step_s=0.010)
        assert benchmark_loop(floored, 8, 1000, 8, "test") == benchmark_loop(base, 8, 1000, 8, "test")


def test_eager_cohort_by_hand() -> None:
    """Unmixed, C = 8, budget 4,000 with H = 300 ms: the two prefill steps take 300 ms each instead of 210; TTFT
    300 ms for the first four, 600 ms for the rest; TPOT (300 + 1,080)/100 and 1,080/100 ms."""
    out = benchmark_loop(dataclasses.replace(_hand_inputs(False), eager_step_s=0.300), 8, 1000, 8, "test")
    assert out.mean_ttft_s == pytest.approx((4 * 0.300 + 4 * 0.600) / 8)
    assert out.mean_tpot_s == pytest.approx((4 * 13.80e-3 + 4 * 10.80e-3) / 8)


def _inputs(**kw: object) -> LoopInputs:
    base = LoopInputs(
        step=LinearStepTime(1e-3, 1e-4, 0.0),
        prompt_s=0.01,
        input_tokens=1000.0,
        output_tokens=1001.0,
        budget_tokens=8192,
        seats=1024,
        kv_tokens=10_000.0,
        mixed=True,
        request_delay_s=0.0,
        overlap_steps=0.0,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_decode_step_interpolates_the_roofline_grid() -> None:
    # linear law: 1 ms + 0.1 ms x 3 = 1.3 ms; grid (1, 2, 4) -> (1, 2, 2.5) ms: at B = 3 halfway, 2.25 ms
    assert decode_s(_inputs(), 3.0) == pytest.approx(1.3e-3)
    grid = _inputs(decode_batches=np.array([1.0, 2.0, 4.0]), decode_step_s=np.array([1e-3, 2e-3, 2.5e-3]))
    assert decode_s(grid, 3.0) == pytest.approx(2.25e-3)
    assert decode_s(grid, 2.0) == pytest.approx(2e-3)


def test_on_demand_kv_admits_at_the_mean_length() -> None:
    # 10,000 KV tokens, ISL 1,000, OSL 1,001: reserving 2,000 each admits 5; on demand 1,000 + 500 = 1,500 -> 6
    assert admitted(_inputs(), 64) == 5
    assert admitted(_inputs(kv_on_demand=True), 64) == 6
    assert admitted(_inputs(kv_on_demand=True), 4) == 4
