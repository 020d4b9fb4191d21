"""``numpy.unique(values)`` and ``numpy.median(values)`` of a 1-D array, the same arrays and doubles, without
importing ``numpy.ma``.

Both numpy routines (numpy 2.3+, ``numpy/lib/_arraysetops_impl.py`` ``_unique1d`` and
``numpy/lib/_function_base_impl.py`` ``_median`` → ``numpy/lib/_utils_impl.py`` ``_median_nancheck``) ask
``np.ma.is_masked`` / ``np.ma.isMaskedArray`` of their input, and that attribute access imports ``numpy.ma``
(``numpy.ma.core`` and ``numpy.ma.extras``: about 5 ms of CPU in a fresh process, 9 ms under ``-X importtime``, on
the 2-core development machine, 2026-12-07) for a question an ndarray always answers "no". The default ``evaluate``
and ``optimize`` call them on a few small float grids (the workload bins' cuts, the decode-step fit's grid and its
median error, the physics check's floors) and use nothing else of ``numpy.ma``.

* :func:`sorted_unique` is ``numpy.unique``'s own sorting path (the one it takes with ``return_index``, or for
  dtypes without a hash table): flatten a copy, sort it, keep each element that differs from the one before it, and
  keep one NaN (or NaT) of the trailing run that sorting makes of them (``equal_nan=True``, numpy's default). The
  distinct values and their order are ``numpy.unique``'s, whichever path numpy takes; equal values are the same
  value, with one exception, ``0.0`` and ``-0.0``, which compare equal, so either may stand for both, in numpy's
  result and in this one.
* :func:`median` is ``numpy.median``'s arithmetic on a sorted copy: the middle element of an odd count, and
  ``(a + b) / 2`` of the two middle ones of an even count (numpy takes the ``mean`` of those two after a partition:
  one addition, one division by 2, the same doubles); NaN when the data hold a NaN, as numpy. An empty array raises
  (numpy warns and returns NaN).

Tested with hypothesis against numpy, bit for bit (``tests/unit/test_numerics_sorted_stats.py``). Pure numpy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["median", "sorted_unique"]


def sorted_unique(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """The distinct values of ``values`` (any shape, flattened), ascending; NaNs, if any, one NaN at the end.

    The same array as ``numpy.unique(values)`` (module docstring), without ``numpy.ma``'s import.
    """
    ordered = np.array(values).ravel()  # a copy: the caller's array is not sorted in place
    ordered.sort()
    keep = np.empty(ordered.shape, dtype=np.bool_)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    if ordered.size and ordered.dtype.kind in "cfmM" and np.isnan(ordered[-1]):
        first_nan = int(np.argmax(np.isnan(ordered)))  # sorting puts every NaN last
        keep[first_nan] = True
        keep[first_nan + 1 :] = False
    return ordered[keep]


def median(values: npt.ArrayLike) -> float:
    """The median of a non-empty array of reals (flattened), the double ``float(numpy.median(values))`` gives
    (module docstring)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64).ravel())
    n = ordered.size
    if n == 0:
        raise ValueError("the median of an empty array is undefined")
    if math.isnan(ordered[-1]):  # sorting puts every NaN last
        return math.nan
    if n % 2:
        return float(ordered[n // 2])
    return float((ordered[n // 2 - 1] + ordered[n // 2]) / 2.0)
