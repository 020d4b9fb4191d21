"""The prefix-cache hit-ratio curve: how many prompt tokens hit an LRU cache of every capacity.

A :class:`HitRatioCurve` is a step function of the capacity C in blocks. It is built from one number per run of
blocks that hit together (:mod:`pdplan.cache.stack_distance`): the smallest capacity at which the run hits, i.e.
its prefix stack distance + 1, and the tokens, requests and per-request token shares that the run carries. The
curve keeps the cumulative sums at every capacity where something changes, so any capacity is answered by one
binary search, and a tier hierarchy by the differences at its cumulative capacities (an LRU hierarchy with
promotion on hit behaves, for the hit/miss decision, as one LRU of the summed capacity: ``docs/prefix_cache.md §3``).

Three ratios, all in [0, 1], are nondecreasing in C and 0 at C = 0:

* ``token_hit_ratio(C)``: hit prompt tokens / all prompt tokens (what a prefill saves);
* ``request_hit_ratio(C)``: the fraction of requests whose first block hits (at least one block of reuse);
* ``mean_request_token_hit_ratio(C)``: the mean over requests of each request's own token hit ratio.

At infinite capacity they are the compulsory-miss bounds (a block's first access always misses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pdplan.types import ArrayLike, FloatArray, Int64Array


@dataclass(frozen=True)
class HitRatioCurve:
    """Cumulative hits of an LRU prefix cache as a step function of its capacity in blocks.

    ``capacities_blocks[i]`` is the i-th smallest capacity at which more hits appear; the arrays after it hold
    the totals at that capacity (and at every capacity up to the next entry).
    """

    block_tokens: int
    """Tokens per cache block (the engine's KV block or page size)."""
    capacities_blocks: Int64Array
    hit_tokens: FloatArray
    hit_requests: FloatArray
    request_token_ratio_sum: FloatArray
    total_tokens: float
    """Prompt tokens of every request, hit or not."""
    n_requests: int

    def _at(self, cumulative: FloatArray, capacity_blocks: ArrayLike) -> FloatArray:
        capacity = np.asarray(capacity_blocks, dtype=np.float64)
        slot = np.searchsorted(self.capacities_blocks, capacity, side="right") - 1
        padded = np.concatenate(([0.0], cumulative))
        return np.asarray(padded[slot + 1], dtype=np.float64)

    def hit_tokens_at(self, capacity_blocks: ArrayLike) -> FloatArray:
        """Hit prompt tokens of the whole trace at each capacity (blocks)."""
        return self._at(self.hit_tokens, capacity_blocks)

    def token_hit_ratio(self, capacity_blocks: ArrayLike) -> FloatArray:
        """Hit prompt tokens / all prompt tokens at each capacity (blocks)."""
        if self.total_tokens <= 0:
            return np.zeros(np.shape(capacity_blocks))
        return self._at(self.hit_tokens, capacity_blocks) / self.total_tokens

    def request_hit_ratio(self, capacity_blocks: ArrayLike) -> FloatArray:
        """Fraction of requests with at least one hit block at each capacity (blocks)."""
        if self.n_requests == 0:
            return np.zeros(np.shape(capacity_blocks))
        return self._at(self.hit_requests, capacity_blocks) / self.n_requests

    def mean_request_token_hit_ratio(self, capacity_blocks: ArrayLike) -> FloatArray:
        """Mean over requests of (hit tokens / prompt tokens) at each capacity (blocks); a request with an empty
        prompt counts as 0."""
        if self.n_requests == 0:
            return np.zeros(np.shape(capacity_blocks))
        return self._at(self.request_token_ratio_sum, capacity_blocks) / self.n_requests

    def token_hit_ratio_at_tokens(self, capacity_tokens: ArrayLike) -> FloatArray:
        """Token hit ratio at a capacity given in tokens (whole blocks only: ⌊tokens / block_tokens⌋ blocks)."""
        blocks = np.floor(np.asarray(capacity_tokens, dtype=np.float64) / self.block_tokens)
        return self.token_hit_ratio(blocks)

    @property
    def compulsory_token_hit_ratio(self) -> float:
        """The token hit ratio of an infinite cache: every miss left is a first access (compulsory)."""
        return float(self.token_hit_ratio(np.inf))

    @property
    def saturation_blocks(self) -> int:
        """The smallest capacity (blocks) that reaches the compulsory bound: beyond it more cache is useless."""
        return int(self.capacities_blocks[-1]) if len(self.capacities_blocks) else 0

    def tier_token_hit_ratios(self, tier_capacities_blocks: Sequence[float]) -> FloatArray:
        """Token hit ratio served by each tier of a hierarchy (fastest first), from the cumulative capacities:
        tier i serves ``ratio(C_1 + … + C_i) − ratio(C_1 + … + C_{i−1})``."""
        cumulative = np.cumsum(np.asarray(tier_capacities_blocks, dtype=np.float64))
        return np.diff(self.token_hit_ratio(cumulative), prepend=0.0)


def curve_from_runs(
    threshold_blocks: Int64Array,
    tokens: FloatArray,
    first_block: FloatArray,
    token_share: FloatArray,
    *,
    block_tokens: int,
    total_tokens: float,
    n_requests: int,
) -> HitRatioCurve:
    """Build the curve from runs: each hits at capacities ≥ ``threshold_blocks`` and then brings ``tokens`` hit
    tokens, ``first_block`` (1 for a run that starts its request, else 0) and ``token_share`` (its tokens over
    its request's prompt tokens)."""
    if len(threshold_blocks) == 0:
        empty = np.zeros(0)
        return HitRatioCurve(block_tokens, np.zeros(0, np.int64), empty, empty, empty, total_tokens, n_requests)
    length = int(threshold_blocks.max()) + 1
    sums = [np.bincount(threshold_blocks, weights=w, minlength=length) for w in (tokens, first_block, token_share)]
    occupied = np.flatnonzero(np.bincount(threshold_blocks, minlength=length))
    cumulative = [np.asarray(np.cumsum(s)[occupied], dtype=np.float64) for s in sums]
    return HitRatioCurve(
        block_tokens=block_tokens,
        capacities_blocks=occupied.astype(np.int64),
        hit_tokens=cumulative[0],
        hit_requests=cumulative[1],
        request_token_ratio_sum=cumulative[2],
        total_tokens=total_tokens,
        n_requests=n_requests,
    )
