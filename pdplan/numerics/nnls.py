"""Non-negative least squares ``min ‖A·x − b‖₂ subject to x ≥ 0`` for a few columns, as
:func:`scipy.optimize.nnls` answers it, without importing ``scipy.optimize`` (about 0.3 s of start-up).

The problem is convex, so its minimum ``x*`` is also the unconstrained least-squares solution on its own support
``S* = {i : x*_i > 0}`` (there no bound is active, and a local minimum of the restricted problem is its global one).
Every support ``S`` whose unconstrained solution ``y_S = argmin ‖A_S·y − b‖`` is strictly positive gives a feasible
point, no better than ``x*``; ``x*`` is among them (or is zero). So the best of the ``2ⁿ − 1`` supports and ``x = 0``
is the NNLS solution (Lawson & Hanson, *Solving Least Squares Problems*, 1974, ch. 23: their active-set algorithm,
which SciPy runs, visits a chain of these supports). Enumeration costs ``2ⁿ − 1`` small least-squares solves
(:func:`numpy.linalg.lstsq`, SVD-based): 7 for the three-coefficient fits of the decode step and the prefill
quadratic (:mod:`pdplan.serving.roles`); :data:`MAX_COLUMNS` keeps it to small problems. Where ``A`` has full column
rank the solution is unique and equal to SciPy's up to rounding (tests/unit/test_numerics_nnls.py).

Not yet called: SciPy's NNLS runs Householder steps through BLAS, whose summation order no numpy code reproduces, and
one golden (deepseek-v3-wide-ep) moves with any last-bit change of the decode fit, because the Pareto screen
(:func:`pdplan.search.select.pareto_front`) splits two mathematically equal points by rounding (docs/accuracy.md).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

MAX_COLUMNS = 12
"""Most columns enumerated (``2¹² − 1 = 4095`` solves); wider problems belong to an active-set solver."""


def nnls(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[FloatArray, float]:
    """``(x, ‖A·x − b‖₂)`` with ``x ≥ 0`` minimising the residual (module docstring); ``a``: ``[m, n]``, ``b``:
    ``[m]``."""
    am, bv = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n = am.shape[1]
    if n > MAX_COLUMNS:
        raise ValueError(f"nnls by enumeration takes at most {MAX_COLUMNS} columns, got {n}")
    best, best_norm = np.zeros(n), float(np.linalg.norm(bv))
    for size in range(1, n + 1):
        for support in combinations(range(n), size):
            cols = list(support)
            y = np.linalg.lstsq(am[:, cols], bv, rcond=None)[0]
            if not np.all(y > 0.0):
                continue
            norm = float(np.linalg.norm(am[:, cols] @ y - bv))
            if norm < best_norm:
                best = np.zeros(n)
                best[cols] = y
                best_norm = norm
    return best, best_norm
