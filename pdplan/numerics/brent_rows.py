"""Brent's root finder on many independent brackets at once: row i's iterates, and the root returned, are the doubles
:func:`pdplan.numerics.roots.brentq` gives on row i alone.

Each row carries the scalar solver's state (``x_pre``, ``x_cur``, ``x_blk``, their values, the last two steps) as
one entry of numpy arrays; every step of :func:`pdplan.numerics.roots.brent_steps` is written as the same elementwise
operations in the same order (IEEE double ``+ − × ÷``, ``abs`` and comparisons are the same operations on numpy
float64 as on Python floats), with ``numpy.where`` choosing the branch each row takes. A row leaves the batch at the
test where the scalar loop returns; the rows still running are evaluated together, one call of ``f`` per step, so a
caller whose function evaluates many rows for about the price of one (a mixture cdf over rates) pays one batched
evaluation per step instead of one per row and step.

The scalar solver's errors are kept: a NaN value raises :class:`ValueError`, a bracket whose ends share a sign
raises :class:`ValueError` (both naming the first such row), a step that divides by zero raises
:class:`ZeroDivisionError` as Python's float division does, and a row still running after ``maxiter`` steps raises
:class:`RuntimeError`. Rows are checked in order each step, so when two rows would fail the first row's error is
raised (the scalar loop over rows could meet a later step's error of an earlier row first).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from pdplan.numerics.roots import MAXITER_DEFAULT, RTOL_MIN, XTOL_DEFAULT, brent_steps, check_tolerances

FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.intp]
RowsFunction = Callable[[FloatArray, IndexArray], FloatArray]
"""``f(x, rows)``: row ``rows[k]``'s function at ``x[k]`` for every k (the rows still running, in increasing order)."""


def _values(f: RowsFunction, x: FloatArray, rows: IndexArray) -> FloatArray:
    """``f`` at the rows still running as float64; a NaN is an error (the scalar solver's ``_value``)."""
    fx = np.asarray(f(x, rows), dtype=np.float64)
    bad = np.flatnonzero(np.isnan(fx))
    if bad.size:
        raise ValueError(f"The function value at x={float(x[bad[0]])} is NaN; solver cannot continue.")
    return fx


def brentq_rows(
    f: RowsFunction,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    xtol: float = XTOL_DEFAULT,
    rtol: float = RTOL_MIN,
    maxiter: int = MAXITER_DEFAULT,
    *,
    f_a: npt.ArrayLike | None = None,
    f_b: npt.ArrayLike | None = None,
) -> FloatArray:
    """A root of each row's function in its bracket ``[a[i], b[i]]`` (module docstring), within
    ``xtol + rtol·|root|``; ``f_a``/``f_b``: known values at the ends, evaluated here (one batched call each) when
    not given. Returns the roots, shape ``[N]``."""
    check_tolerances(xtol, rtol, maxiter)
    x_pre = np.array(a, dtype=np.float64, ndmin=1)
    x_cur = np.array(b, dtype=np.float64, ndmin=1)
    everyone = np.arange(x_pre.size)
    f_pre = _values(f, x_pre, everyone) if f_a is None else np.array(f_a, dtype=np.float64, ndmin=1)
    f_cur = _values(f, x_cur, everyone) if f_b is None else np.array(f_b, dtype=np.float64, ndmin=1)
    if np.any(f_pre * f_cur > 0):
        raise ValueError("f(a) and f(b) must have different signs")
    roots = np.where(f_pre == 0, x_pre, x_cur)
    run = np.flatnonzero((f_pre != 0) & (f_cur != 0))
    if run.size:
        _iterate(f, _State.start(x_pre[run], x_cur[run], f_pre[run], f_cur[run], run), roots, xtol, rtol, maxiter)
    return roots


class _State:
    """The scalar loop's variables, one entry per row still running (``rows``: their indices)."""

    __slots__ = ("f_blk", "f_cur", "f_pre", "rows", "s_cur", "s_pre", "x_blk", "x_cur", "x_pre")

    def __init__(self, arrays: list[FloatArray], rows: IndexArray) -> None:
        self.x_pre, self.x_cur, self.x_blk, self.f_pre, self.f_cur, self.f_blk, self.s_pre, self.s_cur = arrays
        self.rows = rows

    @classmethod
    def start(
        cls, x_pre: FloatArray, x_cur: FloatArray, f_pre: FloatArray, f_cur: FloatArray, rows: IndexArray
    ) -> _State:
        zero = np.zeros_like(x_pre)
        return cls([x_pre, x_cur, zero, f_pre, f_cur, zero.copy(), zero.copy(), zero.copy()], rows)

    def values(self) -> list[FloatArray]:
        """``[x_pre, x_cur, x_blk, f_pre, f_cur, f_blk, s_pre, s_cur]``."""
        return [self.x_pre, self.x_cur, self.x_blk, self.f_pre, self.f_cur, self.f_blk, self.s_pre, self.s_cur]

    def keep(self, mask: npt.NDArray[np.bool_]) -> None:
        """Drop the rows where ``mask`` is False."""
        for name in self.__slots__:
            setattr(self, name, getattr(self, name)[mask])


def _iterate(f: RowsFunction, st: _State, roots: FloatArray, xtol: float, rtol: float, maxiter: int) -> None:
    """Brent's steps on every running row (``roots.brent_steps``'s loop, branch by branch as numpy selections), each
    row's root written to ``roots[row]`` when it converges. A lone row left is handed to the scalar loop with its
    state (:func:`pdplan.numerics.roots.brent_steps`'s ``resume``): the same steps without numpy's cost per call."""
    for steps in range(maxiter):
        if st.rows.size == 1:
            roots[st.rows] = _finish_alone(f, st, xtol, rtol, maxiter, steps)
            return
        bracket = st.f_pre * st.f_cur < 0
        st.x_blk, st.f_blk = np.where(bracket, st.x_pre, st.x_blk), np.where(bracket, st.f_pre, st.f_blk)
        step = np.where(bracket, st.x_cur - st.x_pre, st.s_cur)
        st.s_pre, st.s_cur = np.where(bracket, step, st.s_pre), step
        swap = np.abs(st.f_blk) < np.abs(st.f_cur)
        st.x_pre, st.x_cur, st.x_blk = _exchanged(swap, st.x_pre, st.x_cur, st.x_blk)
        st.f_pre, st.f_cur, st.f_blk = _exchanged(swap, st.f_pre, st.f_cur, st.f_blk)
        delta = (xtol + rtol * np.abs(st.x_cur)) / 2
        s_bis = (st.x_blk - st.x_cur) / 2
        done = (st.f_cur == 0) | (np.abs(s_bis) < delta)
        if np.any(done):
            roots[st.rows[done]] = st.x_cur[done]
            live = ~done
            st.keep(live)
            delta, s_bis = delta[live], s_bis[live]
            if st.rows.size == 0:
                return
        _step(st, delta, s_bis)
        st.f_cur = _values(f, st.x_cur, st.rows)
    raise RuntimeError(f"Failed to converge after {maxiter} iterations, value is {float(st.x_cur[0]):f}")


def _finish_alone(f: RowsFunction, st: _State, xtol: float, rtol: float, maxiter: int, steps: int) -> float:
    """The one running row's root by the scalar loop, from its state after ``steps`` steps."""
    row = st.rows

    def one(x: float) -> float:
        return float(f(np.array([x]), row)[0])

    x_pre, x_cur, x_blk, f_pre, f_cur, f_blk, s_pre, s_cur = (float(v[0]) for v in st.values())
    resume = (x_blk, f_blk, s_pre, s_cur, steps)
    return brent_steps(one, x_pre, x_cur, f_pre, f_cur, xtol, rtol, maxiter, resume=resume)


def _exchanged(
    swap: npt.NDArray[np.bool_], pre: FloatArray, cur: FloatArray, blk: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``pre, cur, blk = cur, blk, cur`` where ``swap`` (the scalar loop's exchange when ``|f_blk| < |f_cur|``)."""
    return np.where(swap, cur, pre), np.where(swap, blk, cur), np.where(swap, cur, blk)


def _step(st: _State, delta: FloatArray, s_bis: FloatArray) -> None:
    """One step of the scalar loop after its convergence test: the interpolation (where tried and short enough) or
    bisection, then ``x_cur`` moved by at least ``delta``."""
    tried = (np.abs(st.s_pre) > delta) & (np.abs(st.f_cur) < np.abs(st.f_pre))
    s_try = _interpolated(st, tried)
    limit = 3 * np.abs(s_bis) - delta
    good = tried & (2 * np.abs(s_try) < np.where(np.abs(st.s_pre) < limit, np.abs(st.s_pre), limit))
    st.s_pre, st.s_cur = np.where(good, st.s_cur, s_bis), np.where(good, s_try, s_bis)
    st.x_pre, st.f_pre = st.x_cur, st.f_cur
    st.x_cur = st.x_cur + np.where(np.abs(st.s_cur) > delta, st.s_cur, np.where(s_bis > 0, delta, -delta))


def _interpolated(st: _State, tried: npt.NDArray[np.bool_]) -> FloatArray:
    """The interpolation step of the rows in ``tried`` (0 elsewhere): linear where ``x_pre == x_blk``, inverse
    quadratic otherwise, each evaluated on its own rows only; a zero divisor raises as Python's float division."""
    s_try = np.zeros_like(st.x_cur)
    lin = np.flatnonzero(tried & (st.x_pre == st.x_blk))
    quad = np.flatnonzero(tried & (st.x_pre != st.x_blk))
    if lin.size:
        f_cur, f_pre, x_cur, x_pre = st.f_cur[lin], st.f_pre[lin], st.x_cur[lin], st.x_pre[lin]
        s_try[lin] = -f_cur * (x_cur - x_pre) / _divisor(f_cur - f_pre)
    if quad.size:
        f_cur, f_pre, f_blk = st.f_cur[quad], st.f_pre[quad], st.f_blk[quad]
        x_cur, x_pre, x_blk = st.x_cur[quad], st.x_pre[quad], st.x_blk[quad]
        d_pre = (f_pre - f_cur) / _divisor(x_pre - x_cur)
        d_blk = (f_blk - f_cur) / _divisor(x_blk - x_cur)
        s_try[quad] = -f_cur * (f_blk * d_blk - f_pre * d_pre) / _divisor(d_blk * d_pre * (f_blk - f_pre))
    return s_try


def _divisor(d: FloatArray) -> FloatArray:
    """``d`` unchanged; ZeroDivisionError if any entry is 0 (Python's float division raises there, numpy's not)."""
    if np.any(d == 0):
        raise ZeroDivisionError("float division by zero")
    return d
