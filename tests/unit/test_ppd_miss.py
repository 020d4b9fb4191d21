"""The gaps a prefill-pool turn's cached prompt must survive under PPD, conditioned on why the turns missed on decode
(pdplan/serving/ppd_miss.py, docs/prefix_cache.md §11, issue #24 item 6): exponential think times worked by hand, zero
survival for a decode miss whenever T_P ≤ d + τ, the unconditioned c_m recovered where the placement says nothing of
the think times, and the model's prefill-pool hit share on the case of tests/unit/test_ppd_cache_pressure.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.ppd_pressure import pressure_case

from pdplan.cache.lru_closed_form import SessionWorkload, ThinkTime, gap_sums
from pdplan.serving.build import model_at_rate, with_cache_rate
from pdplan.serving.ppd_miss import DecodeMiss, conditioned_survival
from pdplan.serving.ppd_report import placement_of
from pdplan.types import FloatArray

MU, TAU, D = 10.0, 8.0, 0.5
P = -math.expm1(-TAU / MU)  # P(Z < τ) = 0.55067


def _workload(think: ThinkTime, turns: int = 4) -> SessionWorkload:
    """The prefill side's view: ``turns`` turns, a 0.5 s turn duration after the prompt's last touch."""
    pmf = (0.0,) * (turns - 1) + (1.0,)
    return SessionWorkload(1.0, pmf, 100.0, 400.0, 250.0, think, D, outputs_cached=False)


def _ppd(turns: int = 4, chosen: float = 1.0) -> tuple[FloatArray, DecodeMiss]:
    """Session-affine decode (q_D = 1), τ = 8 s, the policy placing ``chosen`` of the held turns: s_j = p·π."""
    think = ThinkTime("exponential", MU)
    placed = np.full(turns, P * chosen)
    placed[0] = 0.0
    return placed, DecodeMiss(think, TAU, 1.0, np.full(turns, chosen))


def test_exponential_decode_misses_by_hand() -> None:
    # `ppd` (every held turn placed), session-affine prefill (q = 1), T_P = 30 s. A prefill-pool turn k missed: its
    # gap is τ + Z (no memory), the m − 1 between it and turn k − m ran on decode (each Z < τ). So
    # c_1 = P(d + τ + Z < T_P) = 1 − e^{−(30 − 0.5 − 8)/10} = 1 − e^{−2.15} = 0.883516, and
    # c_2 = P(2d + Z_1 + τ + Z < T_P | Z_1 < τ) = 1 − e^{−(30 − 1 − 8)/10}·E[e^{Z_1/10} | Z_1 < 8]
    #     = 1 − e^{−2.1}·0.8/(1 − e^{−0.8}) = 0.822099 (30 − 1 ≥ 2τ: the exponent never turns negative),
    # where the unconditioned c_1 = P(d + Z < 30) = 1 − e^{−2.95} = 0.947660 and c_2 = 0.785409.
    placed, miss = _ppd()
    w = _workload(miss.think)
    c = conditioned_survival(w, 30.0, placed, 1.0, miss)
    c1 = -math.expm1(-(30.0 - D - TAU) / MU)
    c2 = 1.0 - math.exp(-(30.0 - 2 * D - TAU) / MU) * (TAU / MU) / P
    assert (c1, c2) == pytest.approx((0.883516, 0.822099), abs=1e-6)
    np.testing.assert_allclose(c[1:, 0], c1, atol=1e-6)
    np.testing.assert_allclose(c[2:, 1], c2, atol=1e-6)
    plain, _ = gap_sums(w, 30.0, 4)
    assert plain[:2] == pytest.approx((0.947660, 0.785409), abs=1e-6)


def test_policy_left_turns_mix_in_the_short_gaps_by_hand() -> None:
    # The policy places half the held turns (π = 0.5): a prefill-pool turn missed (1 − p) or was held and left
    # (p·0.5), so its gap is above τ w.p. α = 0.44933/(0.44933 + 0.27534) = 0.62005 and
    # c_1 = α·(1 − e^{−2.15}) + (1 − α)·P(Z < min(29.5, τ))/P(Z < τ) = 0.62005·0.883516 + 0.37995 = 0.927774.
    placed, miss = _ppd(chosen=0.5)
    c = conditioned_survival(_workload(miss.think), 30.0, placed, 1.0, miss)
    alpha = (1.0 - P) / ((1.0 - P) + P * 0.5)
    want = alpha * -math.expm1(-(30.0 - D - TAU) / MU) + (1.0 - alpha)
    assert want == pytest.approx(0.927774, abs=1e-6)
    np.testing.assert_allclose(c[1:, 0], want, atol=1e-6)


def test_random_prefill_routing_by_hand() -> None:
    # Prefill routing over two instances (q = 1/2), `ppd`: the turn between k − 2 and k either ran on decode (gap
    # below τ) or on the other prefill instance after a miss (above τ), above w.p. α = (1 − p)·(1 − q)/(1 − q(1 − p))
    # = 0.22466/0.77534 = 0.28976; turn k's own gap is above τ. c_2 = (1 − α)·0.822099 + α·P(2d + 2τ + Erlang(2, 10)
    # < 30), the Erlang's P(E < 13) = 1 − e^{−1.3}·2.3 = 0.373177: c_2 = 0.692017.
    placed, miss = _ppd()
    c = conditioned_survival(_workload(miss.think), 30.0, placed, 0.5, miss)
    alpha = (1.0 - P) * 0.5 / (1.0 - 0.5 * (1.0 - P))
    x = (30.0 - 2 * D - 2 * TAU) / MU
    erlang = 1.0 - math.exp(-x) * (1.0 + x)
    below = 1.0 - math.exp(-(30.0 - 2 * D - TAU) / MU) * (TAU / MU) / P
    want = (1.0 - alpha) * below + alpha * erlang
    assert want == pytest.approx(0.692017, abs=1e-6)
    np.testing.assert_allclose(c[2:, 1], want, atol=1e-6)


def test_a_decode_miss_never_survives_a_shorter_prefill_time() -> None:
    # T_P = 8.4 s ≤ d + τ = 8.5 s: every gap before a decode miss is above τ, so nothing the session left on the
    # prefill cache survives it, at every depth (the unconditioned c_1 = 1 − e^{−0.79} = 0.546).
    placed, miss = _ppd(turns=6)
    w = _workload(miss.think, 6)
    c = conditioned_survival(w, 8.4, placed, 1.0, miss)
    assert np.all(np.tril(c[1:, :5]) == 0.0)
    assert gap_sums(w, 8.4, 1)[0][0] == pytest.approx(-math.expm1(-0.79), abs=1e-9)


@pytest.mark.parametrize("think", [ThinkTime("exponential", MU), ThinkTime("lognormal", MU, 1.2),
                                   ThinkTime("fixed", MU)])  # fmt: skip
def test_unconditioned_where_the_placement_says_nothing_of_the_gaps(think: ThinkTime) -> None:
    # Nothing placed: every turn is on the prefill pool whatever its think time (each share above τ is 1 − p), and
    # a fixed think time is its mean whatever the event: c_{k,m} is gap_sums' c_m exactly.
    w = _workload(think, 5)
    plain, _ = gap_sums(w, 30.0, 5)
    miss = DecodeMiss(think, TAU, 1.0, np.ones(5))
    np.testing.assert_array_equal(conditioned_survival(w, 30.0, np.zeros(5), 1.0, miss)[4], plain)
    if think.kind == "fixed":
        placed = np.r_[0.0, np.ones(4)]
        np.testing.assert_array_equal(conditioned_survival(w, 30.0, placed, 1.0, miss)[4], plain)


def test_lognormal_short_gaps_survive_more() -> None:
    # Lognormal think times (mean 10 s, σ = 1.2) under `ppd` with a long prefill time (T_P = 60 s): a decode miss's
    # gap (above τ) survives less often than an unconditioned one (c_1 below), the gaps between the decode turns
    # (below τ) more (c_m / c_1 above the unconditioned ratio); every value a probability.
    think = ThinkTime("lognormal", MU, 1.2)
    p = think.cdf(TAU)
    placed = np.r_[0.0, np.full(5, p)]
    miss = DecodeMiss(think, TAU, 1.0, np.ones(6))
    w = _workload(think, 6)
    c = conditioned_survival(w, 60.0, placed, 1.0, miss)
    plain, _ = gap_sums(w, 60.0, 6)
    assert np.all((c >= 0.0) & (c <= 1.0))
    assert c[5, 0] < plain[0]
    assert c[5, 3] / c[5, 0] > plain[3] / plain[0]


def test_lognormal_against_draws() -> None:
    # Lognormal think times (mean 10 s, σ = 1.2), τ = 8 s, d = 0.5 s, T_P = 30 s, random prefill routing over two
    # instances (q = 1/2) and random decode landing q_D = 1/2, the policy placing π = (1, 0.6, 1, 0.3) of the held
    # turns 2..5. Turn 5's c_m, m = 1..4, by 10⁶ sessions drawn with numpy's generator (seed 1; the events as the
    # module docstring has them, the share of those whose gaps fit): 0.9255, 0.8283, 0.6828, 0.5187 (±0.001 to
    # ±0.003, two standard errors); unconditioned (2·10⁶ draws): 0.9333, 0.8129, 0.6435, 0.4517.
    think = ThinkTime("lognormal", MU, 1.2)
    chosen = np.array([0.0, 1.0, 0.6, 1.0, 0.3])
    placed = 0.5 * think.cdf(TAU) * chosen
    c = conditioned_survival(_workload(think, 5), 30.0, placed, 0.5, DecodeMiss(think, TAU, 0.5, chosen))
    np.testing.assert_allclose(c[4, :4], [0.9255, 0.8283, 0.6828, 0.5187], atol=0.003)


def test_the_misses_find_nothing_in_the_prefill_cache_where_it_is_shorter() -> None:
    # The case of tests/unit/test_ppd_cache_pressure.py at the 19.58 req/s its simulator run offered (4 turns of
    # 2,000 new / 100 output tokens, 20 s think, `ppd`): the prefill cache's T_P (5.5 s) is below the decode rank's
    # τ (31.8 s), so the Turn 2+ left on the prefill pool (every one a decode miss) hit it 0 % of the time, as the
    # simulator's (0.000, benchmarks/ppd_cache_pressure.py), where the unconditioned gaps gave them 9.2 %.
    res = pressure_case(name="ppd-miss")
    placement = placement_of(model_at_rate(with_cache_rate(res, 19.58), 19.58))
    assert placement is not None
    assert placement.prefill_hits is not None
    assert np.all(placement.prefill_hits.fraction == 0.0)
