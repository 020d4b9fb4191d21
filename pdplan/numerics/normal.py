"""The standard normal distribution: its cdf Φ (``ndtr``), ``log Φ`` (``log_ndtr``) and its inverse Φ⁻¹
(``ndtri``), as :mod:`scipy.special` names them, without importing ``scipy.special`` (about 0.3 s of start-up).

* ``ndtr(x) = ½·erfc(−x/√2)`` (Abramowitz & Stegun 26.2.29), in the form of Cephes' ``ndtr.c`` that SciPy uses:
  ``½ + ½·erf(x/√2)`` where ``|x/√2| < 1/√2``, else ``½·erfc(|x|/√2)``, reflected for ``x > 0``; ``erf`` and
  ``erfc`` are the C library's (:func:`math.erf`, :func:`math.erfc`, within a few ulps).
* ``log_ndtr(x)``: for ``x > −1``, ``log1p(−½·erfc(x/√2))`` (no cancellation as Φ → 1); for ``x ≤ −1``,
  ``log(½·erfcx(u)) − u²`` with ``u = −x/√2`` and the scaled complement ``erfcx(u) = e^{u²}·erfc(u)`` (SciPy's
  split, ``xsf/log_ndtr``), so ``log Φ`` stays finite far below where Φ underflows. ``erfcx`` is ``erfc(u)·e^{u²}``
  with ``u²`` carried as an exact double-double (Dekker's product, so the exponential's argument error is below one
  ulp of ``e^{u²}``) while ``erfc(u)`` is normal (``u < 26``), and beyond that its asymptotic series
  ``erfcx(u) = (1/(u√π))·Σ_k (−1)^k (2k−1)!!/(2u²)^k`` (A&S 7.1.23), whose terms at ``u ≥ 26`` fall below 1e-17
  of the sum by the tenth.
* ``ndtri(p)``: Wichura's algorithm AS241 (PPND16, *Applied Statistics* 37(3) 1988, 477–484; relative accuracy about
  1e-16), as the standard library implements it (:meth:`statistics.NormalDist.inv_cdf`); ``ndtri(0) = −∞``,
  ``ndtri(1) = +∞``, NaN outside ``[0, 1]``.

Each function takes a scalar or an array and returns an array of the broadcast shape (a 0-d array for a scalar, as a
NumPy ufunc does); elements are computed one by one with the C library's functions, which suits the short arrays of
quantile grids and bin edges the callers pass.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

SQRT1_2 = math.sqrt(0.5)
"""1/√2."""
ERFC_NORMAL_LIMIT = 26.0
"""Above this ``u``, ``erfc(u) < 6e-296`` nears the subnormal range, so ``erfcx`` switches to its asymptotic series."""
ASYMPTOTIC_TERMS = 12
"""Terms of the asymptotic series for ``erfcx`` at ``u ≥ 26``: the 10th is below 1e-17 of the sum (module docstring)."""
_SPLIT = 134217729.0
"""Dekker's splitting constant 2^27 + 1 for IEEE doubles (T. J. Dekker, *Numer. Math.* 18, 1971, 224–242)."""


def _ndtr1(x: float) -> float:
    z = abs(x) * SQRT1_2
    if math.isnan(x):
        return math.nan
    if z < SQRT1_2:
        return 0.5 + 0.5 * math.erf(x * SQRT1_2)
    y = 0.5 * math.erfc(z)
    return 1.0 - y if x > 0 else y


def _square(u: float) -> tuple[float, float]:
    """``u²`` as ``hi + lo`` exactly (Dekker's two-product)."""
    hi = u * u
    c = _SPLIT * u
    uh = c - (c - u)
    ul = u - uh
    lo = ((uh * uh - hi) + 2.0 * uh * ul) + ul * ul
    return hi, lo


def _erfcx1(u: float) -> float:
    """``e^{u²}·erfc(u)`` for ``u ≥ 1/√2`` (module docstring)."""
    if u < ERFC_NORMAL_LIMIT:
        hi, lo = _square(u)
        return math.erfc(u) * math.exp(hi) * (1.0 + lo)
    inv = 1.0 / (2.0 * u * u)
    term = total = 1.0
    for k in range(1, ASYMPTOTIC_TERMS):
        term *= -(2 * k - 1) * inv
        total += term
    return total / (u * math.sqrt(math.pi))


def _log_ndtr1(x: float) -> float:
    if math.isnan(x):
        return math.nan
    if x > -1.0:
        return math.log1p(-0.5 * math.erfc(x * SQRT1_2))
    u = -x * SQRT1_2
    hi, lo = _square(u)
    return math.log(0.5 * _erfcx1(u)) - hi - lo


def _ndtri1(p: float) -> float:
    if not 0.0 <= p <= 1.0:
        return math.nan
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    from statistics import NormalDist  # lazy: only quantile grids need it (~10 ms)

    return NormalDist().inv_cdf(p)


def _floats(values: object) -> FloatArray:
    """An object array (or scalar) from :func:`numpy.frompyfunc` as float64; a scalar stays a NumPy scalar, as a
    ufunc returns it."""
    out: FloatArray = np.asarray(values, dtype=np.float64)[()]
    return out


_NDTR = np.frompyfunc(_ndtr1, 1, 1)
_LOG_NDTR = np.frompyfunc(_log_ndtr1, 1, 1)
_NDTRI = np.frompyfunc(_ndtri1, 1, 1)


def ndtr(x: npt.ArrayLike) -> FloatArray:
    """Standard normal cdf Φ(x), elementwise (module docstring)."""
    return _floats(_NDTR(np.asarray(x, dtype=np.float64)))


def log_ndtr(x: npt.ArrayLike) -> FloatArray:
    """``log Φ(x)``, elementwise, finite wherever ``x`` is (module docstring)."""
    return _floats(_LOG_NDTR(np.asarray(x, dtype=np.float64)))


def ndtri(p: npt.ArrayLike) -> FloatArray:
    """Standard normal quantile Φ⁻¹(p), elementwise (module docstring)."""
    return _floats(_NDTRI(np.asarray(p, dtype=np.float64)))
