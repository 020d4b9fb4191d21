"""pdplan.numerics.bounded_min: SciPy's bounded Brent minimiser, the same points and answer as
``scipy.optimize.minimize_scalar(method="bounded")``."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from pdplan.numerics.bounded_min import minimize_bounded


def test_hand_worked_parabola() -> None:
    """(x − 2)² on [0, 5]: the minimum at 2 (within xatol), f there ≈ 0; converged."""
    out = minimize_bounded(lambda x: (x - 2.0) ** 2, 0.0, 5.0, xatol=1e-8)
    assert out.x == pytest.approx(2.0, abs=1e-7)
    assert out.fun == pytest.approx(0.0, abs=1e-12)
    assert out.converged


def test_minimum_on_the_boundary_and_bad_bounds() -> None:
    """A decreasing f on [0, 1] ends next to 1; inverted or infinite bounds raise; too few evaluations flag it."""
    assert minimize_bounded(lambda x: -x, 0.0, 1.0).x == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ValueError, match="exceeds"):
        minimize_bounded(lambda x: x, 1.0, 0.0)
    with pytest.raises(ValueError, match="finite"):
        minimize_bounded(lambda x: x, 0.0, math.inf)
    assert not minimize_bounded(lambda x: (x - 0.3) ** 2, 0.0, 1.0, xatol=1e-12, max_evaluations=3).converged


def _scipy(f: Callable[[float], float], lo: float, hi: float, xatol: float) -> tuple[list[float], float, int]:
    seen: list[float] = []

    def g(x: float) -> float:
        seen.append(float(x))
        return float(f(float(x)))

    res = optimize.minimize_scalar(g, bounds=(lo, hi), method="bounded", options={"xatol": xatol})
    return seen, float(res.x), int(res.nfev)


shapes = st.sampled_from(
    [
        lambda c: lambda x: (x - c) ** 2,
        lambda c: lambda x: abs(x - c) ** 0.5,
        lambda c: lambda x: math.cos(x * 0.01 + c),
        lambda c: lambda x: -math.exp(-((x - c) ** 2) / 1e4),
        lambda c: lambda x: min(x - c, 0.5 * (c - x)),  # a kink, as a min of bounds is
        lambda c: lambda x: float(np.floor(x / 50.0 - c)),  # flat steps
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    shapes,
    st.floats(-1e3, 1e4),
    st.floats(-1e3, 1e4),
    st.floats(0.0, 2e4),
    st.sampled_from([1e-5, 0.5, 1.0, 10.0]),
)
def test_same_points_as_scipy(
    shape: Callable[[float], Callable[[float], float]], centre: float, lo: float, width: float, xatol: float
) -> None:
    """Every evaluation at SciPy's point, in SciPy's order, and the same answer, to the bit."""
    f = shape(centre)
    hi = lo + width
    seen: list[float] = []

    def g(x: float) -> float:
        seen.append(x)
        return float(f(x))

    ours = minimize_bounded(g, lo, hi, xatol=xatol)
    theirs, x, nfev = _scipy(f, lo, hi, xatol)
    assert seen == theirs
    assert ours.x == x
    assert ours.evaluations == nfev
