"""The wait of a Turn 2+ append for the decode step in flight (pdplan/serving/ppd_boundary.py), worked by hand: zero
think time waits a whole step, a long think time the steps' length-biased residual, an idle instance nothing; the
two-point step law keeps the mean step; the law read on a lattice; a KV over the link waiting the residual and then a
step drawn by count; the appends' groups mixed; two waits added on a lattice (pdplan/serving/ppd_pool.py); the mixed
steps' law from the appends' work (one slice and one work value: the two-point law; two slices by hand; the mean step
kept) and the other appends' work drawn from its law."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdplan.cache.lru_closed_form import ThinkTime
from pdplan.serving.ppd_boundary import AppendWork, StepBoundary
from pdplan.serving.ppd_pool import _convolved

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


def test_arrival_over_the_link_waits_the_residual_then_a_step_drawn_by_count() -> None:
    plain = StepBoundary.of(0.020, 0.0, 0.0, 1.0, ZERO).arrival_law()  # no appends: uniform over a 20 ms step
    assert plain.mean_s == pytest.approx(0.010, rel=1e-3)
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO)
    q, tp, tm = b.mixed_share, b.plain_s, b.mixed_s
    residual = ((1 - q) * tp**2 + q * tm**2) / (2 * 0.020)
    assert b.arrival_law().mean_s == pytest.approx(residual + q * (tm - tp), rel=1e-3)
    assert b.excess_s == pytest.approx(0.020 - tp)  # the first step's mean excess: τ' − τ_p
    idle = StepBoundary.of(0.020, 0.0, 0.0, 0.0, ZERO).arrival_law()
    assert idle.mean_s == pytest.approx(0.0, abs=1e-9)


def test_arrival_over_the_link_meets_the_idle_shares_append_steps() -> None:
    # τ' = 20 ms, ρ_a = 0.25, λ_a = 25/s: λ_a·τ' = 0.5, q = 1 − e^{−0.5} = 0.393469, τ_p = 15 ms and
    # τ_m = 15 + 0.25·20/0.393469 = 27.708 ms; by time π_p = 0.606531·15/20 = 0.454898, π_m = 0.545102. busy = 0.6:
    # the idle share's append steps u = 0.4·0.25 = 0.1 of all time, at τ_m. At a = 5 ms (below τ_p: the first step's
    # excess, 0 or 12.708 ms, must be 0) F_D = (1 − q)·F_R'(a), F_R'(a) = 1 − 0.6 − 0.1 + 0.6·(0.454898·5/15 +
    # 0.545102·5/27.708) + 0.1·5/27.708 = 0.3 + 0.149999 + 0.018045 = 0.468044: F_D = 0.283883 (without u, the
    # busy share's mixed steps alone: 0.4 + 0.149999, F_D = 0.333590). The mean adds u·τ_m/2 = 1.3854 ms.
    b = StepBoundary.of(0.020, 0.25, 25.0, 0.6, ZERO)
    assert b.mixed_share == pytest.approx(0.393469, abs=1e-6)
    assert b.mixed_s == pytest.approx(0.027708, abs=1e-6)
    assert b.idle_append_share == pytest.approx(0.1, rel=1e-9)
    law = b.arrival_law()
    assert float(np.interp(0.005, law.grid_s, law.cdf_grid)) == pytest.approx(0.283883, abs=2e-4)
    busy_only = StepBoundary.of(0.020, 0.25, 25.0, 1.0, ZERO)
    q, tp, tm = busy_only.mixed_share, busy_only.plain_s, busy_only.mixed_s
    residual = ((1 - q) * tp**2 + q * tm**2) / (2 * 0.020)
    assert law.mean_s == pytest.approx(0.6 * residual + 0.1 * tm / 2 + q * (tm - tp), rel=2e-3)
    assert busy_only.idle_append_share == 0.0  # always busy: the sequence holds every append step


def test_shifted_law_mixes_the_groups() -> None:
    law = StepBoundary.of(0.020, 0.0, 0.0, 1.0, LONG).tabulated()  # uniform on [0, 20 ms]
    shifts = np.array([[0.0, 0.010], [0.0, 0.0]])
    got = law.shifted_on_lattice(0.005, 6, shifts, np.array([0.5, 0.5]))
    np.testing.assert_allclose(got[0], [0.0, 0.125, 0.25, 0.5, 0.75, 0.875], atol=1e-6)
    np.testing.assert_allclose(got[1], law.on_lattice(0.005, 6), atol=1e-12)


def test_convolved_waits_add() -> None:
    cells = np.arange(401) * 0.001  # two uniform waits on [0, 0.1 s]: their sum is triangular on [0, 0.2 s]
    uniform = np.clip(cells / 0.1, 0.0, 1.0)
    total = _convolved(uniform, uniform)
    assert total[100] == pytest.approx(0.5, abs=0.01)
    assert total[200] == pytest.approx(1.0, abs=1e-9)
    assert total[50] == pytest.approx(0.125, abs=0.01)


def test_an_unbounded_excess_never_completes() -> None:
    law = StepBoundary.of(0.020, 0.0, 0.0, 1.0, LONG).tabulated()
    got = law.shifted_on_lattice(0.005, 8, np.array([[0.0, np.inf], [np.inf, np.inf]]), np.array([0.5, 0.5]))
    np.testing.assert_allclose(got[0], 0.5 * law.on_lattice(0.005, 8), atol=1e-12)
    assert np.all(got[1] == 0.0)


def test_without_appends_the_carried_law_is_the_wait_alone() -> None:
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, LONG)  # no work given: nothing rides with the append
    law, plain = b.carried(), b.tabulated()
    np.testing.assert_array_equal(law.cdf_grid, plain.cdf_grid)
    assert law.mean_s == plain.mean_s


def test_zero_think_time_carries_the_appends_that_arrived_during_the_whole_step() -> None:
    # τ' = 20 ms, ρ_a = 0.1 from λ_a = 10/s appends of w̄ = 10 ms: τ_p = 18 ms, q = 1 − e^{−0.2} = 0.18127,
    # τ_m = 18 + 2/q = 29.033 ms. At zero think time R = S1, and the others that arrived during S1 are Poisson(λ_a·S1):
    # R + O has atoms at τ_p + k·w̄ with probability (1 − q)·Poisson(k; 0.18) and at τ_m + k·w̄ with q·Poisson(k; λ_a·τ_m)
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO, work=AppendWork.point(0.010), slices=1)
    law = b.carried()
    q, tm = 1.0 - math.exp(-0.2), 0.018 + 0.002 / (1.0 - math.exp(-0.2))
    assert tm == pytest.approx(0.029033, abs=1e-6)

    def at(a: float) -> float:
        return float(np.interp(a, law.grid_s, law.cdf_grid))

    # just past τ_p = 18 ms: a plain S1 and no other append, 0.81873 × e^{−0.18} = 0.68386
    assert at(0.0185) == pytest.approx((1.0 - q) * math.exp(-0.18), abs=2e-3)
    assert at(0.0185) == pytest.approx(0.68386, abs=2e-3)
    # just past 28 ms (τ_p + one other): + 0.81873 × 0.18·e^{−0.18} = 0.12309
    assert at(0.0285) == pytest.approx(0.68386 + 0.12309, abs=2e-3)
    # the mean: E[S1] + w̄·λ_a·E[S1] = 20 ms + 10 ms × 10/s × 20 ms = 22 ms
    assert law.mean_s == pytest.approx(0.022, rel=2e-3)


def test_long_think_time_carries_the_appends_of_a_length_biased_step() -> None:
    # a random arrival sees the step in flight length-biased: E[O] = λ_a·w̄·E[S²]/E[S], above the ρ_a·τ' = λ_a·w̄·E[S]
    # the mean step holds; with τ_p = 18 ms, τ_m = 29.033 ms, q = 0.18127: E[S²] = 0.81873·18² + 0.18127·29.033²
    # = 265.27 + 152.80 = 418.07 ms², so E[R] = 418.07/40 = 10.452 ms and E[O] = 0.1 × 418.07/20 = 2.0903 ms
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, LONG, work=AppendWork.point(0.010), slices=1)
    second = (1 - b.mixed_share) * b.plain_s**2 + b.mixed_share * b.mixed_s**2
    assert second == pytest.approx(418.07e-6, rel=1e-4)
    law = b.carried()
    assert law.mean_s == pytest.approx(0.010452 + 0.0020903, rel=2e-3)
    assert law.mean_s - b.tabulated().mean_s > 0.002  # more than the mean step's ρ_a·τ' = 2 ms
    # below w̄ only arrivals with no other append count: at a = 9 ms (half a plain step), Σ_σ π_σ·e^{−λ_a s_σ}·a/s_σ
    # with π_m = q·τ_m/τ' = 0.26314: 0.73686·e^{−0.18}·0.5 + 0.26314·e^{−0.29033}·9/29.033 = 0.30773 + 0.06102
    pi_m = b.mixed_share * b.mixed_s / 0.020
    assert pi_m == pytest.approx(0.26314, abs=1e-5)
    assert float(np.interp(0.009, law.grid_s, law.cdf_grid)) == pytest.approx(0.36875, abs=2e-3)


def test_an_idle_instance_carries_no_other_append() -> None:
    one = AppendWork.point(0.010)  # the two-point law, each other append at 10 ms
    b = StepBoundary.of(0.020, 0.1, 10.0, 0.25, LONG, work=one, slices=1)  # busy 1/4: an atom of 3/4 at 0
    law = b.carried()
    assert float(law.cdf_grid[0]) == pytest.approx(0.75)
    busy = StepBoundary.of(0.020, 0.1, 10.0, 1.0, LONG, work=one, slices=1).carried()
    assert law.mean_s == pytest.approx(0.25 * busy.mean_s, rel=1e-3)


def test_one_slice_and_one_work_value_is_the_two_point_law() -> None:
    # the degenerate case: a one-point work law in one slice gives exactly the two-point law τ_p / τ_m
    two = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO)
    one = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO, work=AppendWork.point(0.010), slices=1)
    q = 1.0 - math.exp(-0.2)
    for b in (two, one):
        np.testing.assert_allclose(b.mixed_steps_s, [0.018 + 0.1 * 0.020 / q], rtol=1e-15)
        np.testing.assert_allclose(b.mixed_prob, [q], rtol=1e-15)
    np.testing.assert_array_equal(two.cdf(np.linspace(0.0, 0.03, 7)), one.cdf(np.linspace(0.0, 0.03, 7)))


def test_mixed_steps_are_slices_of_the_compound_poisson_work() -> None:
    # λ_a = 10/s, τ' = 20 ms, appends of 10 ms each: K ~ Poisson(0.2); given K ≥ 1 (q = 0.18127), K = 1 with
    # probability 0.2·e^{−0.2}/q = 0.90333. Two slices of mass 1/2: the lower all K = 1 (X = 10 ms); the upper mean
    # 2·E[X | K ≥ 1] − 10 = 2·(2/q) − 10 = 12.0667 ms. Steps 28 and 30.0667 ms, q/2 each
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, LONG, work=AppendWork.point(0.010), slices=2)
    q = 1.0 - math.exp(-0.2)
    assert 0.2 * math.exp(-0.2) / q == pytest.approx(0.90333, abs=1e-5)
    # (on the lattice: within half a cell, 10 ms × 5 counts / 2047 cells / 2 ≈ 12 µs)
    np.testing.assert_allclose(b.mixed_steps_s, [0.028, 0.0300667], atol=1.3e-5)
    np.testing.assert_allclose(b.mixed_prob, [q / 2, q / 2], rtol=1e-12)


def test_sliced_steps_keep_the_mean_step() -> None:
    work = AppendWork(np.array([0.002, 0.005, 0.030]), np.array([0.5, 0.3, 0.2]))  # E[w] = 8.5 ms
    b = StepBoundary.of(0.020, 0.17, 20.0, 1.0, LONG, work=work)  # ρ_a = λ_a·E[w] = 0.17
    assert b.mixed_steps_s.size == 16
    assert (1.0 - b.mixed_share) * b.plain_s + float(b.mixed_prob @ b.mixed_steps_s) == pytest.approx(0.020, rel=1e-12)
    assert b.excess_s == pytest.approx(0.020 - b.plain_s, rel=1e-12)
    assert np.all(np.diff(b.mixed_steps_s) >= -1e-15)  # ordered by X
    assert b.mixed_steps_s[0] == pytest.approx(b.plain_s + 0.002, rel=0.05)  # the lightest: one short append
    # the random arrival's residual E[S²]/(2τ') and the others' λ_a·E[w]·E[S²]/τ', over the sliced law's own steps
    s = np.r_[b.plain_s, b.mixed_steps_s]
    p = np.r_[1.0 - b.mixed_share, b.mixed_prob]
    second = float(p @ s**2)
    assert b.carried().mean_s == pytest.approx(second / 0.040 + 0.17 * second / 0.020, rel=2e-3)
    assert b.arrival_law().mean_s == pytest.approx(second / 0.040 + 0.020 - b.plain_s, rel=2e-3)


def test_the_others_work_is_drawn_from_its_law() -> None:
    # as test_zero_think_time_carries_..., the others' work 5 or 15 ms with probability 1/2 each (mean 10 ms): R = S1,
    # S1 = τ_p = 18 ms with probability e^{−0.2} and the others Poisson(0.18). Past 18 ms: no other, 0.68386; past
    # 23 ms: + one of 5 ms, 0.68386 × 0.18 × 0.5 = 0.06155; past 28 ms: + two of 5 ms, 0.68386 × 0.0162 × 0.25 =
    # 0.00277 (one of 15 ms lands at 33 ms; the point law at 10 ms put 0.12309 at 28 ms); the mean is the point law's
    work = AppendWork(np.array([0.005, 0.015]), np.array([0.5, 0.5]))
    law = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO, work=work, slices=1).carried()

    def at(a: float) -> float:
        return float(np.interp(a, law.grid_s, law.cdf_grid))

    assert at(0.0185) == pytest.approx(0.68386, abs=2e-3)
    assert at(0.0235) == pytest.approx(0.68386 + 0.06155, abs=2e-3)
    assert at(0.0285) == pytest.approx(0.68386 + 0.06155 + 0.00277, abs=2e-3)
    assert law.mean_s == pytest.approx(0.022, rel=2e-3)


def test_a_spread_of_work_lengthens_the_tail_not_the_mean_step() -> None:
    work = AppendWork(np.array([0.002, 0.005, 0.030]), np.array([0.5, 0.3, 0.2]))
    two = StepBoundary.of(0.020, 0.17, 20.0, 1.0, LONG, work=AppendWork.point(work.mean_s), slices=1).carried()
    spread = StepBoundary.of(0.020, 0.17, 20.0, 1.0, LONG, work=work).carried()
    p90 = [float(np.interp(0.9, law.cdf_grid, law.grid_s)) for law in (two, spread)]
    assert p90[1] > p90[0] + 0.003
    assert spread.mean_s > two.mean_s  # the in-flight step's second moment grows with the spread


def test_fewer_than_one_slice_is_refused() -> None:
    with pytest.raises(ValueError, match="slices"):
        StepBoundary.of(0.020, 0.1, 10.0, 1.0, LONG, work=AppendWork.point(0.010), slices=0)


def test_on_attention_dp_ranks_an_append_carries_the_others_of_its_own_rank() -> None:
    # As above (τ' = 20 ms, ρ_a = 0.1, λ_a = 10/s, w̄ = 10 ms, zero think time) on D = 4 ranks: the steps are the
    # instance's (τ_p = 18 ms, q = 0.18127, τ_m = 29.033 ms), and the others that share the append's part of its
    # step are its own rank's, Poisson(λ_a·S1/4): just past τ_p, 0.81873 × e^{−0.045} = 0.78271; the mean
    # E[S1] + w̄·(λ_a/4)·E[S1] = 20 + 10 × 2.5 × 0.020 ms = 20.5 ms.
    b = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO, work=AppendWork.point(0.010), slices=1, ranks=4)
    one = StepBoundary.of(0.020, 0.1, 10.0, 1.0, ZERO, work=AppendWork.point(0.010), slices=1)
    np.testing.assert_array_equal(b.mixed_steps_s, one.mixed_steps_s)
    law = b.carried()
    assert float(np.interp(0.0185, law.grid_s, law.cdf_grid)) == pytest.approx(0.78271, abs=2e-3)
    assert law.mean_s == pytest.approx(0.0205, rel=2e-3)
