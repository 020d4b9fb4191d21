"""pdplan.numerics.pchip: SciPy's PCHIP interpolant, the same doubles as
``scipy.interpolate.PchipInterpolator(x, y, extrapolate=False)``."""

from __future__ import annotations

import platform

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.interpolate import PchipInterpolator

from pdplan.numerics.pchip import Pchip

BIT_FOR_BIT = platform.machine().lower() in {"x86_64", "amd64"}
"""SciPy's x86-64 wheels evaluate without fused multiply-adds (module docstring of pdplan.numerics.pchip)."""


def test_hand_worked() -> None:
    """Through (0, 0), (1, 1), (2, 2) PCHIP is the line: 0.5 → 0.5, 1.5 → 1.5. Two points: the chord. Monotone data
    stay monotone: (0, 0), (1, 0), (2, 1) never dips below 0 on [0, 1]."""
    assert Pchip([0.0, 1.0, 2.0], [0.0, 1.0, 2.0])(np.array([0.5, 1.5])).tolist() == [0.5, 1.5]
    assert Pchip([1.0, 3.0], [2.0, 6.0])(np.array([2.0])).tolist() == [4.0]
    flat_then_up = Pchip([0.0, 1.0, 2.0], [0.0, 0.0, 1.0])(np.linspace(0.0, 1.0, 11))
    assert np.all(flat_then_up == 0.0)


def test_rejects_bad_data_and_points_outside() -> None:
    with pytest.raises(ValueError, match="increasing"):
        Pchip([0.0, 0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=">= 2"):
        Pchip([0.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        Pchip([0.0, 1.0], [1.0, np.nan])
    with pytest.raises(ValueError, match="outside"):
        Pchip([0.0, 1.0], [1.0, 2.0])(np.array([1.5]))


@st.composite
def data(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(2, 40))
    steps = draw(st.lists(st.floats(1e-3, 1e4), min_size=n - 1, max_size=n - 1))
    x = np.cumsum([draw(st.floats(1.0, 1e3)), *steps])
    if draw(st.booleans()):  # monotone, as a prefill profile is
        y = np.cumsum(draw(st.lists(st.floats(0.0, 10.0), min_size=n, max_size=n)))
    else:
        y = np.array(draw(st.lists(st.floats(-1e3, 1e3), min_size=n, max_size=n)))
    u = draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30))
    points = np.concatenate([x, x[0] + np.array(u) * (x[-1] - x[0])])  # the knots themselves and points between
    return x, y, np.clip(points, x[0], x[-1])


@settings(max_examples=300, deadline=None)
@given(data())
def test_same_doubles_as_scipy(case: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    x, y, points = case
    ours = Pchip(x, y)(points)
    theirs = PchipInterpolator(x, y, extrapolate=False)(points)
    if BIT_FOR_BIT:
        assert ours.tobytes() == theirs.tobytes()
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-15, atol=1e-15 * float(np.abs(y).max()))
