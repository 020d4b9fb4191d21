"""Shared bookkeeping of the step-level simulators: the active decode set and busy-segment records.

Continuous batching (docs/queueing.md §2): a decode instance runs one step at a time over all active
sequences; each step of duration ``τ(B, K)`` gives every active sequence one token. The active set
is kept as scalars, not per-sequence arrays: with ``A = Σ (l_i − s_admit_i)`` the batch context at
step counter s is ``K(s) = A + B·s``, so between two events (admission or completion) the next m
step times are one vectorised call ``τ(B, A + B·(s + j))``, j = 0 … m−1. Completions are a heap of
``(finish_step, request)``. A loop therefore runs over *events* (≈ 2 per request), not over steps.

A model whose every layer is windowed (window w, :attr:`pdplan.specs.model.ModelSpec.kv_window_tokens`) reads
min(l_i + j_i, w) tokens per sequence, and its step law's K is that windowed sum (:mod:`pdplan.serving.roles`). The
set then keeps the g sequences still below the window in ``A`` and counts the c capped ones apart:
``K(s) = A + g·s + c·w``; a sequence moves from the first group to the second at the step its context reaches w
(a heap of those steps), and a segment ends there too, so K stays linear in s within a segment. Without a window
every sequence grows (g = B, c = 0): the formula above.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from pdplan.sim.spec import StepTimeFn
from pdplan.types import FloatArray

SEGMENT_CAP = 128
"""Most steps planned ahead in one vectorised call (a later event simply re-plans)."""
_OFFSETS = np.arange(SEGMENT_CAP, dtype=np.float64)


def _batch_rows(b: int, cache: dict[int, tuple[FloatArray, FloatArray]]) -> tuple[FloatArray, FloatArray]:
    """Cached ``(full(CAP, b), b·arange(CAP))`` so a segment costs one add before the callable."""
    rows = cache.get(b)
    if rows is None:
        rows = (np.full(SEGMENT_CAP, float(b)), float(b) * _OFFSETS)
        rows[0].flags.writeable = False
        rows[1].flags.writeable = False
        cache[b] = rows
    return rows


class ActiveSet:
    """Sequences in one instance's decode batch: B, A (context offset), step counter s; with a ``window``, the
    growing count g, the capped count c and the heap of window steps (module docstring)."""

    __slots__ = ("a", "b", "cache", "capped", "finish", "growing", "hits", "s", "step_fn", "window")

    def __init__(self, step_fn: StepTimeFn, window: float | None = None) -> None:
        self.step_fn = step_fn
        self.b = 0
        self.a = 0
        self.s = 0
        self.finish: list[tuple[int, int, int]] = []  # (finish step, request, l − s_admit)
        self.cache: dict[int, tuple[FloatArray, FloatArray]] = {}
        self.window = window
        self.growing: dict[int, int] = {}  # windowed only: request → l − s_admit, while below the window
        self.capped: set[int] = set()  # windowed only: requests holding w tokens
        self.hits: list[tuple[int, int]] = []  # windowed only: (step its context reaches w, request)

    def add(self, req: int, prompt: int, steps: int) -> None:
        """Join at the current step: context ``prompt`` now, finishes after ``steps`` steps."""
        offset = prompt - self.s
        self.b += 1
        heapq.heappush(self.finish, (self.s + steps, req, offset))
        if self.window is None:
            self.a += offset
        elif prompt >= self.window:
            self.capped.add(req)
        else:
            self.a += offset
            self.growing[req] = offset
            heapq.heappush(self.hits, (math.ceil(self.window - offset), req))  # offset + s ≥ w from this step on

    def pop_finished(self) -> list[int]:
        """Remove and return the sequences whose last step has just completed."""
        done: list[int] = []
        finish = self.finish
        while finish and finish[0][0] <= self.s:
            _, req, offset = heapq.heappop(finish)
            self.b -= 1
            if self.window is None or self.growing.pop(req, None) is not None:
                self.a -= offset
            else:
                self.capped.discard(req)
            done.append(req)
        return done

    def remove(self, req: int) -> tuple[int, int]:
        """Take running sequence ``req`` out before its last step (a preemption, :mod:`pdplan.sim.colocated_instance`);
        returns ``(its context now, l + j; the steps it has left)``. O(B): preemptions are rare."""
        i = next(k for k, entry in enumerate(self.finish) if entry[1] == req)
        end, _, offset = self.finish[i]
        self.finish[i] = self.finish[-1]
        self.finish.pop()
        heapq.heapify(self.finish)
        self.b -= 1
        if self.window is None or self.growing.pop(req, None) is not None:
            self.a -= offset
        else:
            self.capped.discard(req)
        if self.window is not None:
            self.hits = [hit for hit in self.hits if hit[1] != req]
            heapq.heapify(self.hits)
        return offset + self.s, end - self.s

    def _reach_window(self) -> None:
        """Move the sequences whose context has reached the window from the growing group to the capped one."""
        hits, growing = self.hits, self.growing
        while hits and hits[0][0] <= self.s:
            _, req = heapq.heappop(hits)
            offset = growing.pop(req, None)
            if offset is not None:  # not finished meanwhile
                self.a -= offset
                self.capped.add(req)

    def context(self) -> int | float:
        """Total context K of the batch at the current step (windowed: Σ min(l_i + j_i, w))."""
        if self.window is None:
            return self.a + self.b * self.s
        self._reach_window()
        return self.a + len(self.growing) * self.s + len(self.capped) * self.window

    def segment(self) -> FloatArray:
        """End times of the next m steps relative to the current boundary (m ≤ SEGMENT_CAP,
        up to the next completion; windowed: and up to the next sequence reaching the window)."""
        m = min(self.finish[0][0] - self.s, SEGMENT_CAP)
        batch, offsets = _batch_rows(self.b, self.cache)
        if self.window is None:
            context = (self.a + self.b * self.s) + offsets[:m]
            return np.cumsum(self.step_fn(batch[:m], context), dtype=np.float64)
        base = self.context()  # also moves the sequences that reached the window
        if self.hits:
            m = max(1, min(m, self.hits[0][0] - self.s))
        context = base + len(self.growing) * _OFFSETS[:m]
        return np.cumsum(self.step_fn(batch[:m], context), dtype=np.float64)


class Segments:
    """Busy periods of one pool: (start, end, batch size, steps) per record, in SI seconds."""

    __slots__ = ("batch", "end", "start", "steps")

    def __init__(self) -> None:
        self.start: list[float] = []
        self.end: list[float] = []
        self.batch: list[int] = []
        self.steps: list[int] = []

    def add(self, start_s: float, end_s: float, batch: int, steps: int) -> None:
        """Record one busy period: ``steps`` iterations of ``batch`` sequences."""
        self.start.append(start_s)
        self.end.append(end_s)
        self.batch.append(batch)
        self.steps.append(steps)

    def extend(self, start_s: FloatArray, end_s: FloatArray) -> None:
        """Record many single-request, single-iteration busy periods at once."""
        self.start.extend(start_s.tolist())
        self.end.extend(end_s.tolist())
        self.batch.extend([1] * start_s.size)
        self.steps.extend([1] * start_s.size)

    def arrays(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """(start, end, batch, steps) as float64 arrays."""
        return (
            np.asarray(self.start, dtype=np.float64),
            np.asarray(self.end, dtype=np.float64),
            np.asarray(self.batch, dtype=np.float64),
            np.asarray(self.steps, dtype=np.float64),
        )


class Timeline:
    """Per-request event times (absolute seconds; NaN until the event happens)."""

    __slots__ = ("admit", "arrival", "finish", "first_lag", "first_token", "prefill_done")

    def __init__(self, n: int) -> None:
        nan = float("nan")
        self.arrival: list[float] = [nan] * n
        self.prefill_done: list[float] = [nan] * n
        self.admit: list[float] = [nan] * n  # joined a decode batch
        self.first_token: list[float] = [nan] * n
        self.first_lag: list[float] = [0.0] * n
        """How long after ``first_token`` (the end of the iteration that sampled it) the client gets token 1: the
        overlap scheduler's iterations (:mod:`pdplan.sim.overlap_lag`); 0 without overlap."""
        self.finish: list[float] = [nan] * n
