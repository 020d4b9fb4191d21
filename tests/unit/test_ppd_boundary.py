"""The wait of a Turn 2+ append for the decode step in flight (pdplan/serving/ppd_boundary.py), worked by hand: zero
think time waits a whole step, a long think time the steps' length-biased residual, an idle instance nothing; the
two-point step law keeps the mean step; the law read on a lattice."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdplan.cache.lru_closed_form import ThinkTime
from pdplan.serving.ppd_boundary import StepBoundary

ZERO = ThinkTime("fixed", 1e-9)
"""A zero think time as the prefix-cache model writes it (:func:`pdplan.serving.prefix_cache.think_law`)."""
LONG = ThinkTime("exponential", 1e4)


def test_steps_keep_the_mean_step() -> None:
    # τ' = 20 ms, ρ_a = 0.1, λ_a = 10/s: q = 1 − e^{−0.2}, τ_p = 18 ms, τ_m = τ_p + ρ_a·τ'/q
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO)
    q = 1.0 - math.exp(-0.2)
    assert b.mixed_share == pytest.approx(q)
    assert b.plain_s == pytest.approx(0.018)
    assert b.mixed_s == pytest.approx(0.018 + 0.002 / q)
    assert (1.0 - q) * b.plain_s + q * b.mixed_s == pytest.approx(0.020)


def test_zero_think_time_waits_a_whole_step() -> None:
    b = StepBoundary.of(0.020, 0.0, 0.0, 1.0, ZERO)  # no appends: every step 20 ms
    assert b.cdf(np.array([0.0, 0.0199, 0.0201])) == pytest.approx([0.0, 0.0, 1.0])
    assert b.tabulated().mean_s == pytest.approx(0.020, rel=1e-3)  # not the half step of a random arrival


def test_zero_think_time_with_appends_waits_the_step_drawn_by_count() -> None:
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO)
    between = 0.5 * (b.plain_s + b.mixed_s)
    assert float(b.cdf(np.array([between]))[0]) == pytest.approx(1.0 - b.mixed_share)
    law = b.tabulated()
    assert law.mean_s == pytest.approx((1 - b.mixed_share) * b.plain_s + b.mixed_share * b.mixed_s, rel=2e-3)


def test_long_think_time_waits_the_length_biased_residual() -> None:
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, LONG)
    q, tp, tm = b.mixed_share, b.plain_s, b.mixed_s
    second = (1 - q) * tp**2 + q * tm**2
    assert b.tabulated().mean_s == pytest.approx(second / (2 * 0.020), rel=1e-3)  # E[S²]/(2E[S])
    assert float(b.cdf(np.array([0.5 * tp]))[0]) == pytest.approx(
        (1 - q * tm / 0.020) * 0.5 + (q * tm / 0.020) * 0.5 * tp / tm, rel=1e-3
    )


def test_idle_instance_admits_at_once() -> None:
    b = StepBoundary.of(0.020, 0.0, 0.0, 0.25, ZERO)  # busy 1/4: an atom of 3/4 at 0
    assert float(b.cdf(np.array([0.0]))[0]) == pytest.approx(0.75)
    assert b.tabulated().mean_s == pytest.approx(0.25 * 0.020, rel=1e-3)


def test_unbounded_steps_never_admit() -> None:
    law = StepBoundary.of(math.inf, 0.1, 10.0, 1.0, ZERO).tabulated()
    assert math.isinf(law.mean_s)
    assert law.span_s == math.inf
    assert np.all(law.on_lattice(0.001, 8) == 0.0)


def test_law_on_a_lattice() -> None:
    law = StepBoundary.of(0.020, 0.0, 0.0, 1.0, LONG).tabulated()  # uniform on [0, 20 ms]
    np.testing.assert_allclose(law.on_lattice(0.005, 6), [0.0, 0.25, 0.5, 0.75, 1.0, 1.0], atol=1e-6)
