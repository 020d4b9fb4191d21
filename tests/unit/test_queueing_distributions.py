"""Latency laws of the queueing core (pdplan.queueing.distributions): the gamma mixture with a discrete delay or a
uniform spread (the step-boundary wait), by hand and against sampling."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing.distributions import GammaMixture, SpreadDelay, UniformPart


def test_gamma_mixture_with_delay_by_hand() -> None:
    # T = 0.01 + D/2, D ∈ {0, 0.04} with probability ½ each (load deterministic at 0.01).
    mix = GammaMixture(
        np.zeros((1, 1)),
        np.full((1, 1), 0.01),
        np.zeros((1, 1)),
        np.ones(1),
        SpreadDelay(np.array([[0.0, 0.04]]), np.array([[0.5, 0.5]]), np.array([2.0])),
    )
    assert float(mix.mean_s[0]) == pytest.approx(0.02)
    assert float(mix.cdf_per_bin(0.015)[0, 0]) == pytest.approx(0.5)
    assert float(mix.cdf_per_bin(0.031)[0, 0]) == pytest.approx(1.0)
    assert float(mix.quantile(0.9)[0]) == pytest.approx(0.03, abs=1e-9)


def test_gamma_mixture_with_uniform_spread_by_hand() -> None:
    # T = 0.005 + 0.01 + U(0, 0.02) with probability 0.7 (else + 0): the step-boundary wait J_d.
    mix = GammaMixture(
        np.full((1, 1), 0.005),
        np.full((1, 1), 0.01),
        np.zeros((1, 1)),
        np.ones(1),
        uniform=UniformPart(np.full((1, 1), 0.02), np.array([0.7])),
    )
    assert float(mix.mean_s[0]) == pytest.approx(0.015 + 0.7 * 0.01)
    assert float(mix.cdf_per_bin(0.0149)[0, 0]) == 0.0
    assert float(mix.cdf_per_bin(0.021)[0, 0]) == pytest.approx(0.3 + 0.7 * 0.3)
    assert float(mix.cdf_per_bin(0.0351)[0, 0]) == pytest.approx(1.0)


def test_gamma_mixture_uniform_spread_matches_sampling() -> None:
    """Gamma load (mean 10 ms, sd 4 ms) plus U(0, 20 ms) w.p. 0.7: the exact convolution
    (Γ(x) − Γ(x − w))/w against 10^6 draws (sampling error of a cdf ≈ 5e−4)."""
    m, sd, w, q = 0.01, 0.004, 0.02, 0.7
    mix = GammaMixture(
        np.full((1, 1), 0.005),
        np.full((1, 1), m),
        np.full((1, 1), sd**2),
        np.ones(1),
        uniform=UniformPart(np.full((1, 1), w), np.array([q])),
    )
    rng = np.random.default_rng(1)
    k, theta = (m / sd) ** 2, sd**2 / m
    draws = 0.005 + rng.gamma(k, theta, 10**6) + (rng.random(10**6) < q) * rng.uniform(0.0, w, 10**6)
    for t in (0.01, 0.015, 0.02, 0.03, 0.04):
        assert float(mix.cdf_per_bin(t)[0, 0]) == pytest.approx(np.mean(draws <= t), abs=2e-3)
