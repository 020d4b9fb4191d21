"""pdplan.numerics.roots.brentq is SciPy's Brent solver to the last bit: same roots, same evaluations, same errors."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import optimize

from pdplan.numerics.roots import brentq

CASES: list[tuple[str, Callable[[float], float], float, float]] = [
    ("cubic", lambda x: x**3 - 2.0 * x - 5.0, 2.0, 3.0),
    ("cosine", lambda x: math.cos(x) - x, 0.0, 1.0),
    ("steep", lambda x: math.exp(20.0 * x) - 1e5, -1.0, 2.0),
    ("flat tail", lambda x: 1.0 / (1.0 + math.exp(-x)) - 0.999999, 0.0, 50.0),
    ("kink", lambda x: abs(x - 0.3) ** 0.5 * math.copysign(1.0, x - 0.3), -1.0, 4.0),
    ("root at a", lambda x: x, 0.0, 1.0),
    ("root at b", lambda x: x - 1.0, 0.0, 1.0),
    ("tiny root", lambda x: x - 1e-20, -1.0, 1.0),
    ("numpy scalar", lambda x: np.float64(np.tanh(x) - 0.5), -3.0, 3.0),
]
TOLERANCES = [(2e-12, 8.881784197001252e-16), (1e-12, 1e-10), (1e-15, 1e-12), (1e-6, 1e-6), (1e-9 * 50.0, 1e-12)]
"""SciPy's defaults and the (xtol, rtol) pairs pdplan's callers pass."""


@pytest.mark.parametrize(("name", "f", "a", "b"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize(("xtol", "rtol"), TOLERANCES)
def test_same_root_and_evaluations_as_scipy(
    name: str, f: Callable[[float], float], a: float, b: float, xtol: float, rtol: float
) -> None:
    mine_x: list[float] = []
    theirs_x: list[float] = []
    mine = brentq(lambda x: mine_x.append(x) or f(x), a, b, xtol=xtol, rtol=rtol)
    theirs = optimize.brentq(lambda x: theirs_x.append(x) or f(x), a, b, xtol=xtol, rtol=rtol)
    assert mine == theirs  # bit for bit
    assert mine_x == theirs_x
    assert type(mine) is float


def test_reversed_bracket_and_iteration_cap_match_scipy() -> None:
    f = CASES[0][1]
    assert brentq(f, 3.0, 2.0) == optimize.brentq(f, 3.0, 2.0)
    with pytest.raises(RuntimeError, match="Failed to converge after 3 iterations"):
        brentq(f, 2.0, 3.0, maxiter=3)
    with pytest.raises(RuntimeError):
        optimize.brentq(f, 2.0, 3.0, maxiter=3)


def test_known_ends_are_not_evaluated_again() -> None:
    f = CASES[1][1]
    seen: list[float] = []
    root = brentq(lambda x: seen.append(x) or f(x), 0.0, 1.0, f_a=f(0.0), f_b=f(1.0))
    assert root == optimize.brentq(f, 0.0, 1.0)
    assert 0.0 not in seen
    assert 1.0 not in seen


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"xtol": 0.0}, ValueError, "xtol too small"),
        ({"rtol": 1e-16}, ValueError, "rtol too small"),
        ({"maxiter": -1}, ValueError, "maxiter"),
    ],
)
def test_bad_tolerances_raise(kwargs: dict[str, float], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        brentq(lambda x: x, -1.0, 1.0, **kwargs)  # type: ignore[arg-type]


def test_same_sign_and_nan_raise_as_in_scipy() -> None:
    with pytest.raises(ValueError, match="different signs"):
        brentq(lambda x: x * x + 1.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        brentq(lambda x: math.nan if x > 0.2 else x - 0.5, 0.0, 1.0)
