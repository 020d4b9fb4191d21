"""Timing helper shared by the speed benchmarks: best of N wall-clock runs (after an untimed warm-up)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int = 5, *, warm_up: bool = True) -> float:
    """Fewest seconds ``fn`` took over ``repeats`` runs (the least disturbed by other load)."""
    if warm_up:
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
