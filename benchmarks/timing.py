"""Timing helper shared by the speed benchmarks: best of N wall-clock runs (after an untimed warm-up)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(
    fn: Callable[[], object], repeats: int = 5, *, warm_up: bool = True, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Fewest seconds ``fn`` took over ``repeats`` runs (the least disturbed by other load); ``clock``
    ``time.process_time`` counts the process's own CPU seconds (a machine shared with other jobs)."""
    if warm_up:
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


try:
    from pdplan.search.memo import clear as clear_memo
except ImportError:  # an older checkout (--before) memoises nothing between searches

    def clear_memo() -> None:
        """Nothing to forget."""


try:
    from pdplan.queueing.exact_memo import clear_all as clear_queueing_memos
except ImportError:  # an older checkout has no value-keyed queueing memos

    def clear_queueing_memos() -> None:
        """Nothing to forget."""


def forget() -> None:
    """Nothing memoised by an earlier search: the search memo and the queueing layer's memos
    (:mod:`pdplan.queueing.exact_memo`, which a search after another also reuses)."""
    clear_memo()
    clear_queueing_memos()
