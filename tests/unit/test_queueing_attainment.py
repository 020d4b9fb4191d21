"""Attainment and goodput helpers."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing import (
    ShiftedMixture,
    goodput_rate,
    joint_attainment,
    mg1_wait_distribution,
    ttft_attainment,
)


def test_ttft_attainment_matches_mixture_cdf() -> None:
    s, p = np.array([0.1, 0.3]), np.array([0.6, 0.4])
    w = mg1_wait_distribution([1.0, 3.0], s, p)
    a = ttft_attainment(w, s + 0.02, p, 0.5)
    np.testing.assert_allclose(a, ShiftedMixture(w, s + 0.02, p).cdf(0.5))
    # at λ→0-like rate the wait is 0 w.p. 1 − ρ: rate 1 → ρ = .18; SLO below every offset → 0
    assert ttft_attainment(w, s, p, 0.05)[0] == 0.0


def test_joint_attainment_by_hand() -> None:
    # .5·(1·.8) + .5·(.5·1) = .4 + .25 = .65
    assert joint_attainment([[1.0, 0.5]], [[0.8, 1.0]], [0.5, 0.5])[0] == pytest.approx(0.65)
    with pytest.raises(ValueError, match="one column"):
        joint_attainment([[1.0]], [[1.0]], [0.5, 0.5])


def test_goodput_conventions() -> None:
    # A(λ) = 1 − λ/10, target .9 → λ* = 1
    assert goodput_rate(lambda lam: 1 - lam / 10, 0.9, 5.0) == pytest.approx(1.0)
    assert goodput_rate(lambda lam: 1.0, 0.9, 5.0) == 5.0  # never fails below the stability cap
    assert goodput_rate(lambda lam: 0.5, 0.9, 5.0) == 0.0  # fails even at a tiny rate
    with pytest.raises(ValueError, match="target"):
        goodput_rate(lambda lam: 1.0, 1.5, 5.0)


def test_goodput_on_mg1_ttft() -> None:
    s, p = np.array([0.1, 0.3]), np.array([0.6, 0.4])
    cap = 1.0 / float(p @ s)

    def att(lam: float) -> float:
        return float(ttft_attainment(mg1_wait_distribution([lam], s, p), s, p, 0.6)[0])

    lam = goodput_rate(att, 0.9, cap)
    assert 0 < lam < cap
    assert att(lam) == pytest.approx(0.9, abs=1e-6)
