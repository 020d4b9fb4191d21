"""``scipy.sparse.linalg.spsolve`` of a square system given as ``(row, column, value)`` triplets, through SciPy's
compiled SuperLU, without importing ``scipy.sparse``.

The least-loaded (JSQ) chain of more than 16 instances is solved sparsely (``pdplan/queueing/jsq.py``: about c²/2
states). ``import scipy.sparse.linalg`` (SciPy 1.17) imports ``scipy.sparse``, ``scipy.linalg`` and the array-API
layer: 0.18 s of CPU on the 2-core machine (2026-12-07), against 0.02 s for the compiled
``scipy.sparse.linalg._dsolve._superlu`` alone, the module that does the solve.

What ``spsolve(csc_matrix((values, (rows, cols)), shape=(n, n)), rhs, permc_spec=order)`` does (SciPy 1.17.1,
``scipy/sparse/_compressed.py`` and ``scipy/sparse/linalg/_dsolve/linsolve.py``), and this module repeats: the
triplets become compressed sparse columns (each column's entries by ascending row; explicit zeros kept), and
``_superlu.gssv(n, nnz, data, row_indices, column_pointers, rhs, 1, options={"ColPerm": order})`` factors and solves
(``1``: the CSC layout); a nonzero ``info`` (a singular matrix) fills the answer with NaN in SciPy and raises here.
Triplets that repeat a ``(row, column)`` are refused: SciPy sums them in an order its C++ sort leaves unspecified
for long runs, and the one caller has none. The same arrays reach the same compiled routine, so the solution is
SciPy's to the bit (``tests/unit/test_numerics_sparse_solve.py``).

Two differences from ``spsolve`` itself, both outside pdplan's tested set-up: ``spsolve`` prefers UMFPACK when
``scikit-umfpack`` is installed (not a pdplan dependency), where this module always runs SuperLU; and with a SciPy
whose private layout was not checked (:mod:`pdplan.numerics.scipy_parts`) this module calls the public ``spsolve``.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import numpy.typing as npt

from pdplan.numerics.scipy_parts import import_without_package_init, private_layout_known

__all__ = ["solve_triplets"]

FloatArray = npt.NDArray[np.float64]
_CSC_LAYOUT = 1
"""``gssv``'s flag for compressed sparse columns (SciPy's ``flag = 1  # CSC format``)."""


def _csc(rows: npt.NDArray[Any], cols: npt.NDArray[Any], values: FloatArray, n: int) -> tuple[Any, Any, Any]:
    """``(data, row_indices, column_pointers)`` of the n×n matrix, each column's rows ascending (SciPy's layout)."""
    order = np.lexsort((rows, cols))
    r, c = rows[order], cols[order]
    if np.any((r[1:] == r[:-1]) & (c[1:] == c[:-1])):
        raise ValueError("a (row, column) pair is given twice; sum the duplicates first")
    pointers = np.zeros(n + 1, dtype=np.intc)
    np.cumsum(np.bincount(c, minlength=n), out=pointers[1:])
    return np.ascontiguousarray(values[order]), r.astype(np.intc), pointers


def solve_triplets(
    rows: npt.ArrayLike, cols: npt.ArrayLike, values: npt.ArrayLike, rhs: npt.ArrayLike, column_order: str
) -> FloatArray:
    """``x`` with ``A x = rhs``, ``A[rows[k], cols[k]] = values[k]`` (n×n, n = ``rhs.size``; no pair twice), as
    ``spsolve(csc_matrix(...), rhs, permc_spec=column_order)`` gives it (module docstring)."""
    r, c = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    v, b = np.asarray(values, dtype=np.float64), np.asarray(rhs, dtype=np.float64)
    n = b.size
    if b.ndim != 1 or not (r.shape == c.shape == v.shape) or r.ndim != 1:
        raise ValueError("rows, cols and values must be 1-D of one length, rhs 1-D")
    if r.size and (min(int(r.min()), int(c.min())) < 0 or max(int(r.max()), int(c.max())) >= n):
        raise ValueError(f"an index lies outside the {n}x{n} matrix")
    if not private_layout_known():
        sparse: Any = importlib.import_module("scipy.sparse")
        linalg: Any = importlib.import_module("scipy.sparse.linalg")
        matrix = sparse.csc_matrix((v, (r, c)), shape=(n, n))
        return np.asarray(linalg.spsolve(matrix, b, permc_spec=column_order), dtype=np.float64)
    superlu: Any = import_without_package_init("scipy.sparse.linalg._dsolve", "_superlu")
    data, indices, pointers = _csc(r, c, v, n)
    x, info = superlu.gssv(n, data.size, data, indices, pointers, b, _CSC_LAYOUT, options={"ColPerm": column_order})
    if info != 0:
        raise ValueError(f"the sparse system is singular (SuperLU info {info})")
    return np.asarray(x, dtype=np.float64).ravel()
