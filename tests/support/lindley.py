"""Exact waits of a round-robin split by Lindley's recursion: the reference the round-robin queue laws are tested on."""

from __future__ import annotations

import numpy as np


def round_robin_wait(arrivals: np.ndarray, service: np.ndarray, servers: int) -> np.ndarray:
    """Each request's wait when every ``servers``-th arrival goes to the same FCFS instance: Lindley's recursion
    ``W' = max(0, W + S − A)`` per instance, vectorised as the running sum less its running minimum."""
    wait = np.empty(arrivals.size)
    for j in range(servers):
        a, s = arrivals[j::servers], service[j::servers]
        steps = np.concatenate(([0.0], np.cumsum(s[:-1] - np.diff(a))))
        wait[j::servers] = steps - np.minimum(0.0, np.minimum.accumulate(steps))
    return wait
