"""The optimiser's lookup tables (pdplan.search.tables) worked by hand: the Erlang C grid, row interpolation."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing import erlang_c
from pdplan.search.tables import erlang_c_grid, interp_rows


def test_erlang_c_grid_matches_the_scalar_recursion() -> None:
    servers = np.array([1.0, 2.0, 4.0, 8.0])
    load = np.array([0.5, 1.0, 3.0, 6.4])
    expected = [float(erlang_c(int(c), a)[0]) for c, a in zip(servers, load, strict=True)]
    assert erlang_c_grid(servers, load).tolist() == pytest.approx(expected, rel=1e-12)
    assert float(erlang_c_grid(np.array([2.0]), np.array([1.0]))[0]) == pytest.approx(1 / 3)


def test_interp_rows_is_linear_between_grid_rows() -> None:
    table = np.array([[0.0, 10.0], [1.0, 20.0], [3.0, 40.0]])
    grid = np.array([0.0, 1.0, 2.0])
    got = interp_rows(table, grid, np.array([0.5, 1.5, 5.0]))
    assert got.tolist() == [[0.5, 15.0], [2.0, 30.0], [3.0, 40.0]]
