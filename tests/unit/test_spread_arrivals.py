"""The spread steady state's merged context steps (benchmark/spread_arrivals.py), by hand, and in the benchmark loop."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pdplan.benchmark import colocated_loop as bl
from pdplan.benchmark.colocated_loop import LoopInputs, benchmark_loop
from pdplan.benchmark.spread_arrivals import even_groups, merged_group_size, window_hit
from pdplan.errors import SpecError
from pdplan.queueing import LinearStepTime


def test_window_hit_by_hand() -> None:
    """Two clients, cycle 1 s, window 0.1 s: 1 − 0.9² = 0.19; a window as long as the cycle always holds one."""
    assert window_hit(2, 1.0, 0.1) == pytest.approx(0.19)
    assert window_hit(5, 1.0, 1.5) == 1.0


def test_merged_group_size_by_hand() -> None:
    """C = 2, T = 1 s, τ = 0.1 s, S = 0.2 s: q_d = 0.19, q_c = 1 − 0.8² = 0.36, π_c = 0.19/0.83 = 0.228916,
    L̄ = 0.2·π_c + 0.1·(1 − π_c) = 0.1228916 s, ḡ = 2·L̄/π_c = 102/95 = 1.0736842 prompts per context step."""
    assert merged_group_size(2, 1.0, 0.1, lambda g: 0.2) == pytest.approx(102.0 / 95.0)


def test_a_step_as_long_as_the_cycle_takes_everyone() -> None:
    """S ≥ T: every window holds an arrival, every step is a context step (π_c = 1), ḡ = C·S/T = 8."""
    assert merged_group_size(8, 1.0, 0.1, lambda g: 1.0) == pytest.approx(8.0)


def test_short_steps_keep_singletons() -> None:
    """C = 4 over a 10 s cycle with 10-20 ms steps: ḡ = 1.004, so the loop keeps four singletons."""
    size = merged_group_size(4, 10.0, 0.010, lambda g: 0.020)
    assert size == pytest.approx(1.0, abs=0.01)
    assert even_groups(4, size).tolist() == [1, 1, 1, 1]


def test_group_size_follows_the_step_it_prices() -> None:
    """S(g) = 0.1 + 0.05·g: the fixed point satisfies ḡ = (C/T)·L̄/π_c at S(ḡ) (module docstring)."""
    size = merged_group_size(10, 1.0, 0.05, lambda g: 0.1 + 0.05 * g)
    step = 0.1 + 0.05 * size
    q_d, q_c = 1 - 0.95**10, 1 - (1 - step) ** 10
    share = q_d / (q_d + 1 - q_c)
    assert size == pytest.approx(10.0 * (share * step + (1 - share) * 0.05) / share, rel=1e-6)


def test_even_groups_by_hand() -> None:
    """10 prompts at ḡ = 3: round(10/3) = 3 groups, 4/3/3; ḡ below 1.5 of a pair keeps them apart."""
    assert even_groups(10, 3.0).tolist() == [4, 3, 3]
    assert even_groups(5, 1.07).tolist() == [1] * 5
    assert even_groups(3, 10.0).tolist() == [3]


def test_bad_cycle_is_refused() -> None:
    with pytest.raises(SpecError, match="cycle_s"):
        merged_group_size(4, 0.0, 0.01, lambda g: 0.05)


def _eager_inputs(merge: bool) -> LoopInputs:
    # τ_d(B) = 10 ms + 0.1 ms·B; a 1,000-token prompt adds 50 ms; every step with prompts floored at H = 60 ms
    step = LinearStepTime(0.010, 1e-4, 0.0)
    base = LoopInputs(step, 0.050, 1000.0, 33.0, 8000, 256, 1e9, True, 0.0, 1.0, spread=True)
    return dataclasses.replace(base, eager_step_s=0.060, merge_arrivals=merge)


def test_loop_prices_the_merged_groups_at_their_own_cycle() -> None:
    """C = 32, OSL 33, H = 60 ms: singletons put 30 eager steps in each request's 32 decode steps; the merged
    state's groups are the ones its own cycle gives (the loop's fixed point), fewer than 32, and its TPOT is lower."""
    c = 32
    merged = benchmark_loop(_eager_inputs(True), c, 20 * c, 2 * c, "test")
    single = benchmark_loop(_eager_inputs(False), c, 20 * c, 2 * c, "test")
    inp = _eager_inputs(True)
    groups = bl._spread_groups(inp, c)
    cycle_s = c / merged.throughput_rps
    size = merged_group_size(c, cycle_s, bl.decode_s(inp, c), lambda g: bl._context_step_s(inp, c, g))
    assert groups.tolist() == even_groups(c, size).tolist()
    assert 1 < groups.size < c
    assert merged.steady_tpot_s < single.steady_tpot_s
    assert merged.steady_ttft_s >= 0.060


def test_merge_off_or_no_floor_is_the_singleton_pattern() -> None:
    """Without the merge, or with steps too short to gather a second arrival, the spread state is the singletons'."""
    inp = _eager_inputs(False)
    assert bl._spread_groups(inp, 8).tolist() == [1] * 8
    short = dataclasses.replace(_eager_inputs(True), eager_step_s=1e-4, output_tokens=1001.0)
    assert np.array_equal(bl._spread_groups(short, 4), np.ones(4, dtype=np.int64))
