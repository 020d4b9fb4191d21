"""Properties of the block-size costs (pdplan.perf.kv_blocks): the closed form equals the step-by-step sum, stays
within [0, b − 1], and the whole-block hits never exceed the cached prefix and fall with the block size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdplan.perf.kv_blocks import mean_partial_block_tokens, whole_block_hit_tokens

BLOCKS = st.sampled_from([1, 2, 16, 32, 64, 128])


@given(st.integers(1, 5000), st.integers(1, 700), BLOCKS)
def test_closed_form_equals_the_step_sum(prompt: int, output: int, block: int) -> None:
    steps = prompt + np.arange(output)
    brute = float(np.mean((-steps) % block))
    got = float(mean_partial_block_tokens(prompt, output, block))
    assert got == pytest.approx(brute, rel=1e-12, abs=1e-12)
    assert 0.0 <= got <= block - 1


@given(st.integers(0, 20000), st.integers(1, 20000), st.sampled_from([(1, 16), (16, 32), (16, 64), (32, 64)]))
def test_whole_block_hits_fall_with_the_block(cached: int, prompt: int, blocks: tuple[int, int]) -> None:
    small, large = (float(whole_block_hit_tokens(cached, prompt, b)) for b in blocks)
    assert 0.0 <= large <= small <= max(min(cached, prompt - 1), 0)
    assert small % blocks[0] == 0
    assert large % blocks[1] == 0
