"""The merged spread steady state (benchmark/colocated_loop.py ``_spread_groups``, benchmark/spread_arrivals.py) over
random eager loops: its groups hold every admitted request, and their count G is a fixed point of f (the group
count the cycle of G groups asks for), or, where the iteration overshot and bisected, f(G) < G with f(G − 1) > G − 1."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.benchmark import colocated_loop as bl
from pdplan.benchmark.colocated_loop import LoopInputs
from pdplan.benchmark.spread_arrivals import even_groups, merged_group_size
from pdplan.queueing import LinearStepTime


@st.composite
def eager_loops(draw: st.DrawFn) -> LoopInputs:
    return LoopInputs(
        step=LinearStepTime(draw(st.floats(1e-3, 0.05)), draw(st.floats(0.0, 1e-3)), draw(st.floats(0.0, 1e-7))),
        prompt_s=draw(st.floats(1e-4, 0.5)),
        input_tokens=float(draw(st.integers(16, 8192))),
        output_tokens=float(draw(st.integers(2, 1024))),
        budget_tokens=draw(st.sampled_from([2048, 8192, 16384])),
        seats=512,
        kv_tokens=1e9,
        mixed=True,
        request_delay_s=draw(st.floats(0.0, 0.05)),
        overlap_steps=draw(st.sampled_from([0.0, 1.0])),
        spread=True,
        eager_step_s=draw(st.floats(1e-3, 0.2)),
        merge_arrivals=True,
    )


def _asked(inp: LoopInputs, c_eff: int, count: int) -> int:
    cycle_s = c_eff / bl._mixed_steady(inp, even_groups(c_eff, c_eff / count))[2] + inp.request_delay_s
    size = merged_group_size(c_eff, cycle_s, bl.decode_s(inp, c_eff), lambda g: bl._context_step_s(inp, c_eff, g))
    return int(even_groups(c_eff, size).size)


@settings(max_examples=60, deadline=None)
@given(eager_loops(), st.integers(1, 256))
def test_merged_groups_are_consistent_with_their_cycle(inp: LoopInputs, c_eff: int) -> None:
    groups = bl._spread_groups(inp, c_eff)
    assert int(groups.sum()) == c_eff
    assert groups.max() - groups.min() <= 1
    count = int(groups.size)
    asked = _asked(inp, c_eff, count)
    assert asked == count or (asked < count and _asked(inp, c_eff, count - 1) > count - 1)
