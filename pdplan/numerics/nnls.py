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
(``tests/unit/test_numerics_nnls.py`` compares them). The extension module is loaded from its file under SciPy's
``optimize`` folder, which does not execute the package's ``__init__``. That layout is SciPy's private one and is
used only for the SciPy versions it was checked on (:data:`PRIVATE_SOLVER_VERSIONS`); with any other SciPy,
:func:`nnls` calls the public ``scipy.optimize.nnls`` (the same answers, the slower start-up).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

PRIVATE_SOLVER_VERSIONS = frozenset({(1, 17)})
"""SciPy ``(major, minor)`` versions whose ``scipy.optimize.nnls`` is the thin wrapper over
``scipy.optimize._slsqplib.nnls(A, b, maxiter) -> (x, rnorm, info)`` that :func:`nnls` reproduces (read in SciPy
1.17.1's ``scipy/optimize/_nnls.py``)."""

_EXTENSION = "scipy.optimize._slsqplib"
_ITERATION_LIMIT_INFO = 3
"""``info`` of ``_slsqplib.nnls`` when it stops at ``maxiter`` (SciPy raises then; so does :func:`nnls`)."""


def scipy_version(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a SciPy version string (``"1.17.1"``, ``"1.18.0rc1"``)."""
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or "0")


def _load_extension() -> Any:
    """The compiled ``scipy.optimize._slsqplib`` module, loaded from its file (module docstring); None when this SciPy
    is not one of :data:`PRIVATE_SOLVER_VERSIONS` or lacks the file."""
    if _EXTENSION in sys.modules:  # scipy.optimize was imported already: its own module, no second copy
        return sys.modules[_EXTENSION]
    import scipy

    if scipy_version(scipy.__version__) not in PRIVATE_SOLVER_VERSIONS:
        return None
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    folder = Path(scipy.__path__[0]) / "optimize"
    files = [folder / f"_slsqplib{suffix}" for suffix in suffixes if (folder / f"_slsqplib{suffix}").is_file()]
    if not files:
        return None
    spec = importlib.util.spec_from_file_location(_EXTENSION, files[0])
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _solver() -> Callable[[FloatArray, FloatArray], tuple[FloatArray, float]]:
    """:func:`nnls`'s implementation for the installed SciPy: the compiled routine with SciPy's checks, or SciPy's
    public function where the private layout is not known (module docstring)."""
    extension = _load_extension()
    if extension is None:
        from scipy.optimize import nnls as public_nnls

        def public(a: FloatArray, b: FloatArray) -> tuple[FloatArray, float]:
            x, rnorm = public_nnls(a, b)
            return np.asarray(x, dtype=np.float64), float(rnorm)

        return public
    compiled = extension.nnls

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
