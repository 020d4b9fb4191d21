"""The spread the appends placed on decode give a request's TPOT (pdplan/serving/ppd_decode.py, AppendNoise; issue
#24): the added variance worked by hand, the cluster factor 1/(1 − ρ_a)² against a simulated step chain, and the law
it is added to."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing.distributions import GammaMixture
from pdplan.serving.ppd_decode import AppendNoise


def test_added_variance_by_hand() -> None:
    # λ_a = 0.25 × 18 req/s = 4.5 appends/s per instance, τ' = 28 ms, E[w²] = (70 ms)², ρ_a = 0.3:
    # λ_a·τ'·E[w²]/(1 − ρ_a)² = 4.5 × 0.028 × 0.0049 / 0.49 = 1.26e-3 s², over n = 175 steps 7.2e-6 s² (2.68 ms sd)
    noise = AppendNoise(0.25, 0.0049, 0.3)
    got = noise.var_s2(np.array([18.0, 0.0]), np.array([0.028, 0.028]), np.array([175.0, 1.0]))
    assert got[0] == pytest.approx([7.2e-6, 1.26e-3], rel=1e-12)
    assert np.all(got[1] == 0.0)  # no rate, no appends


def test_the_rho_is_capped_at_the_decode_limit() -> None:
    # ρ_a past DECODE_U_MAX (0.85) counts as 0.85: 1/(0.15)² = 44.4, not 1/(0.05)²
    got = AppendNoise(1.0, 1.0, 0.95).var_s2(np.array([1.0]), np.array([1.0]), np.array([1.0]))
    assert float(got[0, 0]) == pytest.approx(1.0 / 0.15**2, rel=1e-12)


def test_cluster_factor_against_a_simulated_step_chain() -> None:
    # the mixed steps as the simulator runs them (pdplan/sim/decode_append.py): a step lasts τ_p plus the work of the
    # appends that arrived during the step before; a request's mean interval over n steps. Without the clusters
    # (each append's work letting more in) the variance would be λ_a·τ'·w²/n, 2.1× too small at ρ_a = 0.315.
    tp, w, lam, n, reqs = 0.019, 0.070, 4.5, 175, 6000
    rho = lam * w
    tau = tp / (1.0 - rho)
    rng = np.random.default_rng(7)
    step = np.full(reqs, tau)
    for _ in range(100):  # to the chain's stationary law
        step = tp + w * rng.poisson(lam * step)
    total = np.zeros(reqs)
    for _ in range(n):
        step = tp + w * rng.poisson(lam * step)
        total += step
    mean = total / n
    want = float(AppendNoise(1.0, w * w, rho).var_s2(np.array([lam]), np.array([tau]), np.array([float(n)]))[0, 0])
    assert float(mean.mean()) == pytest.approx(tau, rel=0.01)
    assert float(mean.var()) == pytest.approx(want, rel=0.08)
    assert float(mean.var()) > 1.7 * lam * tau * w * w / n


def test_added_to_the_load_variance_only() -> None:
    law = GammaMixture(np.full((1, 2), 0.01), np.full((1, 2), 0.02), np.full((1, 2), 1e-6), np.array([0.5, 0.5]))
    noise = AppendNoise(0.25, 0.0049, 0.3)
    out = noise.tpot(law, np.array([18.0]), np.array([0.028]), np.array([175.0, 35.0]))
    np.testing.assert_array_equal(out.offset_s, law.offset_s)
    np.testing.assert_array_equal(out.load_mean_s, law.load_mean_s)
    assert out.load_var_s2[0] == pytest.approx([1e-6 + 7.2e-6, 1e-6 + 3.6e-5], rel=1e-12)
    assert float(out.quantile(0.9)[0]) > float(law.quantile(0.9)[0])
