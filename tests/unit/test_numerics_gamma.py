"""pdplan.numerics.gamma against scipy.special."""

from __future__ import annotations

import numpy as np
from scipy import special

from pdplan.numerics.gamma import gammaln, xlogy


def test_gammaln_matches_scipy_absolutely() -> None:
    """Absolute accuracy is what the callers need (gammaln enters exponents); near its zeros at 1 and 2 the value
    itself is tiny and a relative comparison would measure cancellation, not error."""
    x = np.concatenate([np.logspace(-300, 6, 2001), np.linspace(0.5, 3.0, 501), [-0.5, -2.5, -101.3]])
    mine, theirs = gammaln(x), special.gammaln(x)
    assert np.max(np.abs(mine - theirs) / np.maximum(1.0, np.abs(theirs))) < 1e-14
    assert gammaln(0.0) == np.inf
    assert gammaln(-3.0) == np.inf
    assert abs(gammaln(1.0)) < 1e-14
    assert abs(gammaln(2.0)) < 1e-14


def test_xlogy_matches_scipy() -> None:
    x = np.array([0.0, 0.0, 2.0, 3.0, 0.0])
    y = np.array([0.0, 5.0, 3.0, 0.0, np.nan])
    np.testing.assert_array_equal(xlogy(x, y), special.xlogy(x, y))
