"""Block-size costs (pdplan.perf.kv_blocks) worked by hand: partly filled blocks on fixed-length workloads, and
prefix-cache hits rounded down to whole blocks."""

from __future__ import annotations

import pytest

from pdplan.errors import SpecError
from pdplan.perf.kv_blocks import (
    mean_partial_block_tokens,
    partial_block_tokens,
    resident_partial_block_tokens,
    whole_block_hit_tokens,
)


def test_last_block_empty_slots() -> None:
    # 100 tokens at b = 16: 7 blocks = 112 slots, 12 empty; 96 = 6 blocks exactly; one token: 15 empty
    assert partial_block_tokens([100, 96, 1], 16).tolist() == [12.0, 0.0, 15.0]
    assert partial_block_tokens([100], 1).tolist() == [0.0]  # SGLang's page size 1 wastes nothing


def test_fixed_length_decode_residence_worked_by_hand() -> None:
    # prompt 100, 5 outputs, b = 16: holds 100..104 tokens, empty 12, 11, 10, 9, 8 → mean 10
    assert mean_partial_block_tokens(100, 5, 16).tolist() == pytest.approx(10.0)
    # 14 outputs wrap past the block: 12..0 (13 steps, sum 78) then 15 → 93 / 14
    assert mean_partial_block_tokens(100, 14, 16).tolist() == pytest.approx(93.0 / 14.0)
    # a whole number of blocks of outputs: exactly (b − 1)/2 whatever the prompt
    for prompt in (96, 100, 111):
        assert mean_partial_block_tokens(prompt, 32, 16).tolist() == pytest.approx(7.5)
        assert mean_partial_block_tokens(prompt, 128, 64).tolist() == pytest.approx(31.5)


def test_resident_mean_weights_cells_by_their_steps() -> None:
    # one fixed-length cell gives its own W; two cells weight by p·o: (0.5·5·10 + 0.5·32·7.5) / (0.5·37)
    assert resident_partial_block_tokens([100], [5], [1.0], 16) == pytest.approx(10.0)
    got = resident_partial_block_tokens([100, 100], [5, 32], [0.5, 0.5], 16)
    assert got == pytest.approx((5 * 10.0 + 32 * 7.5) / 37.0)


def test_prefix_hits_are_whole_blocks() -> None:
    # a 1,000-token session history under a 1,200-token prompt: 62 blocks of 16 = 992, 15 of 64 = 960
    assert whole_block_hit_tokens(1000, 1200, 16).tolist() == 992.0
    assert whole_block_hit_tokens(1000, 1200, 64).tolist() == 960.0
    # a fully cached 1,024-token prompt still recomputes its last token: 1,023 usable → 1,008 at b = 16
    assert whole_block_hit_tokens(1024, 1024, 16).tolist() == 1008.0
    assert whole_block_hit_tokens([0, 15], [100, 100], 16).tolist() == [0.0, 0.0]


def test_bad_block_size_is_refused() -> None:
    with pytest.raises(SpecError, match="kv_block_tokens"):
        partial_block_tokens([10], 0)
