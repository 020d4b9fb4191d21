"""Bisection for a root of a function that is cheaper per point on many points at once, with the scalar loop's result.

The scalar loop (``lo, top = 0, hi``; ``steps`` times: ``mid = 0.5·(lo + top)``, ``lo = mid`` where ``f(mid) ≤ 0``,
else ``top = mid``; return ``lo``, or ``hi`` if ``f(hi) ≤ 0``) evaluates one point per step. The points it may visit
in the next k steps are the 2^k − 1 midpoints of the tree below ``(lo, top)``, each the same double the loop would
compute (the same ``0.5·(lo + top)`` on the same ends). :func:`bisect_rows` evaluates those points in one call of a
function of many points (a mean field vectorised over rates: :func:`pdplan.queueing.chunk_width.riding_mean_field`)
and walks k levels down the tree by their signs, so it returns the scalar loop's double with ``steps/k`` calls instead
of ``steps`` where the function gives each point the value it gives it alone.

Two exact shortcuts: a step whose midpoint has a positive lower bound (``lower``: a cheap function below f, e.g.
the decode share of a utilisation that the prefill share only raises) goes right without evaluating f (as does
``hi`` itself: past the crossing); and once the midpoint is one of the ends (the bracket is two adjacent doubles) no
later step moves it (``f(top) > 0`` and ``f(lo) ≤ 0`` for a ``lo`` that is not the start, so ``lo = mid`` or
``top = mid`` leaves both), so the loop stops.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
RowsFunction = Callable[[FloatArray], FloatArray]
"""``f(x)``: the function at every entry of ``x``, each entry's value the one it has alone."""

TREE_LEVELS = 5
"""Levels of the bisection tree evaluated per call (31 points): a mean field over rates costs about 1.2x per call at
31 rates what it costs at one (:func:`~pdplan.queueing.chunk_width.riding_mean_field`, docs/accuracy.md §7.4)."""


def bisect_rows(
    f: RowsFunction,
    hi: float,
    steps: int = 80,
    *,
    lower: Callable[[float], float] | None = None,
    levels: int = TREE_LEVELS,
) -> float:
    """The scalar bisection's λ in (0, ``hi``] where ``f`` crosses 0 (module docstring): ``hi`` if ``f(hi) ≤ 0``,
    else the left end after ``steps`` halvings of (0, hi]; ``lower(x) ≤ f(x)`` where given (a midpoint with
    ``lower > 0`` is decided without ``f``)."""
    if levels < 1 or steps < 0:
        raise ValueError(f"bisect_rows needs levels >= 1 and steps >= 0, got {levels} and {steps}")
    if (lower is None or lower(hi) <= 0.0) and float(f(np.array([hi]))[0]) <= 0.0:
        return hi
    lo, top, done = 0.0, hi, 0
    while done < steps:
        mid = 0.5 * (lo + top)
        if mid == top or (mid == lo and lo > 0.0):  # two adjacent doubles: no step moves them again
            return lo
        if lower is not None and lower(mid) > 0.0:
            top, done = mid, done + 1
            continue
        depth = min(levels, steps - done)
        points = _tree(lo, top, depth)
        values = f(np.asarray(points, dtype=np.float64))
        node = 0
        for _ in range(depth):
            if values[node] <= 0.0:
                lo, node = points[node], 2 * node + 2
            else:
                top, node = points[node], 2 * node + 1
        done += depth
    return lo


def _tree(lo: float, top: float, depth: int) -> list[float]:
    """The midpoints of the bisection tree below ``(lo, top)`` to ``depth`` levels, heap order (node i's children
    2i + 1 on its left half, 2i + 2 on its right), each ``0.5·(a + b)`` of its own ends as the scalar loop computes
    it."""
    ends = [(lo, top)]
    points: list[float] = []
    for i in range(2**depth - 1):
        a, b = ends[i]
        m = 0.5 * (a + b)
        points.append(m)
        ends.extend(((a, m), (m, b)))
    return points
