"""What a preempted request finds of its own KV when it is admitted again (vLLM V1 with prefix caching, its default).

vLLM V1 (vllm-project/vllm ``vllm/v1/core/sched/scheduler.py`` ``_preempt_request`` and
``vllm/v1/core/single_type_kv_cache_manager.py`` ``free`` @ 00024d314514900f361ad072af6931e403b7f589) frees a
preempted request's blocks into the free block queue, tail blocks first (``reversed(req_blocks)``), their hashes kept;
the queue is LRU: new blocks are taken from its front, and freed ones are appended at its end
(``block_pool.free_blocks``). When the request is admitted again, ``get_computed_blocks`` finds the blocks of its
context that were not taken in between: its prefix minus the tail the pool's allocations ate. So:

* every token of KV freed (a completion's context, a victim's) is appended at the next position of one queue, the
  pool's never-used blocks at positions [0, M) first;
* every allocation (a decode step's tokens, an admitted prompt) takes the present positions from the front;
* a victim's context c sits at [P, P + c), its tail first; at its readmission the front part the allocations
  reached is lost and the rest, its prefix, is a hit (those positions leave the queue untaken).

Blocks are tokens here (no block rounding). A completion's blocks are never hit (no workload reuse in this instance).
"""

from __future__ import annotations

import bisect


class FreedQueue:
    """The free block queue as positions: ``appended`` (the next free position), ``evicted`` (positions before it are
    taken or left), the hit intervals that left untaken (sorted by start), and each waiting victim's interval."""

    def __init__(self, capacity_tokens: float) -> None:
        self.appended = float(capacity_tokens)  # the pool's blocks, all free at the start
        self.evicted = 0.0
        self.left: list[tuple[float, float]] = []
        self.victims: dict[int, tuple[float, float]] = {}

    def freed(self, tokens: float) -> None:
        """A completion's KV is appended at the queue's end."""
        self.appended += tokens

    def preempted(self, req: int, context_tokens: float) -> None:
        """Victim ``req``'s context is appended at the queue's end, its tail first."""
        self.victims[req] = (self.appended, float(context_tokens))
        self.appended += context_tokens

    def taken(self, tokens: float) -> None:
        """An allocation of ``tokens`` takes the present positions from the front (skipping the hits that left)."""
        need = float(tokens)
        while need > 0.0:
            if self.left and self.left[0][0] <= self.evicted:
                self.evicted = max(self.evicted, self.left.pop(0)[1])
                continue
            gap = self.left[0][0] - self.evicted if self.left else need
            step = min(need, gap)
            self.evicted += step
            need -= step

    def hits(self, req: int) -> float:
        """Tokens of victim ``req``'s context still in the queue (its prefix), which leave it as hits; 0 for a request
        not preempted since its last readmission."""
        start, context = self.victims.pop(req, (0.0, 0.0))
        lost = min(max(self.evicted - start, 0.0), context)
        hit = context - lost
        if hit > 0.0:
            bisect.insort(self.left, (start + lost, start + context))
        return hit
