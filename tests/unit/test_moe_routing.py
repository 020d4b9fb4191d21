"""The busiest EP rank under power-law routing (pdplan.perf.moe_routing): the expected largest of ep sums of E/ep
draws, hand-worked and against AIConfigurator's generator (fitting.fit_wideep.power_law_draws)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from fitting.fit_wideep import power_law_draws
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.perf.moe_routing import route
from pdplan.specs.routing_law import RoutingLaw


def _moment(alpha: float, a: float, b: float, j: int) -> float:
    """E[x^j] of p(x) ∝ x^-α on [a, b], integrated by hand (no log case at these α)."""

    def integral(p: int) -> float:
        e = p + 1.0 - alpha
        return float((b**e - a**e) / e)

    return integral(j) / integral(0)


def test_busiest_of_32_ranks_by_hand() -> None:
    # DeepSeek-V3's MoE (E 256, k 8) at EP32, T = 524,288, α 0.6: loads from x^-0.6 on [1, 0.8·T] scaled to T·k;
    # 8 experts per rank, the busiest of 32 sums: n·μ + √n·σ·(z + (z² − 1)·γ/(6√n)), z at Blom's (32 − 3/8)/(32 + 1/4)
    t, e, k, ep, alpha = 524_288.0, 256, 8, 32, 0.6
    a, b = 1.0, 0.8 * t
    mu, m2, m3 = (_moment(alpha, a, b, j) for j in (1, 2, 3))
    var = m2 - mu * mu
    skew = (m3 - 3 * mu * m2 + 2 * mu**3) / var**1.5
    n = e / ep
    z = NormalDist().inv_cdf((ep - 0.375) / (ep + 0.25))
    assert z == pytest.approx(2.067, abs=1e-3)
    busiest_draws = n * mu + math.sqrt(n) * math.sqrt(var) * (z + (z * z - 1) * skew / (6 * math.sqrt(n)))
    expected = busiest_draws * t * k / (e * mu)
    got = float(route(t, e, k, ep, RoutingLaw("power_law", alpha)).pairs)
    assert got == pytest.approx(expected, rel=1e-9)
    assert got / (t * k / ep) == pytest.approx(1.80, abs=0.01)  # 1.80 x the mean load (it was 1.30)


@pytest.mark.parametrize("alpha", [0.6, 0.8, 1.01, 1.2])
@pytest.mark.parametrize("ep", [8, 16, 32, 64])
@pytest.mark.parametrize("tokens", [4096, 65_536, 524_288])
def test_matches_the_generators_busiest_rank(alpha: float, ep: int, tokens: int) -> None:
    # 4-32 experts per rank: within 6 % of the mean of 128 seeded draws of the collector's generator
    drawn = float(power_law_draws(tokens, 256, 8, ep, alpha, samples=128).sum(axis=1).mean())
    got = float(route(float(tokens), 256, 8, ep, RoutingLaw("power_law", alpha)).pairs)
    assert got == pytest.approx(drawn, rel=0.06)


def test_one_expert_per_rank_is_the_largest_expert() -> None:
    # EP = E: the busiest rank is the largest single expert (the 1 − 1/(E+1) quantile), as before
    drawn = float(power_law_draws(65_536, 256, 8, 256, 0.6, samples=128).sum(axis=1).mean())
    assert float(route(65_536.0, 256, 8, 256, RoutingLaw("power_law", 0.6)).pairs) == pytest.approx(drawn, rel=0.02)


@settings(max_examples=60, deadline=None)
@given(
    alpha=st.sampled_from([0.6, 0.8, 1.01, 1.2]),
    tokens=st.floats(1.0, 1e6),
    ep_exp=st.integers(0, 8),
    top_k=st.sampled_from([1, 2, 8]),
)
def test_busiest_rank_between_mean_and_its_whole_capacity(alpha: float, tokens: float, ep_exp: int, top_k: int) -> None:
    # never below the mean load T·k/ep, never above all pairs nor E/ep experts each taking every token once
    experts, ep = 256, 2**ep_exp
    r = route(tokens, experts, top_k, ep, RoutingLaw("power_law", alpha))
    pairs = float(r.pairs)
    assert pairs >= tokens * top_k / ep * (1 - 1e-9)
    assert pairs <= min(tokens * top_k, experts / ep * max(tokens, 1.0)) * (1 + 1e-9) or pairs <= float(r.hit)
    assert np.isfinite(pairs)
