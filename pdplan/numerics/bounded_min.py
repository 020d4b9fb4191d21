"""SciPy's bounded scalar minimiser (``scipy.optimize.minimize_scalar(f, bounds=(a, b), method="bounded",
options={"xatol": tol})``), without ``import scipy.optimize``.

The PrfaaS threshold search (:func:`pdplan.serving.prfaas.capacity.search_threshold`) maximises a unimodal bound over
an interval with it; ``import scipy.optimize`` costs about 0.3 s of CPU on the 2-core machine (2026-12-07: it imports
``scipy.linalg``, ``scipy.sparse``, ``scipy.special`` and the array-API layer) for a routine written in Python.

The method is Brent's (R. P. Brent, *Algorithms for Minimization without Derivatives*, 1973, ch. 5: golden-section
steps, parabolic steps through the best three points when they are acceptable), as Forsythe, Malcolm and Moler's
``fmin`` (*Computer Methods for Mathematical Computations*, 1977) and SciPy's ``_minimize_scalar_bounded``
(``scipy/optimize/_optimize.py``, SciPy 1.17.1, BSD-3-Clause) write it. :func:`minimize_bounded` follows that
function statement for statement (its ``np.abs``/``np.sign``/``np.maximum`` on doubles are ``abs``, a sign and
``max`` here: the same doubles), so it evaluates ``f`` at the same points and returns the same ``x``
(``tests/unit/test_numerics_bounded_min.py``, hypothesis against SciPy). What SciPy reports as a status is a field
here: ``converged`` is False when ``max_evaluations`` ran out (SciPy's status 1) or a NaN was met (status 2); the
caller decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["BoundedMinimum", "minimize_bounded"]

_SQRT_EPS = math.sqrt(2.2e-16)
"""SciPy's ``sqrt_eps`` (its literal 2.2e-16, not the exact machine epsilon)."""
_GOLDEN = 0.5 * (3.0 - math.sqrt(5.0))
"""The golden-section fraction (3 − √5)/2."""


class BoundedMinimum(NamedTuple):
    """The minimiser's answer: the point, ``f`` there, how many evaluations, and whether it converged."""

    x: float
    fun: float
    evaluations: int
    converged: bool


def _sign(value: float) -> float:
    """``np.sign(value) + (value == 0)``: +1 for value ≥ 0, −1 below, NaN for NaN (SciPy's ``si``)."""
    if math.isnan(value):
        return math.nan
    return -1.0 if value < 0 else 1.0


def _maximum(a: float, b: float) -> float:
    """``np.maximum(a, b)`` of two doubles: NaN if either is."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a if a >= b else b


class _State:
    """Brent's bracket ``[a, b]``, best point ``xf`` and the two before it (``nfc``, ``fulc``), with their values."""

    __slots__ = ("a", "b", "ffulc", "fnfc", "fulc", "fx", "nfc", "xf")

    def __init__(self, a: float, b: float, x: float, fx: float) -> None:
        self.a, self.b = a, b
        self.fulc = self.nfc = self.xf = x
        self.ffulc = self.fnfc = self.fx = fx

    def take(self, x: float, fu: float) -> None:
        """Narrow the bracket with the new point ``x`` (value ``fu``) and shift the best three."""
        if fu <= self.fx:
            if x >= self.xf:
                self.a = self.xf
            else:
                self.b = self.xf
            self.fulc, self.ffulc = self.nfc, self.fnfc
            self.nfc, self.fnfc = self.xf, self.fx
            self.xf, self.fx = x, fu
            return
        if x < self.xf:
            self.a = x
        else:
            self.b = x
        if fu <= self.fnfc or self.nfc == self.xf:
            self.fulc, self.ffulc = self.nfc, self.fnfc
            self.nfc, self.fnfc = x, fu
        elif fu <= self.ffulc or self.fulc == self.xf or self.fulc == self.nfc:
            self.fulc, self.ffulc = x, fu


def _parabolic_step(s: _State, e: float, tol1: float, tol2: float) -> float | None:
    """The step of the parabola through the best three points (``e``: the step before the last), or None where it is
    not acceptable and a golden-section step is taken instead."""
    r = (s.xf - s.nfc) * (s.fx - s.ffulc)
    q = (s.xf - s.fulc) * (s.fx - s.fnfc)
    p = (s.xf - s.fulc) * q - (s.xf - s.nfc) * r
    q = 2.0 * (q - r)
    if q > 0.0:
        p = -p
    q = abs(q)
    if not (abs(p) < abs(0.5 * q * e) and p > q * (s.a - s.xf) and p < q * (s.b - s.xf)):
        return None
    rat = (p + 0.0) / q
    x = s.xf + rat
    if (x - s.a) < tol2 or (s.b - x) < tol2:  # too near an end: a minimal step towards the middle
        return tol1 * _sign(0.5 * (s.a + s.b) - s.xf)
    return rat


def minimize_bounded(
    f: Callable[[float], float], lo: float, hi: float, xatol: float = 1e-5, max_evaluations: int = 500
) -> BoundedMinimum:
    """A local minimum of ``f`` on ``[lo, hi]`` to within ``xatol`` (module docstring); ``lo ≤ hi``, both finite."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError("Optimization bounds must be finite scalars.")
    if lo > hi:
        raise ValueError("The lower bound exceeds the upper bound.")
    x = lo + _GOLDEN * (hi - lo)
    s = _State(lo, hi, x, f(x))
    evaluations, fu, converged = 1, math.inf, True
    rat = e = 0.0
    xm = 0.5 * (s.a + s.b)
    tol1 = _SQRT_EPS * abs(s.xf) + xatol / 3.0
    tol2 = 2.0 * tol1
    while abs(s.xf - xm) > (tol2 - 0.5 * (s.b - s.a)):
        step = _parabolic_step(s, e, tol1, tol2) if abs(e) > tol1 else None
        if step is not None:
            e, rat = rat, step
        else:  # golden section into the larger part of the bracket
            e = (s.a - s.xf) if s.xf >= xm else (s.b - s.xf)
            rat = _GOLDEN * e
        x = s.xf + _sign(rat) * _maximum(abs(rat), tol1)
        fu = f(x)
        evaluations += 1
        s.take(x, fu)
        xm = 0.5 * (s.a + s.b)
        tol1 = _SQRT_EPS * abs(s.xf) + xatol / 3.0
        tol2 = 2.0 * tol1
        if evaluations >= max_evaluations:
            converged = False
            break
    if math.isnan(s.xf) or math.isnan(s.fx) or math.isnan(fu):
        converged = False
    return BoundedMinimum(s.xf, s.fx, evaluations, converged)
