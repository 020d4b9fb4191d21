"""Anderson mixing of the tandem link chain (pdplan.queueing.chain_accel.anderson) on a Markov operator whose fixed
point is known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing import chain_accel

# A birth–death chain on 16 states, up with probability 0.45, down with 0.55 (reflected at both ends): stationary
# π_i ∝ (0.45/0.55)^i (detailed balance); second eigenvalue 2·√(0.45·0.55)·cos(π/16) ≈ 0.976: from the top, 922
# plain steps to an L1 change of 1e-10.
STATES = 16
UP, DOWN = 0.45, 0.55
FIXED = (UP / DOWN) ** np.arange(STATES)
FIXED /= FIXED.sum()


def _step(g: np.ndarray) -> np.ndarray:
    """One step of the birth–death chain on laws ``[R, 1, 1, STATES]``."""
    out = np.zeros_like(g)
    out[..., 1:] += UP * g[..., :-1]
    out[..., -1] += UP * g[..., -1]
    out[..., :-1] += DOWN * g[..., 1:]
    out[..., 0] += DOWN * g[..., 0]
    return out


def test_detailed_balance_is_the_fixed_point() -> None:
    law = FIXED.reshape(1, 1, 1, STATES)
    np.testing.assert_allclose(_step(law), law, atol=1e-15)


def test_anderson_lands_on_the_fixed_point_in_far_fewer_steps() -> None:
    """From a point mass at the top: 300 plain steps leave an L1 change above 1e-10 (922 are needed), Anderson mixing
    gets there within 100 (measured 51) and lands within 1e-8 (L1) of π (measured 3e-10)."""
    start = np.zeros((1, 1, 1, STATES))
    start[..., -1] = 1.0
    plain = chain_accel.power(_step, start, 1e-10, 300)
    assert float(plain.change.max()) > 1e-10
    got = chain_accel.anderson(_step, start, 1e-10, 100)
    assert got is not None
    assert float(np.abs(got[0, 0, 0] - FIXED).sum()) < 1e-8
    assert float(got.min()) >= 0.0


def test_fixed_point_does_not_depend_on_the_start() -> None:
    """Three starts (the top, the bottom, uniform), one per rate of one call: each rate stops on its own, and the
    laws agree with π and with each other within 1e-8."""
    starts = np.zeros((3, 1, 1, STATES))
    starts[0, ..., -1] = 1.0
    starts[1, ..., 0] = 1.0
    starts[2] = 1.0 / STATES
    got = chain_accel.anderson(_step, starts, 1e-10, 300)
    assert got is not None
    for r in range(3):
        assert float(np.abs(got[r, 0, 0] - FIXED).sum()) < 1e-8


@pytest.mark.parametrize("budget", [0, 3])
def test_anderson_short_of_its_budget_says_so(budget: int) -> None:
    start = np.zeros((1, 1, 1, STATES))
    start[..., -1] = 1.0
    assert chain_accel.anderson(_step, start, 1e-10, budget) is None


def test_a_mixture_clipped_to_nothing_falls_back_to_the_plain_step() -> None:
    """The least squares gives γ = 1 (the one difference equals the residual), so ``image − d_g`` is negative
    everywhere, clips to zero and has no mass to rescale: the plain step ``image`` is taken, not 0/0."""
    from pdplan.queueing.chain_accel import _mixed

    image = np.array([[0.5, 0.5]])
    resid = np.array([[0.2, -0.1]])
    nxt = _mixed(image, resid, resid[:, None, :].copy(), np.array([[[1.0, 1.0]]]))
    assert np.array_equal(nxt, image)


# Nearly critical: 400 states, up 0.495, down 0.505. Stationary π_i ∝ (0.495/0.505)^i (detailed balance: a decay of
# 0.98 per state, π_399/π_0 = 3e-4); second eigenvalue 2·√(0.495·0.505)·cos(π/400) = 0.99992 (by hand: √0.249975 =
# 0.499975, cos(π/400) = 1 − 3.08e-5), so an L1 change c leaves up to ~c/(1 − 0.99992) = 1.25e4·c to the fixed point.
NEAR_STATES = 400
NEAR_UP, NEAR_DOWN = 0.495, 0.505
NEAR_FIXED = (NEAR_UP / NEAR_DOWN) ** np.arange(NEAR_STATES)
NEAR_FIXED /= NEAR_FIXED.sum()


def _near_step(g: np.ndarray) -> np.ndarray:
    """One step of the nearly critical chain on ``[R, 1, 1, NEAR_STATES]`` (linear: on signed vectors too)."""
    out = np.zeros_like(g)
    out[..., 1:] += NEAR_UP * g[..., :-1]
    out[..., -1] += NEAR_UP * g[..., -1]
    out[..., :-1] += NEAR_DOWN * g[..., 1:]
    out[..., 0] += NEAR_DOWN * g[..., 0]
    return out


def test_krylov_settles_a_nearly_critical_chain() -> None:
    """From a point mass at the bottom: 2,000 plain steps leave an L1 change above 1e-9 and 300 Anderson steps do
    too; GMRES reaches it within 3,000 steps of the operator and lands within 1.25e4·1e-9 ≈ 1.3e-5 of π, the closed
    form (bound 2e-5; measured 1,516 steps and 8.6e-6), with a law (≥ 0, mass 1)."""
    start = np.zeros((1, 1, 1, NEAR_STATES))
    start[..., 0] = 1.0
    law = NEAR_FIXED.reshape(start.shape)
    np.testing.assert_allclose(_near_step(law), law, atol=1e-15)
    assert float(chain_accel.power(_near_step, start, 1e-9, 2000).change.max()) > 1e-9
    assert chain_accel.anderson(_near_step, start, 1e-9, 300) is None
    calls: list[int] = []

    def counted(g: np.ndarray) -> np.ndarray:
        calls.append(1)
        return _near_step(g)

    got = chain_accel.krylov(counted, counted, start, 1e-9, 3000)
    assert got is not None
    assert len(calls) <= 3000
    assert float(np.abs(got[0, 0, 0] - NEAR_FIXED).sum()) < 2e-5
    assert float(got.min()) >= 0.0
    assert float(got.sum()) == pytest.approx(1.0, abs=1e-12)


def test_krylov_short_of_its_budget_says_so() -> None:
    start = np.zeros((1, 1, 1, NEAR_STATES))
    start[..., 0] = 1.0
    assert chain_accel.krylov(_near_step, _near_step, start, 1e-11, 50) is None


def test_anderson_run_hands_on_a_law_where_it_does_not_settle() -> None:
    """Short of its budget, Anderson mixing returns its last mixture (a law: ≥ 0, mass 1) for GMRES to go on from."""
    start = np.zeros((1, 1, 1, NEAR_STATES))
    start[..., 0] = 1.0
    law, settled = chain_accel.anderson_run(_near_step, start, 1e-11, 20)
    assert not settled
    assert float(law.min()) >= 0.0
    assert float(law.sum()) == pytest.approx(1.0, abs=1e-12)
