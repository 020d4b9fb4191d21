"""pdplan.numerics.gamma against scipy.special (and, where SciPy itself is off, against 50-digit mpmath values)."""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import special

from pdplan.numerics.gamma import gammainc, gammaln, log1pmx, xlogy
from pdplan.numerics.temme_coefficients import D

ROOT = Path(__file__).parents[2]


def _grid() -> tuple[np.ndarray, np.ndarray]:
    """``a`` from 1e-3 to 1e6, ``x/a`` from 1e-3 to 1e3 with a dense band around ``x = a``: every region."""
    a = np.logspace(-3, 6, 181)
    ratio = np.concatenate([np.logspace(-3, 0, 60), 1.0 + np.linspace(-0.5, 0.5, 81)[1:-1], np.logspace(0, 3, 60)])
    aa, rr = np.meshgrid(a, ratio)
    return aa.ravel(), (aa * rr).ravel()


def test_gammainc_matches_scipy_to_1e13_where_scipy_is_exact() -> None:
    """SciPy's Cephes loses 1e-13 to 2.6e-12 for ``a`` above about 80 below the mean (its series prefactor; see the
    next test), so the 1e-13 comparison is over ``a ≤ 50`` and P > 1e-100, the absolute one everywhere."""
    a, x = _grid()
    mine, theirs = gammainc(a, x), special.gammainc(a, x)
    assert np.max(np.abs(mine - theirs)) < 2e-14
    keep = (theirs > 1e-100) & (a <= 50.0)
    assert np.max(np.abs(mine[keep] / theirs[keep] - 1.0)) < 1e-13
    keep = theirs > 1e-100
    assert np.max(np.abs(mine[keep] / theirs[keep] - 1.0)) < 3e-12


@pytest.mark.parametrize(
    ("a", "x", "exact"),
    [  # mpmath 1.4.1, mp.dps = 50: float(mpmath.gammainc(a, 0, x, regularized=True))
        (89.12509381337459, 46.79067425202166, 2.4161380118983303e-08),
        (181.00218608492565, 96.4936679177625, 1.1259812926677871e-14),
        (199.52623149688827, 104.75127153586635, 1.2411968361223926e-16),
        (1412.537544622754, 794.5523688502991, 6.4602330794717675e-87),
        (794328.2347242822, 784399.6317154637, 2.3751786736011686e-29),
    ],
)
def test_gammainc_where_scipy_is_off(a: float, x: float, exact: float) -> None:
    assert gammainc(a, x) == pytest.approx(exact, rel=1e-13)


def test_gammainc_edges_and_shapes_follow_scipy() -> None:
    a = np.array([0.0, 0.0, 1.0, np.inf, 2.0, -1.0, 1.0, np.nan, np.inf, 3.0])
    x = np.array([1.0, 0.0, 0.0, 5.0, np.inf, 1.0, -1.0, 1.0, np.inf, 1e-300])
    np.testing.assert_array_equal(gammainc(a, x), special.gammainc(a, x))
    assert isinstance(gammainc(2.0, 1.0), np.float64)
    assert gammainc(np.ones((2, 1)), np.ones((1, 3))).shape == (2, 3)


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


def test_xlogy_and_log1pmx() -> None:
    x = np.array([0.0, 0.0, 2.0, 3.0, 0.0])
    y = np.array([0.0, 5.0, 3.0, 0.0, np.nan])
    np.testing.assert_array_equal(xlogy(x, y), special.xlogy(x, y))
    t = np.concatenate([np.linspace(-0.99, 5.0, 3001), np.logspace(-12, -1, 200), -np.logspace(-12, -1, 200)])
    exact = np.log1p(t) - t
    far = np.abs(t) > 0.7  # no cancellation there: the plain form is the reference
    np.testing.assert_allclose(log1pmx(t)[far], exact[far], rtol=1e-15)
    near = np.abs(t) < 1e-6  # −t²/2 + t³/3 − t⁴/4
    np.testing.assert_allclose(log1pmx(t)[near], (-(t**2) / 2 + t**3 / 3 - t**4 / 4)[near], rtol=1e-15)


def test_temme_table_is_what_its_generator_writes() -> None:
    """The committed table against the exact generator, on the first rows and terms (a small series is fast)."""
    spec = importlib.util.spec_from_file_location("temme_coefficients_tool", ROOT / "tools" / "temme_coefficients.py")
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules["temme_coefficients_tool"] = tool
    spec.loader.exec_module(tool)
    tool.K, tool.N = 4, 8
    tool.ORDER = tool.N + 2 * tool.K + 4
    rows = tool.coefficients()
    assert rows[0][:3] == [Fraction(-1, 3), Fraction(1, 12), Fraction(-2, 135)]  # DLMF 8.12.10 (Temme's d_0)
    assert rows[1][0] == Fraction(-1, 540)
    for k in range(4):
        assert [float(c) for c in rows[k]] == list(D[k][:8])
