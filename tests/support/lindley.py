"""Exact waits of a round-robin split (Lindley's recursion) and of least-work routing (Kiefer–Wolfowitz): the references
the routed queue laws are tested on."""

from __future__ import annotations

import heapq

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


def least_work_wait(arrivals: np.ndarray, service: np.ndarray, servers: int) -> np.ndarray:
    """Each request's wait in one FCFS queue served by the first free of ``servers`` instances (least-work routing
    of a central queue): the Kiefer–Wolfowitz recursion, the servers' free times in a heap."""
    free = [0.0] * servers
    wait = np.empty(arrivals.size)
    for i, (t, s) in enumerate(zip(arrivals.tolist(), service.tolist(), strict=True)):
        start = max(heapq.heappop(free), t)
        wait[i] = start - t
        heapq.heappush(free, start + s)
    return wait
