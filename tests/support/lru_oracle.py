"""Straightforward LRU simulations with ``OrderedDict``: the oracles of the exact prefix-cache model.

Convention (``pdplan/cache/stack_distance.py``): a request is looked up against the cache as it is at arrival
(its hits are the longest cached prefix of its prompt blocks), then every block of the request, prompt and output,
is touched in order: moved to the most-recent end, inserted if missing, the least recent evicted beyond capacity.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def lru_prefix_hits(requests: Sequence[Sequence[int]], prompt_blocks: Sequence[int], capacity: int) -> list[int]:
    """Hit blocks per request of one LRU of ``capacity`` blocks."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits = []
    for blocks, prompt in zip(requests, prompt_blocks, strict=True):
        count = 0
        for block in blocks[:prompt]:
            if block not in cache:
                break
            count += 1
        hits.append(count)
        for block in blocks:
            if block in cache:
                cache.move_to_end(block)
            else:
                cache[block] = None
                if len(cache) > capacity:
                    cache.popitem(last=False)
    return hits


def exclusive_two_tier_hits(requests: Sequence[Sequence[int]], upper: int, lower: int) -> tuple[list[int], list[int]]:
    """Per request, the prefix hits served by each tier of an exclusive two-tier LRU: a hit anywhere promotes the
    block to the upper tier; the upper tier's LRU victim is demoted to the lower tier, whose LRU victim is dropped.
    Returns (hits served from the upper tier, hits served from the lower tier)."""
    top: OrderedDict[int, None] = OrderedDict()
    bottom: OrderedDict[int, None] = OrderedDict()
    from_top, from_bottom = [], []
    for blocks in requests:
        served_top = served_bottom = 0
        for block in blocks:
            if block in top:
                served_top += 1
            elif block in bottom:
                served_bottom += 1
            else:
                break
        from_top.append(served_top)
        from_bottom.append(served_bottom)
        for block in blocks:
            if block in top:
                top.move_to_end(block)
                continue
            bottom.pop(block, None)
            top[block] = None
            if len(top) > upper:
                victim, _ = top.popitem(last=False)
                bottom[victim] = None
                if len(bottom) > lower:
                    bottom.popitem(last=False)
    return from_top, from_bottom
