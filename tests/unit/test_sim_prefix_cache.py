"""The simulator's prefix caches (pdplan/sim/prefix_cache.py): hand-worked lookups and touches, and the caches
against independent block-by-block LRU oracles (tests/support/lru_oracle.py) on random block streams."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from support.lru_oracle import exclusive_two_tier_hits, lru_prefix_hits

from pdplan.errors import SpecError
from pdplan.sim.prefix_cache import PrefixCaches, TierDomain


def _stream(seed: int, requests: int = 400) -> list[list[int]]:
    """Random prefix-structured requests: a few shared roots, each request a root's first blocks then own ids."""
    rng = np.random.default_rng(seed)
    roots = [list(range(1000 * r, 1000 * r + 40)) for r in range(6)]
    out, own = [], 100_000
    for _ in range(requests):
        root = roots[int(rng.integers(len(roots)))]
        shared = root[: int(rng.integers(1, len(root)))]
        fresh = int(rng.integers(0, 12))
        out.append(shared + list(range(own, own + fresh)))
        own += fresh
    return out


def _replay(caches: PrefixCaches, stream: list[list[int]], instance: int = 0) -> list[list[int]]:
    hits = []
    for blocks in stream:
        hits.append(caches.lookup(instance, blocks))
        caches.touch(instance, blocks)
    return hits


def test_lookup_hand_worked_longest_prefix_per_tier() -> None:
    # HBM of 3 blocks over a 4-block lower tier (exclusive). Touch [1, 2, 3]; then [4, 5]: 1 and 2 are demoted
    # (oldest first), HBM holds 3, 4, 5. The prompt [1, 2, 3, 9, 4] hits 1, 2 below and 3 in HBM, stops at 9.
    caches = PrefixCaches(1, 3, [TierDomain("dram", 4)])
    caches.touch(0, [1, 2, 3])
    caches.touch(0, [4, 5])
    assert caches.held_blocks(0) == [3, 2]
    assert caches.lookup(0, [1, 2, 3, 9, 4]) == [1, 2]
    assert caches.lookup(0, [7, 3]) == [0, 0]  # not a prefix: nothing
    caches.touch(0, [1, 2])  # promoted back to HBM: 3 and 4 go down
    assert list(caches.chains[0][0].blocks) == [5, 1, 2]
    assert list(caches.chains[0][1].blocks) == [3, 4]


@pytest.mark.parametrize("capacity", [1, 7, 40, 150])
def test_one_tier_equals_the_lru_oracle(capacity: int) -> None:
    stream = _stream(capacity)
    hits = _replay(PrefixCaches(1, capacity), stream)
    assert [h[0] for h in hits] == lru_prefix_hits(stream, [len(b) for b in stream], capacity)


@pytest.mark.parametrize(("upper", "lower"), [(5, 20), (30, 60), (60, 10)])
def test_exclusive_two_tiers_equal_the_oracle(upper: int, lower: int) -> None:
    stream = _stream(upper + lower)
    hits = _replay(PrefixCaches(1, upper, [TierDomain("dram", lower)], "exclusive"), stream)
    top, bottom = exclusive_two_tier_hits(stream, upper, lower)
    assert [h[0] for h in hits] == top
    assert [h[1] for h in hits] == bottom


def test_exclusive_chain_is_one_lru_cut_in_bands() -> None:
    # Three exclusive tiers hit/miss like one LRU of the summed capacity (pdplan/cache/tiers.py).
    stream = _stream(3)
    hits = _replay(PrefixCaches(1, 10, [TierDomain("dram", 25), TierDomain("ssd", 40)]), stream)
    assert [sum(h) for h in hits] == lru_prefix_hits(stream, [len(b) for b in stream], 75)


def _lru(capacity: int) -> tuple[OrderedDict[int, None], int]:
    return OrderedDict(), capacity


def test_inclusive_tiers_are_nested_lrus() -> None:
    # Inclusive: each domain is the LRU of its own capacity over the same accesses; the hit is the longest prefix
    # held by the larger, and each of its blocks counts for HBM when the smaller LRU holds it.
    stream = _stream(4)
    hits = _replay(PrefixCaches(1, 12, [TierDomain("dram", 50)], "inclusive"), stream)
    small, large = _lru(12), _lru(50)
    for blocks, got in zip(stream, hits, strict=True):
        total = 0
        while total < len(blocks) and blocks[total] in large[0]:
            total += 1
        assert got == [sum(b in small[0] for b in blocks[:total]), total - sum(b in small[0] for b in blocks[:total])]
        for held, capacity in (small, large):
            for b in blocks:
                held.pop(b, None)
                held[b] = None
                if len(held) > capacity:
                    held.popitem(last=False)
    assert [sum(h) for h in hits] == lru_prefix_hits(stream, [len(b) for b in stream], 50)


def test_a_pool_is_one_lru_shared_by_every_instance() -> None:
    # HBM of 0 blocks: every touch demotes straight to the lower tier. With a pool, instance 1 finds instance 0's
    # blocks; with per-instance shares it does not; per node, only its node-mate does.
    pool = PrefixCaches(2, 0, [TierDomain("pool", 100, "pool")])
    pool.touch(0, [1, 2, 3])
    assert pool.lookup(1, [1, 2, 3]) == [0, 3]
    own = PrefixCaches(2, 0, [TierDomain("dram", 100, "instance")])
    own.touch(0, [1, 2, 3])
    assert own.lookup(1, [1, 2, 3]) == [0, 0]
    node = PrefixCaches(4, 0, [TierDomain("dram", 100, "node")], instances_per_node=2)
    node.touch(0, [1, 2, 3])
    assert [node.lookup(i, [1, 2, 3])[1] for i in range(4)] == [3, 3, 0, 0]


def test_a_shared_pool_equals_one_lru_of_the_interleaved_stream() -> None:
    # Two instances with no HBM over one pool: the pool sees both streams in time order.
    stream = _stream(5)
    caches = PrefixCaches(2, 0, [TierDomain("pool", 60, "pool")])
    got = []
    for i, blocks in enumerate(stream):
        got.append(caches.lookup(i % 2, blocks)[1])
        caches.touch(i % 2, blocks)
    assert got == lru_prefix_hits(stream, [len(b) for b in stream], 60)


def test_touch_keeps_recency_order_within_a_request() -> None:
    # The first block of a prompt ends up the least recent of it: a cache of 2 keeps the last two blocks.
    caches = PrefixCaches(1, 2)
    caches.touch(0, [1, 2, 3])
    assert list(caches.chains[0][0].blocks) == [2, 3]
    assert caches.lookup(0, [1, 2, 3]) == [0]  # block 1 went: no prefix


def test_an_inclusive_tier_smaller_than_hbm_serves_nothing() -> None:
    stream = _stream(6)
    hits = _replay(PrefixCaches(1, 30, [TierDomain("dram", 10)], "inclusive"), stream)
    assert all(h[1] == 0 for h in hits)
    assert [h[0] for h in hits] == lru_prefix_hits(stream, [len(b) for b in stream], 30)


def test_refuses_bad_layouts() -> None:
    with pytest.raises(SpecError, match="scope"):
        TierDomain("dram", 5, "rack")  # type: ignore[arg-type]
    with pytest.raises(SpecError):
        PrefixCaches(0, 10)
