"""The input of the exact cache model: a request stream as CSR arrays of block ids (:class:`BlockTrace`).

A request's blocks are its KV blocks in order: first the prompt's (looked up in the prefix cache), then, optionally,
those its output fills (inserted into the cache, as vLLM v1 and SGLang keep generated tokens' KV for the next turn,
but never counted as hits). Block ids are any int64 labels: equal ids are the same cached content (a hash of the
block and of everything before it, as vLLM's prefix caching and the Mooncake traces' ``hash_ids`` do).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.errors import SpecError
from pdplan.types import FloatArray, Int64Array

WARMUP_SHARE = 0.1
"""The share of a trace's requests (its first, in arrival order) that warm the cache and are not counted in its hit
ratios. A trace starts on an empty cache, which a long-running service's cache is not: its first requests find only
what their predecessors in the trace left (the vendored Mooncake synthetic trace, affinity routing over two
instances, HBM only: the first 10 % hit 1.6 % of their prompt tokens, the rest 11.1 %). A planner reports the steady
state, so the hit ratios count the requests after this share (:func:`counted_from`). 0.1 is the simulator's own
warm-up (:data:`pdplan.sim.compare.WARMUP_FRACTION`), so both count the same requests (docs/prefix_cache.md §7,
§9)."""


def counted_from(n_requests: int) -> int:
    """The first request a trace's hit ratios count: ``floor(WARMUP_SHARE · n)`` (:data:`WARMUP_SHARE`; the
    simulator's warm-up count, :mod:`pdplan.sim.metrics`)."""
    return int(np.floor(WARMUP_SHARE * n_requests))


@dataclass(frozen=True)
class BlockTrace:
    """Requests in arrival order; request r's blocks are ``block_ids[offsets[r]:offsets[r + 1]]``.

    * ``prompt_blocks`` (one per request, default: all its blocks): how many leading blocks are the prompt; the
      rest are output blocks, inserted after the prompt.
    * ``prompt_tokens`` (one per request, default: ``prompt_blocks · block_tokens``): the prompt length. The last
      prompt block then holds ``prompt − (prompt_blocks − 1) · block_tokens`` tokens (at most ``block_tokens``), and
      prompt tokens beyond the last prompt block (engines that hash only full blocks) never hit.
    """

    offsets: Int64Array
    block_ids: Int64Array
    block_tokens: int
    prompt_blocks: Int64Array | None = None
    prompt_tokens: Int64Array | None = None

    def __post_init__(self) -> None:
        offsets, ids = np.asarray(self.offsets), np.asarray(self.block_ids)
        if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(ids):
            raise SpecError("must be 1-D, start at 0 and end at len(block_ids)", field="offsets")
        blocks = np.diff(offsets)
        if np.any(blocks < 0):
            raise SpecError("must be nondecreasing", field="offsets")
        if self.block_tokens < 1:
            raise SpecError(f"must be >= 1, got {self.block_tokens}", field="block_tokens")
        prompt_blocks = self.prompt_block_counts
        if prompt_blocks.shape != blocks.shape or np.any((prompt_blocks < 0) | (prompt_blocks > blocks)):
            raise SpecError("needs one count per request, between 0 and the request's blocks", field="prompt_blocks")
        if self.prompt_tokens is not None:
            prompts = np.asarray(self.prompt_tokens)
            least = np.maximum(prompt_blocks - 1, 0) * self.block_tokens + (prompt_blocks > 0)
            if prompts.shape != blocks.shape or np.any(prompts < least):
                raise SpecError(
                    "needs one length per request, at least (prompt_blocks - 1) full blocks + 1 token",
                    field="prompt_tokens",
                )

    @property
    def n_requests(self) -> int:
        return len(self.offsets) - 1

    @property
    def blocks_per_request(self) -> Int64Array:
        return np.diff(np.asarray(self.offsets)).astype(np.int64)

    @property
    def prompt_block_counts(self) -> Int64Array:
        """Prompt blocks per request."""
        if self.prompt_blocks is None:
            return self.blocks_per_request
        return np.asarray(self.prompt_blocks).astype(np.int64)

    def prompt_lengths(self) -> FloatArray:
        """Prompt tokens per request."""
        if self.prompt_tokens is None:
            return (self.prompt_block_counts * self.block_tokens).astype(np.float64)
        return np.asarray(self.prompt_tokens, dtype=np.float64)

    def last_block_shortfall(self) -> FloatArray:
        """Per request, the tokens missing from its last prompt block (0 when it is full)."""
        if self.prompt_tokens is None:
            return np.zeros(self.n_requests)
        tail = self.prompt_lengths() - np.maximum(self.prompt_block_counts - 1, 0) * self.block_tokens
        return np.asarray(np.clip(self.block_tokens - tail, 0.0, None), dtype=np.float64)
