"""The free block queue a preempted vLLM request finds its own KV in (pdplan.sim.recompute_hits), by hand."""

from __future__ import annotations

from pdplan.sim.recompute_hits import FreedQueue


def test_victim_keeps_the_prefix_the_allocations_did_not_reach() -> None:
    # A pool of 100 tokens, all free at the start (positions 0–99). 90 are allocated (positions 0–89 taken), then a
    # victim of 40 tokens is preempted (positions 100–139, its tail first), then a completion frees 30 (140–169).
    # Allocating 25 takes the 10 never-used positions (90–99) and 15 of the victim's tail (100–114): readmitted, it
    # finds its 25-token prefix.
    queue = FreedQueue(100.0)
    queue.taken(90.0)
    queue.preempted(7, 40.0)
    queue.freed(30.0)
    queue.taken(25.0)
    assert queue.hits(7) == 25.0
    # its prefix left the queue untaken (positions 115–139): the next 10 allocated are the completion's (140–149)
    queue.taken(10.0)
    assert queue.evicted == 150.0
    assert queue.hits(7) == 0.0  # not preempted since


def test_victim_whose_blocks_were_all_taken_recomputes_everything() -> None:
    queue = FreedQueue(10.0)
    queue.taken(10.0)
    queue.preempted(1, 20.0)
    queue.taken(20.0)
    assert queue.hits(1) == 0.0
