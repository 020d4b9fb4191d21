"""pdplan.numerics.brent_rows.brentq_rows is pdplan.numerics.roots.brentq row by row, to the last bit: same roots, same
points evaluated in the same order, same errors; the property tests draw random monotone cdfs and brackets."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.numerics.brent_rows import brentq_rows
from pdplan.numerics.roots import brentq

Scalar = Callable[[float], float]
FAMILIES: list[Callable[[float], Scalar]] = [
    lambda c: lambda x: x**3 - 2.0 * x - c,
    lambda c: lambda x: math.cos(x) - c * x,
    lambda c: lambda x: 1.0 / (1.0 + math.exp(-x)) - (0.5 + 0.49 * math.tanh(c - 2.0)),
    lambda c: lambda x: abs(x - c / 10.0) ** 0.5 * math.copysign(1.0, x - c / 10.0),
    lambda c: lambda x: math.exp(4.0 * x) - 10.0 * c,
    lambda c: lambda x: x - c * 1e-20,
]
TOLERANCES = [(1e-12, 1e-10), (2e-12, 8.881784197001252e-16), (1e-15, 1e-12), (1e-6, 1e-6)]
"""pdplan's mixture quantiles' (xtol, rtol), SciPy's defaults and others pdplan's callers pass."""


def _recording(fs: list[Scalar]) -> tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], list[list[float]]]:
    """A rows function that evaluates each row's scalar function and records the points per row."""
    seen: list[list[float]] = [[] for _ in fs]

    def f(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = []
        for xi, r in zip(x.tolist(), rows.tolist(), strict=True):
            seen[r].append(xi)
            out.append(fs[r](xi))
        return np.array(out)

    return f, seen


def _assert_rowwise_equal(fs: list[Scalar], a: list[float], b: list[float], xtol: float, rtol: float) -> None:
    f, seen = _recording(fs)
    roots = brentq_rows(f, a, b, xtol, rtol)
    for i, g in enumerate(fs):
        points: list[float] = []
        ref = brentq(lambda x, g=g, points=points: points.append(x) or g(x), a[i], b[i], xtol=xtol, rtol=rtol)
        assert roots[i] == ref  # bit for bit
        assert seen[i] == points  # the same points, in the same order


@pytest.mark.parametrize(("xtol", "rtol"), TOLERANCES)
def test_each_row_is_the_scalar_solver(xtol: float, rtol: float) -> None:
    rng = np.random.default_rng(7)
    for _ in range(40):
        fs, a, b = [], [], []
        for _ in range(int(rng.integers(1, 10))):
            g = FAMILIES[int(rng.integers(len(FAMILIES)))](float(rng.uniform(0.1, 5.0)))
            lo, hi = (-3.0, 6.0) if g(-3.0) * g(6.0) <= 0 else (-10.0, 10.0)
            if g(lo) * g(hi) <= 0:
                fs.append(g)
                a.append(lo)
                b.append(hi)
        _assert_rowwise_equal(fs, a, b, xtol, rtol)


def test_roots_at_the_ends_and_known_end_values() -> None:
    fs: list[Scalar] = [lambda x: x, lambda x: x - 1.0, lambda x: math.cos(x) - x]
    f, seen = _recording(fs)
    ends = ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    roots = brentq_rows(f, *ends, f_a=[fs[i](0.0) for i in range(3)], f_b=[fs[i](1.0) for i in range(3)])
    assert roots.tolist() == [0.0, 1.0, brentq(fs[2], 0.0, 1.0)]
    assert seen[0] == seen[1] == []  # roots at an end: nothing evaluated
    assert 0.0 not in seen[2]
    assert 1.0 not in seen[2]


def test_errors_are_the_scalar_solver_errors() -> None:
    with pytest.raises(ValueError, match="different signs"):
        brentq_rows(lambda x, rows: x * x + 1.0, [-1.0, -1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="NaN"):
        brentq_rows(lambda x, rows: np.where(x > 0.2, math.nan, x - 0.5), [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(RuntimeError, match="Failed to converge after 3 iterations"):
        brentq_rows(lambda x, rows: x**3 - 2.0 * x - 5.0, [2.0, 2.0], [3.0, 3.0], maxiter=3)
    with pytest.raises(RuntimeError, match="Failed to converge after 3 iterations"):
        brentq_rows(lambda x, rows: x**3 - 2.0 * x - 5.0, [2.0], [3.0], maxiter=3)  # a lone row: the scalar loop
    for kwargs, message in (({"xtol": 0.0}, "xtol too small"), ({"rtol": 1e-16}, "rtol too small")):
        with pytest.raises(ValueError, match=message):
            brentq_rows(lambda x, rows: x, [-1.0], [1.0], **kwargs)  # type: ignore[arg-type]


@st.composite
def _lattice_cdfs(draw: st.DrawFn) -> tuple[list[np.ndarray], list[float], float]:
    """Rows of piecewise-linear non-decreasing cdfs on [0, 1] (as the wait lattices' interpolated cdfs), and a
    level each must cross."""
    n_rows = draw(st.integers(1, 6))
    q = draw(st.floats(0.05, 0.995))
    cdfs, steps = [], []
    for _ in range(n_rows):
        incr = draw(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=12))
        grid = np.concatenate(([draw(st.floats(0.0, 0.04))], np.asarray(incr), [0.05]))  # total > 0
        grid = np.cumsum(grid)
        cdfs.append(grid / grid[-1])
        steps.append(draw(st.floats(1e-4, 10.0)))
    return cdfs, steps, q


@settings(deadline=None, max_examples=60)
@given(case=_lattice_cdfs(), tol=st.sampled_from(TOLERANCES))
def test_random_lattice_cdfs_same_as_scalar(case: tuple[list[np.ndarray], list[float], float], tol: tuple) -> None:
    """Kinked monotone functions (where Brent's interpolation is often rejected): row i equals brentq on row i, and
    the root is within the tolerance of a point where the cdf crosses q."""
    cdfs, steps, q = case
    fs: list[Scalar] = []
    for cdf, h in zip(cdfs, steps, strict=True):
        grid = np.arange(cdf.size) * h
        fs.append(lambda t, grid=grid, cdf=cdf: float(np.interp(t, grid, cdf)) - q)
    a = [0.0] * len(fs)
    b = [(cdf.size - 1) * h for cdf, h in zip(cdfs, steps, strict=True)]
    keep = [i for i in range(len(fs)) if fs[i](a[i]) < 0.0 <= fs[i](b[i])]
    fs, a, b = [fs[i] for i in keep], [a[i] for i in keep], [b[i] for i in keep]
    if not fs:
        return
    _assert_rowwise_equal(fs, a, b, *tol)
    roots = brentq_rows(_recording(fs)[0], a, b, *tol)
    for g, root in zip(fs, roots.tolist(), strict=True):
        width = tol[0] + tol[1] * abs(root)
        assert g(root - width) <= 0.0 <= g(root + width) or g(root) == 0.0
