"""Log-gamma and ``xlogy``, as :mod:`scipy.special` names them (``gammaln``, ``xlogy``), without importing
``scipy.special`` (about 0.3 s of start-up).

``ln Γ(x)`` for ``x > 0`` is Stirling's series (A&S 6.1.40, eight terms: below 1e-16 absolute for ``x ≥ 10``) after
the recurrence ``Γ(x + 1) = x·Γ(x)`` (A&S 6.1.15) lifts ``x`` to 10 or more; elsewhere the C library's ``lgamma``.

A numpy ``gammainc`` (Temme's expansion, the series and Legendre's fraction after Cephes' ``igam.c``, within 1e-13 of
SciPy) and an NNLS were written beside these and measured (docs/accuracy.md §7), then removed while nothing called
them: the ``gammainc`` ran 4× slower than SciPy's C on the default search, the NNLS moved a golden's Pareto ties. They
are in the history (commits aff9e94 and 28e79d9) for when those are settled.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)
"""``B_{2k}/(2k(2k−1))`` for k = 1…8, the coefficients of Stirling's series for ``ln Γ`` (A&S 6.1.40-41)."""
STIRLING_SERIES_MIN = 10.0
"""From this ``x`` on, eight terms of Stirling's series give ``ln Γ`` within 1e-16 (the ninth is 3e-17 at 10)."""
_LOG_2PI = math.log(2.0 * math.pi)


def _lgamma1(x: float) -> float:
    """``ln|Γ(x)|`` of one number; ``+∞`` at the poles (0 and the negative integers), as SciPy returns it."""
    if math.isnan(x):
        return math.nan
    try:
        return math.lgamma(x)
    except ValueError:
        return math.inf


_LGAMMA = np.frompyfunc(_lgamma1, 1, 1)


def _shift_up(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(b, ln(x(x+1)…(b−1)))`` with ``b = x + n ≥ 10`` (``n ≥ 0`` the fewest steps), for ``x > 0``: the recurrence
    ``Γ(x + 1) = x·Γ(x)`` (A&S 6.1.15) moves ``ln Γ`` into the range where Stirling's series holds."""
    steps = np.ceil(np.maximum(STIRLING_SERIES_MIN - x, 0.0))
    product = np.ones_like(x)
    for j in range(int(steps.max(initial=0.0))):
        product *= np.where(j < steps, x + j, 1.0)
    return x + steps, np.log(product)


def _stirling_series(b: FloatArray) -> FloatArray:
    """``ε(b) = Σ_k B_{2k}/(2k(2k−1)·b^{2k−1})`` for ``b ≥ 10`` (A&S 6.1.40)."""
    inv2 = 1.0 / (b * b)
    acc = np.full_like(b, STIRLING[-1])
    for c in STIRLING[-2::-1]:
        acc = acc * inv2 + c
    return np.asarray(acc / b, dtype=np.float64)


def gammaln(x: npt.ArrayLike) -> FloatArray:
    """``ln|Γ(x)|`` elementwise: for ``x > 0`` Stirling's series (A&S 6.1.40, eight terms) after the recurrence
    ``ln Γ(x) = ln Γ(x + n) − ln(x(x+1)…(x+n−1))`` lifts ``x`` to 10 or more, absolute error a few ulps of
    ``max(1, |ln Γ(x)|)``; elsewhere the C library's ``lgamma`` (:func:`math.lgamma`), ``+∞`` at the poles."""
    xa = np.asarray(x, dtype=np.float64)
    flat = xa.ravel()
    positive = (flat > 0) & np.isfinite(flat)
    out = np.empty_like(flat)
    b, log_product = _shift_up(flat[positive])
    out[positive] = (b - 0.5) * np.log(b) - b + 0.5 * _LOG_2PI + _stirling_series(b) - log_product
    if not positive.all():
        out[~positive] = np.asarray(_LGAMMA(flat[~positive]), dtype=np.float64)
    result: FloatArray = out.reshape(xa.shape)[()]
    return result


def xlogy(x: npt.ArrayLike, y: npt.ArrayLike) -> FloatArray:
    """``x·ln y`` elementwise, 0 where ``x = 0`` and ``y`` is not NaN (SciPy's ``xlogy``)."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = np.where((xa == 0) & ~np.isnan(ya), 0.0, xa * np.log(ya))[()]
    return out
