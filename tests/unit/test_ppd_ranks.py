"""The appends of different attention-DP ranks side by side in one step (pdplan/serving/ppd_ranks.py; issue #24
item 6): the slowest rank's expected load by hand, the appends' share of the time and its settling with the step."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdplan.serving.ppd_boundary import AppendWork
from pdplan.serving.ppd_ranks import RankWork, max_rank_work_s, settle


def _max_of_poissons(mean_count: float, ranks: int) -> float:
    """E[max of D iid Poisson(μ/D)] = Σ_{n ≥ 0} (1 − F(n)^D), summed directly (not on the lattice)."""
    nu, total, cdf, term = mean_count / ranks, 0.0, 0.0, math.exp(-mean_count / ranks)
    for n in range(200):
        cdf += term
        total += 1.0 - cdf**ranks
        term *= nu / (n + 1)
    return total


def test_the_most_loaded_of_two_ranks_by_hand() -> None:
    # K appends of unit work thrown on D = 2 ranks: E[max load | K] by the multinomial, listing the splits. K = 2:
    # (2, 0) or (0, 2) with probability 1/2, else (1, 1): 3/2. K = 3: (3, 0) 2/8, (2, 1) 6/8: 9/4. K = 4: (4, 0)
    # 2/16, (3, 1) 8/16, (2, 2) 6/16: 11/4. K = 5: (5, 0) 2/32, (4, 1) 10/32, (3, 2) 20/32: 55/16. K = 6: 63/16,
    # K = 7: 147/32. Two appends on eight ranks: 1 + 1/8 (the second on the first's rank with probability 1/8).
    given = [0.0, 1.0, 1.5, 2.25, 2.75, 55 / 16, 63 / 16, 147 / 32]
    # K ~ Poisson(1): the mixture 0.83678 up to K = 7 (the tail past it adds 5e-5: 0.83683), which the splitting gives
    # as two independent Poisson(1/2) loads: Σ_n (1 − F(n)²) = 0.63212 + 0.17226 + 0.02857 + 0.00349 + 0.00038
    mixture = sum(math.exp(-1.0) / math.factorial(k) * m for k, m in enumerate(given))
    assert mixture == pytest.approx(0.836782, abs=1e-6)
    assert _max_of_poissons(1.0, 2) == pytest.approx(0.836835, abs=1e-6)
    assert max_rank_work_s(1.0, 2, AppendWork.point(1.0)) == pytest.approx(0.836835, abs=1e-6)
    assert max_rank_work_s(2.0, 8, AppendWork.point(0.07)) == pytest.approx(0.07 * _max_of_poissons(2.0, 8), rel=1e-5)
    # one rank: the whole sum, E[K]·u
    assert max_rank_work_s(3.0, 1, AppendWork.point(0.5)) == pytest.approx(1.5, rel=1e-6)
    assert max_rank_work_s(0.0, 8, AppendWork.point(0.5)) == 0.0


def test_a_spread_work_law_against_its_enumeration() -> None:
    # own parts 1 or 2 (probability 1/2 each), Poisson(1) appends on two ranks: each rank's load a compound Poisson
    # sum of Poisson(1/2) parts, enumerated up to 8 parts a rank; E[max] = Σ_x x·(F(x)² − F(x⁻)²) = 1.280539
    work = AppendWork(np.array([1.0, 2.0]), np.array([0.5, 0.5]))
    assert max_rank_work_s(1.0, 2, work) == pytest.approx(1.280539, rel=1e-5)
    # between the most loaded rank of unit parts (0.8368) and twice it: the law's spread moves it
    assert 0.8368 * 1.5 < max_rank_work_s(1.0, 2, work) < 2 * 0.8368


def test_the_appends_share_with_the_step_before_by_hand() -> None:
    # Own parts u = 60 ms, experts x = 5 ms, D = 8, λ_a = 4/s, τ' = 30 ms, ρ_a = 0.3: q = 1 − e^{−0.12} =
    # 0.113080; the plain step before 21 ms, the mixed one 21 + 0.3·30/0.113080 = 100.590 ms. The slowest rank's
    # load u·E[max of 8 Poisson(μ/8)] at μ = 0.084 (0.081007) and 0.402360 (0.341167); the experts add λ_a·x = 0.02:
    # ρ = ((1 − q)·0.06·0.081007 + q·0.06·0.341167)/0.03 + 0.02 = 0.240854 (the sum: 4·0.065 = 0.26).
    rank = RankWork(8, AppendWork.point(0.060), 0.005)
    assert rank.share(4.0, 0.030, 0.3) == pytest.approx(0.240854, rel=3e-5)  # the lattice: 1e-6 tail cut
    # ρ_a settles where share(ρ) = ρ, below the sum
    rho = rank.load(4.0, 0.030)
    assert rho == pytest.approx(rank.share(4.0, 0.030, rho), rel=2e-4)
    assert 0.2 < rho < 4.0 * 0.065
    # few appends a step: the sum (each alone in its step)
    assert rank.load(0.01, 0.030) == pytest.approx(0.01 * 0.065, rel=1e-3)


def test_of_splits_the_placed_work_and_drops_what_is_not_placed() -> None:
    work, expert = np.array([[0.06, 0.08], [0.07, 0.09]]), np.array([[0.01, 0.02], [0.01, 0.02]])
    weight = np.array([[0.0, 0.0], [0.25, 0.75]])  # turn 1 places nothing
    rank = RankWork.of(4, work, expert, weight)
    assert rank is not None
    np.testing.assert_allclose(rank.own.values_s, [0.06, 0.07])
    assert rank.expert_s == pytest.approx(0.25 * 0.01 + 0.75 * 0.02, rel=1e-12)
    assert RankWork.of(1, work, expert, weight) is None  # one rank: the sum is exact
    assert RankWork.of(4, work, expert, np.zeros((2, 2))) is None


def test_settle_finds_the_step_and_the_share_together() -> None:
    # τ'(ρ) = 20 ms/(1 − ρ) and ρ(τ') = 0.2 + 0.6 ms/τ': ρ = 0.2 + 0.03·(1 − ρ), ρ = 0.23/1.03 = 0.223301
    rho, tau = settle(0.5, lambda r: 0.020 / (1.0 - r), lambda t: t, lambda t: 0.2 + 0.0006 / t)
    assert rho == pytest.approx(0.23 / 1.03, rel=1e-4)
    assert tau == pytest.approx(0.020 / (1.0 - rho), rel=1e-12)
