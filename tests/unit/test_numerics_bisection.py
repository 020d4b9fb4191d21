"""pdplan.numerics.bisection: the scalar bisection's double, several levels of its tree per call."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from pdplan.numerics.bisection import bisect_rows
from pdplan.serving.colocated import _root as _scalar  # the scalar loop bisect_rows reproduces, 80 halvings


def _rows(fn: Callable[[float], float], calls: list[int]) -> Callable[[np.ndarray], np.ndarray]:
    def f(x: np.ndarray) -> np.ndarray:
        calls.append(x.size)
        return np.array([fn(float(v)) for v in x])

    return f


FUNCTIONS: list[Callable[[float], float]] = [
    lambda x: x - 7.252290783910404,
    lambda x: x * x - 2.0,  # root √2: the same double the loop stops at
    lambda x: math.inf if x > 10.0 else x / 10.0 - 0.85,  # inf past a pole, as the utilisation is
    lambda x: -1.0,  # never crosses: hi
    lambda x: 1.0,  # crosses at 0: the smallest steps down to 1e9/2^80
    lambda x: math.sin(x) - 0.3,  # not monotone: the same branch choices all the same
]


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("levels", [1, 3, 5, 7])
def test_same_double_as_the_scalar_loop(fn: Callable[[float], float], levels: int) -> None:
    calls: list[int] = []
    assert bisect_rows(_rows(fn, calls), 1e9, levels=levels) == _scalar(fn, 1e9)
    assert max(calls) <= 2**levels - 1


def test_fewer_calls_with_more_levels_and_the_lower_bound() -> None:
    fn = FUNCTIONS[0]
    one: list[int] = []
    five: list[int] = []
    bounded: list[int] = []
    ref = _scalar(fn, 1e9)
    assert bisect_rows(_rows(fn, one), 1e9, levels=1) == ref
    assert bisect_rows(_rows(fn, five), 1e9, levels=5) == ref
    # x − 8 ≤ f: every midpoint above 8 goes down without a call (27 of the 80 steps from 1e9)
    assert bisect_rows(_rows(fn, bounded), 1e9, levels=5, lower=lambda x: x - 8.0) == ref
    # the loop stops once the bracket is two adjacent doubles (about 53 steps below 7.25's scale, not 80)
    assert 1 + 50 <= len(one) <= 1 + 80
    assert len(five) == 1 + math.ceil((len(one) - 1) / 5)
    assert len(bounded) < len(five) - 4


def test_the_lower_bound_is_trusted() -> None:
    # one above f sends steps right where the loop goes left: the caller's bound must hold
    fn = FUNCTIONS[0]
    calls: list[int] = []
    assert bisect_rows(_rows(fn, calls), 1e9, lower=lambda x: x - 1.0) < _scalar(fn, 1e9)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="levels"):
        bisect_rows(_rows(FUNCTIONS[0], []), 1.0, levels=0)
