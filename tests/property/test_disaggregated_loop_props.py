"""The disaggregated benchmark loop (benchmark/disaggregated_loop.py) over random deployments: physics floors, Little's
law, capacities, and more clients never lowering the throughput."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.benchmark.disaggregated_loop import (
    DisaggLoopInputs,
    decode_capacity_rps,
    decode_step_s,
    disagg_benchmark_loop,
    steady_state,
)
from pdplan.queueing import LinearStepTime


@st.composite
def loops(draw: st.DrawFn) -> DisaggLoopInputs:
    service = draw(st.floats(0.005, 2.0))
    return DisaggLoopInputs(
        prefill_service_s=service,
        prefill_latency_s=service * draw(st.floats(1.0, 1.5)),
        servers=draw(st.integers(1, 32)),
        transfer_s=draw(st.floats(0.0, 0.05)),
        request_delay_s=draw(st.floats(0.0, 0.05)),
        overlap_steps=draw(st.sampled_from([0.0, 1.0])),
        step=LinearStepTime(draw(st.floats(1e-3, 0.05)), draw(st.floats(0.0, 1e-3)), draw(st.floats(0.0, 1e-7))),
        input_tokens=float(draw(st.integers(16, 16384))),
        output_tokens=float(draw(st.integers(2, 4096))),
        decode_instances=draw(st.integers(1, 8)),
        seats_per_instance=float(draw(st.integers(1, 1024))),
        kv_tokens_per_instance=float(draw(st.integers(20000, 5_000_000))),
        prefill_streams_token_1=draw(st.booleans()),
    )


@settings(max_examples=150, deadline=None)
@given(loops(), st.integers(1, 2000))
def test_floors_little_and_capacity(inp: DisaggLoopInputs, clients: int) -> None:
    bench = disagg_benchmark_loop(inp, clients, 20 * clients, 2 * clients, "aiperf")
    own = inp.prefill_latency_s + inp.request_delay_s + (0.0 if inp.prefill_streams_token_1 else inp.transfer_s)
    for ttft in (bench.mean_ttft_s, bench.steady_ttft_s, bench.burst_ttft_s):
        assert ttft >= own * (1.0 - 1e-9)
    assert bench.mean_tpot_s >= decode_step_s(inp, 1.0) * (1.0 - 1e-12)  # a sequence decodes in a batch of >= 1
    cap = min(inp.servers / inp.prefill_service_s, decode_capacity_rps(inp))
    assert bench.throughput_rps <= cap * (1.0 + 1e-9)
    x, ttft, tpot = steady_state(inp, clients)
    assert ttft + (inp.output_tokens - 1.0) * tpot == pytest.approx(clients / x, rel=1e-9)  # Little's law


@settings(max_examples=100, deadline=None)
@given(loops(), st.integers(1, 500), st.integers(1, 500))
def test_more_clients_never_lower_throughput(inp: DisaggLoopInputs, a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    x_lo, x_hi = steady_state(inp, lo)[0], steady_state(inp, hi)[0]
    assert x_hi >= x_lo * (1.0 - 1e-6)
    assert math.isfinite(x_hi)
