"""Non-negative least squares, ``argmin_x ‖A·x − b‖₂`` subject to ``x ≥ 0``: SciPy's compiled Lawson–Hanson solver
without the import of :mod:`scipy.optimize`.

Why SciPy's solver and not a numpy one: the decode-step fit (:func:`pdplan.serving.roles.decode_perf`) feeds the
search's Pareto screen, which splits exact ties by rounding, and an NNLS of our own (Householder steps in numpy,
written and measured in commit 28e79d9) moves the last bit of the coefficients and with it the
``deepseek-v3-wide-ep`` golden (docs/accuracy.md §7). Why not ``from scipy.optimize import nnls``: that statement runs
``scipy/optimize/__init__.py``, which imports ``scipy.linalg``, ``scipy.sparse``, ``scipy.spatial`` and the whole
optimizer family, about 0.14 s of a default ``pdplan evaluate``'s start-up (``python -X importtime``; issue #27),
to call one compiled routine once.

SciPy 1.17's ``scipy.optimize.nnls`` (``scipy/optimize/_nnls.py``) checks its arguments and calls
``scipy.optimize._slsqplib.nnls(A, b, maxiter)``, a C port of Lawson & Hanson's algorithm (*Solving Least Squares
Problems*, SIAM 1995, ch. 23), with ``maxiter = 3·n``; it raises when the routine reports ``info == 3`` (the
iteration limit). :func:`nnls` makes the same checks and the same call, so its results are SciPy's to the bit
(``tests/unit/test_numerics_nnls.py`` compares them). The compiled module is imported without
``scipy/optimize/__init__.py`` (:mod:`pdplan.numerics.scipy_parts`, which also says for which SciPy versions);
with any other SciPy, :func:`nnls` calls the public ``scipy.optimize.nnls`` (the same answers, the slower start-up).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import numpy.typing as npt

from pdplan.numerics.scipy_parts import import_without_package_init, private_layout_known

FloatArray = npt.NDArray[np.float64]

_ITERATION_LIMIT_INFO = 3
"""``info`` of ``_slsqplib.nnls`` when it stops at ``maxiter`` (SciPy raises then; so does :func:`nnls`)."""


@cache
def _solver() -> Callable[[FloatArray, FloatArray], tuple[FloatArray, float]]:
    """:func:`nnls`'s implementation for the installed SciPy: the compiled routine with SciPy's checks, or SciPy's
    public function where the private layout is not known (module docstring)."""
    if not private_layout_known():
        from scipy.optimize import nnls as public_nnls

        def public(a: FloatArray, b: FloatArray) -> tuple[FloatArray, float]:
            x, rnorm = public_nnls(a, b)
            return np.asarray(x, dtype=np.float64), float(rnorm)

        return public
    compiled = import_without_package_init("scipy.optimize", "_slsqplib").nnls

    def private(a: FloatArray, b: FloatArray) -> tuple[FloatArray, float]:
        x, rnorm, info = compiled(a, b, 3 * a.shape[1])
        if info == _ITERATION_LIMIT_INFO:
            raise RuntimeError("Maximum number of iterations reached.")
        return np.asarray(x, dtype=np.float64), float(rnorm)

    return private


def nnls(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[FloatArray, float]:
    """``(x, ‖A·x − b‖₂)`` with ``x ≥ 0`` minimising the residual: :func:`scipy.optimize.nnls` with its default
    ``maxiter = 3·n``, to the bit (module docstring). ``a``: ``(m, n)``; ``b``: ``(m,)`` or ``(m, 1)``; finite."""
    a_arr = np.asarray_chkfinite(a, dtype=np.float64, order="C")
    b_arr = np.asarray_chkfinite(b, dtype=np.float64)
    if a_arr.ndim != 2:
        raise ValueError(f"nnls: expected a 2-D A, got shape {a_arr.shape}")
    if b_arr.ndim == 2 and b_arr.shape[1] == 1:
        b_arr = b_arr.ravel()
    if b_arr.ndim != 1 or b_arr.shape[0] != a_arr.shape[0]:
        raise ValueError(f"nnls: b of shape {b_arr.shape} does not match A of shape {a_arr.shape}")
    return _solver()(a_arr, b_arr)
