"""Exact LRU stack distances and the prefix-cache curve (pdplan/cache/stack_distance.py, dominance.py, curve.py),
checked by hand on tiny traces and against an ``OrderedDict`` LRU at every capacity."""

from __future__ import annotations

import numpy as np
import pytest
from support.lru_oracle import lru_prefix_hits

from pdplan.cache import dominance
from pdplan.cache.stack_distance import (
    COLD,
    arrival_distances,
    hit_ratio_curve,
    memo_arrival_distances,
    memo_prefix_distances,
    prefix_distances,
    previous_access,
    reuse_distances,
)
from pdplan.cache.trace import BlockTrace
from pdplan.errors import SpecError


def _trace(requests: list[list[int]], block_tokens: int = 1, **kw: object) -> BlockTrace:
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in requests]))).astype(np.int64)
    ids = np.array([b for r in requests for b in r], dtype=np.int64)
    return BlockTrace(offsets, ids, block_tokens, **kw)  # type: ignore[arg-type]


def _naive_distances(ids: list[int]) -> list[int]:
    out = []
    for t, block in enumerate(ids):
        earlier = [j for j in range(t) if ids[j] == block]
        out.append(COLD if not earlier else len(set(ids[earlier[-1] + 1 : t])))
    return out


def test_hand_worked_distances() -> None:
    # A B A: B lies between the two A's -> 1.  A B B A: 0 for the second B, 1 for the second A.
    assert reuse_distances(np.array([7, 8, 7])).tolist() == [COLD, COLD, 1]
    assert reuse_distances(np.array([7, 8, 8, 7])).tolist() == [COLD, COLD, 0, 1]
    # A B A B: the second B continues the run started by the second A (both last seen together) -> 1 and 1
    assert reuse_distances(np.array([1, 2, 1, 2])).tolist() == [COLD, COLD, 1, 1]
    assert previous_access(np.array([5, 6, 5, 5])).tolist() == [-1, -1, 0, 2]


def test_hand_worked_prefix_hits() -> None:
    # r0 = [s, a], r1 = [s, b], r2 = [s, a]. r1's s: {a} since its last access -> 1. r2's s: {b} -> 1; r2's a:
    # {s, b} -> 2 (running max 1, 2). Capacity 1 hits nothing, 2 hits both s, 3 also r2's a.
    trace = _trace([[10, 11], [10, 12], [10, 11]])
    assert prefix_distances(trace).tolist() == [COLD, COLD, 1, COLD, 1, 2]
    curve = hit_ratio_curve(trace)
    assert curve.hit_tokens_at([0, 1, 2, 3, 99]).tolist() == [0.0, 0.0, 2.0, 3.0, 3.0]
    assert curve.request_hit_ratio(2).item() == pytest.approx(2 / 3)
    assert curve.saturation_blocks == 3


@pytest.mark.parametrize("seed", range(40))
def test_distances_equal_naive(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, int(rng.integers(1, 12)), int(rng.integers(0, 40))).tolist()
    assert reuse_distances(np.array(ids, dtype=np.int64)).tolist() == _naive_distances(ids)


@pytest.mark.parametrize("seed", range(60))
def test_curve_equals_ordered_dict_lru_at_every_capacity(seed: int) -> None:
    rng = np.random.default_rng(seed)
    requests = [
        rng.integers(0, int(rng.integers(1, 16)), int(rng.integers(0, 8))).tolist()
        for _ in range(int(rng.integers(1, 14)))
    ]
    prompt_blocks = [int(rng.integers(0, len(r) + 1)) for r in requests]
    block_tokens = 4
    prompts = [0 if p == 0 else (p - 1) * block_tokens + int(rng.integers(1, block_tokens + 3)) for p in prompt_blocks]
    if seed % 4 == 0:  # ids outside the packed range take the relabelling path
        requests = [[b * 10**15 + 3 for b in r] for r in requests]
    trace = _trace(requests, block_tokens, prompt_blocks=np.array(prompt_blocks), prompt_tokens=np.array(prompts))
    curve = hit_ratio_curve(trace)
    pairs = zip(prompts, prompt_blocks, strict=True)
    short = [max(block_tokens - (p - max(b - 1, 0) * block_tokens), 0) for p, b in pairs]
    for capacity in range(sum(len(r) for r in requests) + 2):
        hits = lru_prefix_hits(requests, prompt_blocks, capacity)
        triples = zip(hits, prompt_blocks, short, strict=True)
        tokens = [h * block_tokens - (s if h == b and b > 0 else 0) for h, b, s in triples]
        assert curve.hit_tokens_at(capacity).item() == sum(tokens)
        assert curve.request_hit_ratio(capacity).item() * len(requests) == pytest.approx(sum(h > 0 for h in hits))
        share = sum(t / max(p, 1) for t, p in zip(tokens, prompts, strict=False))
        assert curve.mean_request_token_hit_ratio(capacity).item() * len(requests) == pytest.approx(share)


def test_duplicate_blocks_in_a_request_do_not_hit_each_other() -> None:
    requests = [[1, 2, 1, 3], [1, 2, 1, 3]]
    curve = hit_ratio_curve(_trace(requests))
    for capacity in range(6):
        assert curve.hit_tokens_at(capacity).item() == sum(lru_prefix_hits(requests, [4, 4], capacity))
    assert curve.hit_tokens_at(0).item() == 0.0  # the first request's second 1 is no hit


def test_dominance_kernel_matches_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    for chunk_bits in (3, 5, 14):
        monkeypatch.setattr(dominance, "CHUNK_BITS", chunk_bits)
        for n in (1, 2, 7, 8, 9, 33, 300, 2049):
            values = rng.permutation(3 * n)[:n]
            weights = rng.integers(0, 9, n)
            brute = [int(weights[:i][values[:i] < values[i]].sum()) for i in range(n)]
            assert dominance.earlier_smaller_weight(values, weights).tolist() == brute
    assert dominance.earlier_smaller_weight(np.zeros(0, np.int64), np.zeros(0, np.int64)).size == 0


def test_dominance_rejects_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="62-bit"):
        dominance.earlier_smaller_weight(np.array([0, 1]), np.array([2**61, 1]))


def test_empty_trace_and_empty_requests() -> None:
    empty = hit_ratio_curve(_trace([]))
    assert empty.token_hit_ratio(10).item() == 0.0
    assert empty.request_hit_ratio(1).item() == 0.0
    assert empty.mean_request_token_hit_ratio(1).item() == 0.0
    curve = hit_ratio_curve(_trace([[], [1], [], [1]]))
    assert curve.hit_tokens_at(1).item() == 1.0
    assert curve.n_requests == 4
    assert reuse_distances(np.zeros(0, np.int64)).size == 0


def test_tokens_capacity_and_tiers() -> None:
    curve = hit_ratio_curve(_trace([[1, 2], [1, 2], [3], [1, 2]], block_tokens=16))
    assert curve.token_hit_ratio_at_tokens(16 * 3).item() == curve.token_hit_ratio(3).item()
    tiers = curve.tier_token_hit_ratios([1, 2, 1000])
    assert tiers.sum() == pytest.approx(curve.compulsory_token_hit_ratio)
    assert np.all(tiers >= 0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"offsets": np.array([1, 2])}, "offsets"),
        ({"offsets": np.array([0, 2, 1, 2])}, "offsets"),
        ({"block_tokens": 0}, "block_tokens"),
        ({"prompt_blocks": np.array([3])}, "prompt_blocks"),
        ({"prompt_tokens": np.array([16])}, "prompt_tokens"),
    ],
)
def test_bad_traces_name_the_field(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {"offsets": np.array([0, 2]), "block_ids": np.array([1, 2]), "block_tokens": 16}
    with pytest.raises(SpecError, match=field):
        BlockTrace(**{**base, **kwargs})  # type: ignore[arg-type]


def _arrival_positions(requests: list[list[int]]) -> list[int]:
    """Per access, its block's position in an ``OrderedDict`` LRU stack (0 = most recent) as the request arrives
    (COLD if never seen; 0 for a block its own request already touched)."""
    stack: list[int] = []
    out = []
    for blocks in requests:
        at_arrival = {b: i for i, b in enumerate(stack)}
        seen: set[int] = set()
        for b in blocks:
            out.append(0 if b in seen else at_arrival.get(b, COLD))
            seen.add(b)
        for b in blocks:
            if b in stack:
                stack.remove(b)
            stack.insert(0, b)
    return out


def test_hand_worked_arrival_distances() -> None:
    # r0 = [1 2 3 4], r1 = [5 6 7 8], r2 = [1 2 3 4 9]: at r2's arrival the stack is 8 7 6 5 4 3 2 1, so 1..4 sit at
    # positions 7 6 5 4; touched in order, their in-order distances are all 7 (each pushed down by the ones before)
    trace = _trace([[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4, 9]])
    assert reuse_distances(trace.block_ids).tolist()[8:] == [7, 7, 7, 7, COLD]
    assert arrival_distances(trace).tolist() == [COLD] * 8 + [7, 6, 5, 4, COLD]
    # a block repeated within its request sits on top (0); one last seen after the request's earlier blocks keeps
    # its place: r1 = [3 1 2], r2 = [1 2 3 1]: at r2's arrival the stack is 2 1 3 -> 1 at 1, 2 at 0, 3 at 2
    trace = _trace([[1, 2, 3], [3, 1, 2], [1, 2, 3, 1]])
    assert arrival_distances(trace).tolist()[6:] == [1, 0, 2, 0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_arrival_distances_match_an_lru_stack(seed: int) -> None:
    rng = np.random.default_rng(seed)
    requests = []
    for _ in range(300):
        chain = int(rng.integers(0, 8)) * 100 + np.arange(int(rng.integers(1, 10)))
        extra = rng.integers(1000, 1030, size=int(rng.integers(0, 3)))
        requests.append([int(b) for b in np.concatenate((chain, extra))])
    assert arrival_distances(_trace(requests)).tolist() == _arrival_positions(requests)


def test_memoised_distances_are_keyed_by_the_trace_values() -> None:
    requests = [[1, 2, 3], [4, 2, 3], [5], [1, 2, 3]]
    first = memo_prefix_distances(_trace(requests))
    assert first.tolist() == prefix_distances(_trace(requests)).tolist()
    assert memo_prefix_distances(_trace(requests)) is first  # an equal, new trace finds the same answer
    assert memo_arrival_distances(_trace(requests)).tolist() == arrival_distances(_trace(requests)).tolist()
    changed = [[1, 2, 3], [4, 2, 3], [5], [1, 7, 3]]
    assert memo_prefix_distances(_trace(changed)).tolist() == prefix_distances(_trace(changed)).tolist()
    assert memo_prefix_distances(_trace(changed)).tolist() != first.tolist()
    split = [[1, 2, 3], [4, 2, 3], [5], [1], [2, 3]]  # the same block ids cut into other requests
    assert prefix_distances(_trace(split)).tolist() != first.tolist()
    assert memo_prefix_distances(_trace(split)).tolist() == prefix_distances(_trace(split)).tolist()
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 0
