"""A decode instance's session KV (PPD, arXiv 2603.13358): finished sequences' blocks kept in the HBM that the
running sequences leave free, so that a session's next turn can append onto them (:mod:`pdplan.sim.turn_placement`).

One LRU of block ids per decode instance (per attention-DP rank, of its share of the KV:
:mod:`pdplan.sim.decode_append`), the same :class:`~pdplan.sim.prefix_cache.BlockLru` the prefill instances' prefix
caches use (block ids and prefix matching as :mod:`pdplan.sim.reuse_requests`). Its capacity is not fixed: it
is the instance's KV capacity less what its admitted sequences reserve (:mod:`pdplan.sim.decode`: a sequence reserves
its final footprint ``l + n + s`` at admission; under SGLang's and vLLM's rules what they hold now, their growing
context, :mod:`pdplan.sim.append_growth`), in whole blocks, so:

* a sequence that finishes frees its reservation and its whole blocks (prompt and output, ``⌊(P + O)/B⌋``) become
  the most recent blocks of the cache (:meth:`DecodeKvCache.keep`; vLLM's free-block queue, SGLang's radix tree: a
  finished request's blocks stay cached until the space is needed);
* a sequence admitted takes the blocks it starts from out of the cache (:meth:`DecodeKvCache.take`: they are now
  held by a running request, inside its reservation, not evictable) and its reservation shrinks the cache, which
  drops its least recent blocks (:meth:`DecodeKvCache.resize`): running sequences' needs evict sessions' histories,
  and so do other sessions' newer histories.
* blocks held by running sequences are counted per block (the engines' reference counts): a prompt still finds them
  (a system prompt shared by the sessions is held by every running turn of them), and they return to the cache when
  the last sequence holding them finishes (:meth:`DecodeKvCache.release`).

Nothing else is cached on decode: a prompt's KV that arrives over the P→D link is held by its sequence, and cached
when that sequence finishes.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from itertools import takewhile

from pdplan.errors import SpecError
from pdplan.sim.prefix_cache import BlockLru


class DecodeKvCache:
    """One decode instance's session KV (module docstring): an LRU of block ids whose capacity is the free KV."""

    __slots__ = ("block_tokens", "lru", "running")

    def __init__(self, free_tokens: float, block_tokens: int) -> None:
        if block_tokens < 1:
            raise SpecError(f"block_tokens must be >= 1, got {block_tokens}", field="block_tokens")
        self.block_tokens = block_tokens
        self.lru = BlockLru(self._blocks(free_tokens))
        self.running: dict[int, int] = {}  # block -> running sequences holding it

    def _blocks(self, tokens: float) -> int:
        """Whole blocks in ``tokens`` free KV slots (an unbounded instance: no limit)."""
        if math.isnan(tokens):
            raise SpecError("the free KV of a decode instance is NaN")
        if tokens == math.inf:
            return sys.maxsize
        return max(int(tokens // self.block_tokens), 0)

    def held_prefix(self, blocks: Sequence[int]) -> int:
        """How many leading blocks of ``blocks`` the instance holds, cached or held by a running sequence (prefix
        matching; changes nothing)."""
        cached, running = self.lru.blocks, self.running
        if not running:
            return len(list(takewhile(cached.__contains__, blocks)))
        found = 0
        for b in blocks:
            if b not in cached and b not in running:
                break
            found += 1
        return found

    def take(self, blocks: Sequence[int]) -> None:
        """A sequence admitted here now holds ``blocks``: those cached leave the cache."""
        cached, running = self.lru.blocks, self.running
        for b in cached.keys() & blocks:
            del cached[b]
        get = running.get
        for b in blocks:
            running[b] = get(b, 0) + 1

    def release(self, blocks: Sequence[int]) -> None:
        """A sequence that took ``blocks`` (:meth:`take`) finished: it holds them no more."""
        running = self.running
        for b in blocks:
            left = running[b] - 1
            if left:
                running[b] = left
            else:
                del running[b]

    def keep(self, blocks: Sequence[int], free_tokens: float) -> None:
        """A sequence finished: its ``blocks`` that no running sequence holds become the most recent, in order, in
        ``free_tokens`` of KV."""
        running = self.running
        self.lru.refresh(blocks if running.keys().isdisjoint(blocks) else [b for b in blocks if b not in running])
        self.resize(free_tokens)

    def resize(self, free_tokens: float) -> None:
        """The free KV is now ``free_tokens``: drop the least recent blocks beyond it."""
        self.lru.capacity = self._blocks(free_tokens)
        self.lru.trim()

    @property
    def blocks(self) -> int:
        """Blocks held now."""
        return len(self.lru.blocks)
