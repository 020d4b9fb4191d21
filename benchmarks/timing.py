"""Timing helper shared by the speed benchmarks: best of N wall-clock runs (after an untimed warm-up)."""

from __future__ import annotations

import resource
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


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


def child_seconds(argv: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system, from ``resource.getrusage(RUSAGE_CHILDREN)`` differences) of one
    process ``argv`` run in ``cwd``, its output discarded: a command as a user runs it, start-up included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0, wall0 = usage.ru_utime + usage.ru_stime, time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - wall0, usage.ru_utime + usage.ru_stime - cpu0


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
