"""The eager-step floor of the colocated benchmark loop (benchmark/colocated_loop.py ``eager_step_s``) over random
loops: a launch floor H on the steps that carry prefill never lowers a request's TTFT or TPOT, and the TTFT of the
spread steady state carries at least H (its own prefill step is eager). The arrival regime is held fixed (singletons:
``merge_arrivals`` off): a longer step that gathers more arrivals into one prefill may lower the TPOT, which is the
point of the merged regime (tests/unit/test_spread_arrivals.py)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.benchmark.colocated_loop import LoopInputs, benchmark_loop
from pdplan.queueing import LinearStepTime


@st.composite
def loops(draw: st.DrawFn) -> LoopInputs:
    mixed = draw(st.booleans())
    return LoopInputs(
        step=LinearStepTime(draw(st.floats(1e-3, 0.05)), draw(st.floats(0.0, 1e-3)), draw(st.floats(0.0, 1e-7))),
        prompt_s=draw(st.floats(1e-4, 0.5)),
        input_tokens=float(draw(st.integers(16, 8192))),
        output_tokens=float(draw(st.integers(2, 1024))),
        budget_tokens=draw(st.sampled_from([2048, 8192, 16384])),
        seats=draw(st.integers(1, 512)),
        kv_tokens=float(draw(st.integers(100_000, 5_000_000))),
        mixed=mixed,
        request_delay_s=draw(st.floats(0.0, 0.05)),
        overlap_steps=draw(st.sampled_from([0.0, 1.0])),
        spread=mixed,  # the grouped steady state repacks groups; the claim is made for spread and unmixed loops
        startup_cohorts=draw(st.floats(1.0, 3.0)),
    )


@settings(max_examples=60, deadline=None)
@given(loops(), st.floats(1e-3, 0.2), st.integers(1, 128))
def test_the_floor_never_lowers_ttft_or_tpot(inp: LoopInputs, eager_s: float, clients: int) -> None:
    base = benchmark_loop(inp, clients, 20 * clients, 2 * clients, "test")
    floored = benchmark_loop(dataclasses.replace(inp, eager_step_s=eager_s), clients, 20 * clients, 2 * clients, "test")
    assert floored.mean_ttft_s >= base.mean_ttft_s * (1.0 - 1e-9)
    assert floored.mean_tpot_s >= base.mean_tpot_s * (1.0 - 1e-9)
    assert floored.steady_ttft_s >= eager_s + inp.request_delay_s - 1e-12
