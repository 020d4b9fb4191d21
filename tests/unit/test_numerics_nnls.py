"""pdplan.numerics.nnls solves the same problems as scipy.optimize.nnls: same support, same values to rounding."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from pdplan.numerics.nnls import nnls


def _decode_like(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The decode-step fit of pdplan.serving.roles: columns (1, B, B·c) over a (B, c) grid, each row divided by a
    step time, columns scaled to a maximum of one, solved against ones."""
    bb, cc = (g.ravel() for g in np.meshgrid(np.unique(np.round(np.geomspace(1, 256, 12))), [0.25, 0.5, 1, 2, 4]))
    cc = cc * rng.uniform(500, 4000)
    tau = rng.uniform(5e-3, 2e-2) + rng.uniform(1e-5, 1e-4) * bb + rng.uniform(1e-9, 1e-8) * bb * cc
    tau *= 1.0 + 0.05 * rng.standard_normal(tau.size)
    design = np.stack([np.ones_like(bb), bb, bb * cc], axis=1) / tau[:, None]
    return design / np.abs(design).max(axis=0), np.ones_like(bb)


@pytest.mark.parametrize("seed", range(40))
def test_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    if seed % 2:
        a, b = _decode_like(rng)
    else:  # a random problem whose solution has some coefficients at the bound
        a = rng.standard_normal((30, 4))
        b = a @ np.array([1.0, -0.5, 0.0, 2.0]) + 0.1 * rng.standard_normal(30)
    mine, mine_norm = nnls(a, b)
    theirs, theirs_norm = optimize.nnls(a, b)
    np.testing.assert_array_equal(mine > 0, theirs > 0)
    np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)
    assert mine_norm == pytest.approx(theirs_norm, rel=1e-12)


def test_all_negative_gives_zero_and_wide_problems_are_refused() -> None:
    x, norm = nnls(np.eye(3), -np.ones(3))
    np.testing.assert_array_equal(x, np.zeros(3))
    assert norm == pytest.approx(np.sqrt(3.0))
    with pytest.raises(ValueError, match="at most 12 columns"):
        nnls(np.ones((20, 13)), np.ones(20))
