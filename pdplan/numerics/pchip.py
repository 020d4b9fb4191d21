"""SciPy's PCHIP interpolant (``scipy.interpolate.PchipInterpolator(x, y, extrapolate=False)``) of 1-D data, without
``import scipy.interpolate``.

A PrfaaS measured prefill profile (:mod:`pdplan.serving.prfaas.profile`) is interpolated with PCHIP (Fritsch and
Carlson, "Monotone piecewise cubic interpolation", SIAM J. Numer. Anal. 17(2), 1980; the derivative rule of Fritsch
and Butland 1984 with Moler's one-sided end slopes, *Numerical Computing with MATLAB* §3.6, ``pchiptx.m``): it keeps
monotone data monotone. ``import scipy.interpolate`` (SciPy 1.17) imports ``scipy.optimize``, ``scipy.linalg``,
``scipy.sparse``, ``scipy.special`` and the array-API layer; even SciPy's compiled evaluator alone
(``scipy.interpolate._ppoly``) imports ``scipy.linalg``: 0.18 s of CPU on the 2-core machine (2026-12-07), for a
few dozen additions and multiplications.

The arithmetic below is SciPy 1.17.1's, operation for operation, so the doubles are SciPy's:

* derivatives (``scipy/interpolate/_cubic.py``, ``PchipInterpolator._find_derivatives`` and ``_edge_case``): with
  ``h_k = x_{k+1} − x_k`` and ``m_k = (y_{k+1} − y_k) / h_k``, an interior ``d_k`` is 0 where ``m_{k−1}`` and
  ``m_k`` differ in sign or either is 0, else ``1 / ((w₁/m_{k−1} + w₂/m_k) / (w₁ + w₂))`` with
  ``w₁ = 2h_k + h_{k−1}``, ``w₂ = h_k + 2h_{k−1}``; an end's ``d = ((2h₀ + h₁)m₀ − h₀m₁) / (h₀ + h₁)``, set to 0
  where its sign differs from ``m₀``'s and to ``3m₀`` where ``m₀`` and ``m₁`` differ in sign and ``|d| > 3|m₀|``;
  two points give the chord's slope at both;
* coefficients (``CubicHermiteSpline.__init__``): ``t = (d_k + d_{k+1} − 2·slope_k) / h_k`` and, highest power
  first, ``c = [t / h_k, (slope_k − d_k) / h_k − t, d_k, y_k]``;
* evaluation (``PPoly.__call__`` → the compiled ``_ppoly.evaluate``, ``evaluate_poly1``): the interval ``k`` with
  ``x_k ≤ v < x_{k+1}`` (the last one closed on the right), ``s = v − x_k``, and
  ``((((0 + c₃) + c₂·s) + c₁·s²) + c₀·s³)`` with ``s² = s·s``, ``s³ = s²·s``, in that order.

``tests/unit/test_numerics_pchip.py`` checks the values against SciPy's to the bit (hypothesis, 2–40 points, monotone
and not) on x86-64, where SciPy's wheels are compiled without fused multiply-adds; a build that fuses
``res + c·z`` in ``_ppoly`` (e.g. on arm64) may differ from these in the last bits, so there the test allows
10⁻¹⁵ relative plus 10⁻¹⁵ of the largest ``|y|`` (not run on such a machine yet). Points outside ``[x₀, x_n]``
raise (SciPy returns NaN there; the one caller clips first).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

__all__ = ["Pchip"]


class Pchip:
    """The PCHIP interpolant of ``(x, y)``: ``x`` finite and strictly increasing (≥ 2 points), ``y`` finite."""

    __slots__ = ("_coefficients", "_x")

    def __init__(self, x: npt.ArrayLike, y: npt.ArrayLike) -> None:
        xs = np.asarray(x, dtype=np.float64)
        ys = np.asarray(y, dtype=np.float64)
        if xs.ndim != 1 or xs.size < 2 or ys.shape != xs.shape:
            raise ValueError(f"PCHIP needs 1-D x and y of one length >= 2, got shapes {xs.shape} and {ys.shape}")
        if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
            raise ValueError("PCHIP needs finite x and y")
        h = np.diff(xs)
        if np.any(h <= 0):
            raise ValueError("PCHIP needs strictly increasing x")
        d = _derivatives(xs, ys)
        slope = np.diff(ys) / h
        t = (d[:-1] + d[1:] - 2 * slope) / h
        self._x = xs
        self._coefficients = (t / h, (slope - d[:-1]) / h - t, d[:-1], ys[:-1])

    def __call__(self, values: npt.ArrayLike) -> FloatArray:
        """The interpolant at ``values`` (any shape); every value must lie in ``[x₀, x_n]``."""
        v = np.asarray(values, dtype=np.float64)
        if not np.all((v >= self._x[0]) & (v <= self._x[-1])):
            raise ValueError(f"PCHIP evaluated outside its data [{self._x[0]:g}, {self._x[-1]:g}] (or at NaN)")
        k = np.minimum(np.searchsorted(self._x, v, side="right") - 1, self._x.size - 2)
        s = v - self._x[k]
        c0, c1, c2, c3 = (c[k] for c in self._coefficients)
        s2 = s * s
        out: FloatArray = ((0.0 + c3) + c2 * s) + c1 * s2
        return out + c0 * (s2 * s)


def _derivatives(x: FloatArray, y: FloatArray) -> FloatArray:
    """PCHIP's slope at every point (module docstring; SciPy's ``_find_derivatives`` for 1-D ``y``)."""
    h = x[1:] - x[:-1]
    m = (y[1:] - y[:-1]) / h
    if y.size == 2:
        return np.array([m[0], m[0]])
    sign = np.sign(m)
    flat = (sign[1:] != sign[:-1]) | (m[1:] == 0) | (m[:-1] == 0)
    w1 = 2 * h[1:] + h[:-1]
    w2 = h[1:] + 2 * h[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):  # where it divides by 0, ``flat`` holds and 0 is taken
        harmonic = (w1 / m[:-1] + w2 / m[1:]) / (w1 + w2)
    d = np.zeros_like(y)
    d[1:-1][~flat] = 1.0 / harmonic[~flat]
    d[0] = _end_slope(h[0], h[1], m[0], m[1])
    d[-1] = _end_slope(h[-1], h[-2], m[-1], m[-2])
    return d


def _end_slope(h0: float, h1: float, m0: float, m1: float) -> float:
    """The one-sided three-point slope at an end, kept shape-preserving (SciPy's ``_edge_case``)."""
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    if np.sign(d) != np.sign(m0):
        return 0.0
    if np.sign(m0) != np.sign(m1) and abs(d) > 3.0 * abs(m0):
        return float(3.0 * m0)
    return float(d)
