"""M/G/1: P-K anchors, DistServe M/D/1 formulas, FFT wait distribution vs Lindley simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from pdplan.queueing import (
    ShiftedMixture,
    distserve_inter_op_ttft_s,
    distserve_intra_op_ttft_s,
    distserve_md1_ttft_s,
    mg1_wait_distribution,
    pipeline_mean_ttft_s,
    pk_wait_moments,
)


def lognormal_prefill(sigma: float, bins: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """docs/queueing.md §6.1 set-up: l ~ LN(mean 1000, σ) clipped at 16384, S = .015 + 6e-5 l + 2.2e-9 l²."""
    mu = np.log(1000.0) - sigma**2 / 2
    q = (np.arange(bins) + 0.5) / bins
    lengths = np.clip(np.exp(mu + sigma * norm.ppf(q)), 1.0, 16384.0)
    return 0.015 + 6e-5 * lengths + 2.2e-9 * lengths**2, np.full(bins, 1.0 / bins)


def lindley_wait(rate: float, service: np.ndarray, seed: int, n: int = 200_000) -> np.ndarray:
    """Vectorised Lindley: W_n = P_n − min(0, min_{j≤n} P_j), P = cumsum(S_{k−1} − A_k)."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, n)
    steps = np.concatenate(([0.0], np.cumsum(service[:-1] - gaps[1:])))
    return steps - np.minimum(0.0, np.minimum.accumulate(steps))


def test_pk_mean_matches_mm1() -> None:
    # Two-point S ∈ {0, 2/μ} w.p. ½ has E[S] = 1/μ, E[S²] = 2/μ² — the exponential's first two
    # moments, so the P-K mean equals M/M/1's ρ/(μ − λ). μ = 2, λ = 1: ρ = .5, E[W] = .5/(2 − 1) = .5
    mean, second = pk_wait_moments([1.0], [0.0, 1.0], [0.5, 0.5])
    assert mean[0] == pytest.approx(0.5)
    # E[W²] = 2·.5² + λE[S³]/(3(1−ρ)) = .5 + 1·(.5·1)/(1.5) = .8333
    assert second[0] == pytest.approx(0.5 + 0.5 / 1.5)


def test_fft_matches_mm1_distribution() -> None:
    # Exponential(μ = 1) discretised into 4000 quantile bins; M/M/1: P(W > t) = ρ e^{−(μ−λ)t}.
    q = (np.arange(4000) + 0.5) / 4000
    s = -np.log1p(-q)
    s = s / s.mean()
    w = mg1_wait_distribution([0.5, 0.8], s, np.full(4000, 1 / 4000))
    t = np.array([0.5, 2.0, 5.0, 10.0])
    exact = 1 - np.array([0.5, 0.8])[:, None] * np.exp(-np.array([0.5, 0.2])[:, None] * t)
    np.testing.assert_allclose(w.cdf(t), exact, atol=4e-3)
    np.testing.assert_allclose(w.atom, [0.5, 0.2])


def test_distserve_formulas_by_hand() -> None:
    # D = 0.1 s, R = 5/s: M/D/1 .1 + 5·.01/(2·.5) = .15; inter-op .1 + .05/(4·1.5) = .108333;
    # intra-op K = 1.5: .1/1.5 + .05/(2·1.5·(1.5 − .5)) = .066667 + .016667 = .083333
    assert distserve_md1_ttft_s(5.0, 0.1)[0] == pytest.approx(0.15)
    assert distserve_inter_op_ttft_s(5.0, 0.1)[0] == pytest.approx(0.1 + 0.05 / 6.0)
    assert distserve_intra_op_ttft_s(5.0, 0.1, 1.5)[0] == pytest.approx(0.1 / 1.5 + 0.05 / 3.0)


def test_distserve_equals_pk_for_deterministic_service() -> None:
    rates = np.array([0.5, 3.0, 9.0])
    np.testing.assert_allclose(
        distserve_md1_ttft_s(rates, 0.1), 0.1 + pk_wait_moments(rates, [0.1], [1.0])[0], rtol=1e-14
    )
    np.testing.assert_allclose(
        distserve_inter_op_ttft_s(rates, 0.1), pipeline_mean_ttft_s(rates, [0.1], [1.0], 2), rtol=1e-14
    )


def test_fft_grid_mean_matches_pk() -> None:
    s, p = lognormal_prefill(1.0)
    rates = np.array([0.1, 0.5, 0.9]) / float(p @ s)
    w = mg1_wait_distribution(rates, s, p)
    grid_mean = (1.0 - w.cdf_grid).sum(axis=1) * w.h_s
    np.testing.assert_allclose(grid_mean, w.mean_s, rtol=3e-3)  # measured 0.125 %
    assert np.all(1.0 - w.cdf_grid[:, -1] < 1e-4)


@pytest.mark.parametrize(("sigma", "rho"), [(0.5, 0.7), (1.0, 0.5), (1.0, 0.7), (1.5, 0.6)])
def test_fft_quantiles_match_lindley(sigma: float, rho: float) -> None:
    s, p = lognormal_prefill(sigma)
    rate = rho / float(p @ s)
    rng = np.random.default_rng(11)
    service = s[rng.choice(s.size, 200_000, p=p)]
    total = lindley_wait(rate, service, seed=12) + service
    ttft = ShiftedMixture(mg1_wait_distribution([rate], s, p), s, p)
    for q in (0.5, 0.9, 0.99):
        # measured (200 k customers): within ±2.5 %; MC noise at P99 is ~2-3 %
        assert ttft.quantile(q)[0] == pytest.approx(np.quantile(total, q), rel=0.05)


def test_zero_rate_and_errors() -> None:
    w = mg1_wait_distribution([0.0], [0.2], [1.0])
    assert w.cdf(0.0)[0] == 1.0
    assert w.quantile(0.9)[0] == 0.0
    with pytest.raises(ValueError, match="unstable"):
        mg1_wait_distribution([5.0], [0.2], [1.0])
    with pytest.raises(ValueError, match="sum to"):
        mg1_wait_distribution([1.0], [0.2, 0.3], [0.5, 0.6])
    with pytest.raises(ValueError, match="rate_per_s"):
        pk_wait_moments([-1.0], [0.2], [1.0])
    with pytest.raises(ValueError, match="stages"):
        pipeline_mean_ttft_s([1.0], [0.2], [1.0], 0)
