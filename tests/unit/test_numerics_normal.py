"""pdplan.numerics.normal against scipy.special: Φ, log Φ and Φ⁻¹ to a few ulps over their whole range."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from pdplan.numerics.normal import log_ndtr, ndtr, ndtri


def _rel(mine: np.ndarray, theirs: np.ndarray) -> float:
    return float(np.max(np.abs(mine - theirs) / np.abs(theirs)))


def test_ndtr_matches_scipy() -> None:
    """In the far tail both lose about ``2z²·eps`` (``z = |x|/√2``, the rounding of the argument amplified by erfc's
    slope; 50-digit mpmath at x = −35.19: pdplan 1.7e-13, SciPy 2.3e-13), so the comparison is looser there."""
    x = np.concatenate([np.linspace(-5.0, 9.0, 4001), [-1.0 / np.sqrt(2.0), 1.0 / np.sqrt(2.0), 0.0]])
    assert _rel(ndtr(x), special.ndtr(x)) < 1e-14
    tail = np.linspace(-37.0, -5.0, 2001)  # ndtr(-37) ≈ 5.7e-300: every value is a normal double
    assert _rel(ndtr(tail), special.ndtr(tail)) < 5e-13


def test_log_ndtr_matches_scipy_far_below_underflow() -> None:
    x = np.concatenate([-np.logspace(3, -3, 600), np.linspace(-40.0, 40.0, 4001)])
    theirs = special.log_ndtr(x)
    keep = theirs != 0.0
    assert _rel(log_ndtr(x)[keep], theirs[keep]) < 1e-13
    assert np.isfinite(log_ndtr(-1e6))


def test_ndtri_matches_scipy_into_both_tails() -> None:
    p = np.concatenate([np.logspace(-300, -1, 600), np.linspace(0.01, 0.99, 99), 1.0 - np.logspace(-1, -15, 200)])
    assert _rel(ndtri(p)[p != 0.5], special.ndtri(p)[p != 0.5]) < 1e-13
    assert ndtri(0.5) == 0.0


def test_edges_and_shapes_follow_the_ufuncs() -> None:
    assert ndtri(0.0) == -np.inf
    assert ndtri(1.0) == np.inf
    assert np.isnan(ndtri(1.5))
    assert np.isnan(ndtr(np.nan))
    assert np.isnan(log_ndtr(np.nan))
    assert ndtr(np.inf) == 1.0
    assert ndtr(-np.inf) == 0.0
    assert isinstance(ndtr(0.3), np.float64)
    assert ndtr(np.zeros((2, 3))).shape == (2, 3)
    assert ndtri(np.full(4, 0.25)).dtype == np.float64


@pytest.mark.parametrize("x", [-30.0, -5.0, -1.0, -0.5, 0.0, 3.0])
def test_log_ndtr_is_the_log_of_ndtr_where_that_is_finite(x: float) -> None:
    assert log_ndtr(x) == pytest.approx(np.log(ndtr(x)), rel=1e-13)
