"""Brent's root finder, bit for bit what :func:`scipy.optimize.brentq` returns, without importing ``scipy.optimize``
(about 0.3 s of start-up).

The algorithm is Brent's (R. P. Brent, *Algorithms for Minimization Without Derivatives*, Prentice-Hall 1973, ch. 3–4)
in the form SciPy implements in ``scipy/optimize/Zeros/brentq.c`` (Charles Harris; BSD-3-Clause): at the top of each
step the root is bracketed by ``x_cur`` and ``x_blk`` with ``|f(x_cur)| ≤ |f(x_blk)|``; the step tries inverse
quadratic extrapolation through the last three points (linear interpolation when the previous point is the bracket's
far end) and falls back to bisection unless the trial step is shorter than both half the step before last and
``3/2`` of the bisection step less the tolerance; a step shorter than the tolerance ``δ = (xtol + rtol·|x_cur|)/2``
is replaced by ``±δ``. It stops when the half-bracket is below ``δ`` or ``f(x_cur) = 0``. Every operation is done
on Python floats (IEEE doubles) in the C code's order, so the iterates, and the root returned, are the same doubles.

Also as SciPy's Python wrapper (``scipy.optimize._zeros_py.brentq``): ``xtol > 0`` and ``rtol ≥ 4·eps`` are required,
a NaN function value raises :class:`ValueError`, endpoints of one sign raise :class:`ValueError`, and running out of
iterations raises :class:`RuntimeError`.

``f_a`` and ``f_b`` let a caller that already evaluated ``f`` at the bracket's ends pass those values instead of
having them computed again (the two first evaluations of the C code); the iterates are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import SupportsFloat

RTOL_MIN = 4.0 * 2.220446049250313e-16
"""Smallest relative tolerance accepted: four machine epsilons (SciPy's ``_rtol = 4 * np.finfo(float).eps``)."""
XTOL_DEFAULT = 2e-12
"""SciPy's default absolute tolerance (``scipy.optimize.brentq(xtol=2e-12)``)."""
MAXITER_DEFAULT = 100
"""SciPy's default iteration cap (``scipy.optimize.brentq(maxiter=100)``)."""


Function = Callable[..., SupportsFloat]
"""What :func:`brentq` solves: called with one float, returns anything ``float()`` takes (a NumPy scalar too)."""


def _value(f: Function, x: float) -> float:
    """``f(x)`` as a float; NaN is an error (SciPy's ``_wrap_nan_raise``)."""
    fx = float(f(x))
    if math.isnan(fx):
        raise ValueError(f"The function value at x={x} is NaN; solver cannot continue.")
    return fx


def check_tolerances(xtol: float, rtol: float, maxiter: int) -> None:
    """SciPy's argument checks of ``brentq``: ValueError for ``xtol`` ≤ 0, ``rtol`` below :data:`RTOL_MIN` or a
    negative ``maxiter``."""
    if xtol <= 0:
        raise ValueError(f"xtol too small ({xtol:g} <= 0)")
    if rtol < RTOL_MIN:
        raise ValueError(f"rtol too small ({rtol:g} < {RTOL_MIN:g})")
    if maxiter < 0:
        raise ValueError("maxiter should be > 0")


def brentq(
    f: Function,
    a: float,
    b: float,
    xtol: float = XTOL_DEFAULT,
    rtol: float = RTOL_MIN,
    maxiter: int = MAXITER_DEFAULT,
    *,
    f_a: float | None = None,
    f_b: float | None = None,
) -> float:
    """A root of ``f`` in ``[a, b]`` where ``f(a)`` and ``f(b)`` differ in sign (module docstring), within
    ``xtol + rtol·|root|``; ``f_a``/``f_b``: known ``f(a)``/``f(b)``, evaluated here when not given."""
    check_tolerances(xtol, rtol, maxiter)
    x_pre, x_cur = float(a), float(b)
    f_pre = _value(f, x_pre) if f_a is None else float(f_a)
    f_cur = _value(f, x_cur) if f_b is None else float(f_b)
    if f_pre * f_cur > 0:
        raise ValueError("f(a) and f(b) must have different signs")
    if f_pre == 0:
        return x_pre
    if f_cur == 0:
        return x_cur
    return brent_steps(f, x_pre, x_cur, f_pre, f_cur, xtol, rtol, maxiter)


def brent_steps(
    f: Function,
    x_pre: float,
    x_cur: float,
    f_pre: float,
    f_cur: float,
    xtol: float,
    rtol: float,
    maxiter: int,
    *,
    resume: tuple[float, float, float, float, int] = (0.0, 0.0, 0.0, 0.0, 0),
) -> float:
    """Brent's steps from a sign-changing pair (``brentq.c``'s loop, same operations in the same order).

    ``resume``: ``(x_blk, f_blk, s_pre, s_cur, steps)`` of a run already ``steps`` steps in (with ``x_pre`` … its
    state at the top of the next step), for :mod:`pdplan.numerics.brent_rows` to finish a lone row here; the
    default is the C code's start."""
    x_blk, f_blk, s_pre, s_cur, done = resume
    for _ in range(maxiter - done):
        if f_pre * f_cur < 0:
            x_blk, f_blk = x_pre, f_pre
            s_pre = s_cur = x_cur - x_pre
        if abs(f_blk) < abs(f_cur):
            x_pre, x_cur, x_blk = x_cur, x_blk, x_cur
            f_pre, f_cur, f_blk = f_cur, f_blk, f_cur
        delta = (xtol + rtol * abs(x_cur)) / 2
        s_bis = (x_blk - x_cur) / 2
        if f_cur == 0 or abs(s_bis) < delta:
            return x_cur
        if abs(s_pre) > delta and abs(f_cur) < abs(f_pre):
            if x_pre == x_blk:  # linear interpolation
                s_try = -f_cur * (x_cur - x_pre) / (f_cur - f_pre)
            else:  # inverse quadratic extrapolation
                d_pre = (f_pre - f_cur) / (x_pre - x_cur)
                d_blk = (f_blk - f_cur) / (x_blk - x_cur)
                s_try = -f_cur * (f_blk * d_blk - f_pre * d_pre) / (d_blk * d_pre * (f_blk - f_pre))
            limit = 3 * abs(s_bis) - delta
            if 2 * abs(s_try) < (abs(s_pre) if abs(s_pre) < limit else limit):  # C's MIN(a, b): b unless a < b
                s_pre, s_cur = s_cur, s_try  # a good short step
            else:
                s_pre = s_cur = s_bis
        else:
            s_pre = s_cur = s_bis
        x_pre, f_pre = x_cur, f_cur
        x_cur += s_cur if abs(s_cur) > delta else (delta if s_bis > 0 else -delta)
        f_cur = _value(f, x_cur)
    raise RuntimeError(f"Failed to converge after {maxiter} iterations, value is {x_cur:f}")
