"""Hypothesis properties of the exact prefix-cache curve: exact against an OrderedDict LRU, monotone in capacity,
0 at capacity 0, the compulsory-miss bound at infinite capacity."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from support.lru_oracle import lru_prefix_hits

from pdplan.cache.stack_distance import hit_ratio_curve
from pdplan.cache.trace import BlockTrace

requests_strategy = st.lists(st.lists(st.integers(0, 12), max_size=7), min_size=1, max_size=14)


def _trace(requests: list[list[int]]) -> BlockTrace:
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in requests]))).astype(np.int64)
    ids = np.array([b for r in requests for b in r], dtype=np.int64)
    return BlockTrace(offsets, ids, 1)


def _compulsory_hits(requests: list[list[int]]) -> int:
    """Infinite cache: a request hits the longest prefix of blocks seen before it (not counting its own)."""
    seen: set[int] = set()
    total = 0
    for blocks in requests:
        for block in blocks:
            if block not in seen:
                break
            total += 1
        seen.update(blocks)
    return total


@settings(deadline=None, max_examples=150)
@given(requests=requests_strategy)
def test_exact_at_every_capacity(requests: list[list[int]]) -> None:
    curve = hit_ratio_curve(_trace(requests))
    prompts = [len(r) for r in requests]
    for capacity in range(sum(prompts) + 1):
        assert curve.hit_tokens_at(capacity).item() == sum(lru_prefix_hits(requests, prompts, capacity))


@settings(deadline=None, max_examples=150)
@given(requests=requests_strategy)
def test_monotone_zero_and_compulsory_bound(requests: list[list[int]]) -> None:
    curve = hit_ratio_curve(_trace(requests))
    capacities = np.arange(0, sum(len(r) for r in requests) + 3)
    for ratio in (curve.token_hit_ratio, curve.request_hit_ratio, curve.mean_request_token_hit_ratio):
        values = ratio(capacities)
        assert values[0] == 0.0
        assert np.all(np.diff(values) >= 0)
        assert np.all((values >= 0) & (values <= 1))
    assert curve.hit_tokens_at(np.inf).item() == _compulsory_hits(requests)
    assert curve.hit_tokens_at(curve.saturation_blocks).item() == _compulsory_hits(requests)
