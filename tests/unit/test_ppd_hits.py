"""The prefill caches' hits of the turns a PPD placement leaves on the prefill pool (pdplan/serving/ppd_hits.py,
docs/prefix_cache.md §11): the last prefill-pool turn's law, the hit tokens and the characteristic time worked by
hand, plain disaggregation's closed form recovered with nothing placed, and the model's prefill hit ratio on three
fixed turns under a threshold policy against the hand value."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from support.sessions_1p2d import sessions_1p2d

from pdplan.cache.lru_closed_form import SessionWorkload, ThinkTime, geometric_turns, session_cache
from pdplan.io.catalog import open_catalog
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.disaggregated import transfer_config
from pdplan.serving.ppd import turns_pmf
from pdplan.serving.ppd_hits import (
    PrefillView,
    bin_hit_scale,
    expected_hits,
    last_prefill_law,
    prefill_characteristic_time_s,
    prefill_items,
    prefill_view,
    remaining_share,
)
from pdplan.serving.ppd_miss import miss_of
from pdplan.serving.ppd_prices import placed_prices
from pdplan.serving.ppd_report import placement_of
from pdplan.serving.resolve import resolve
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.specs.token_pmf import length_pmf


def _three_turns(think: ThinkTime, duration_s: float = 0.0, rate: float = 1.0) -> SessionWorkload:
    return SessionWorkload(rate, (0.0, 0.0, 1.0), 100.0, 400.0, 250.0, think, duration_s, outputs_cached=False)


def test_last_prefill_law_by_hand() -> None:
    # s = (0, 0.3, 0.6, 0.5), session-affine: turn 4's last prefill-pool turn is 3 (0.4), 2 (0.6·0.7 = 0.42) or
    # 1 (0.6·0.3 = 0.18); turn 3's: 2 (0.7) or 1 (0.3)
    law = last_prefill_law(np.array([0.0, 0.3, 0.6, 0.5]), 1.0)
    np.testing.assert_allclose(law[3, :3], [0.4, 0.42, 0.18])
    np.testing.assert_allclose(law[2, :2], [0.7, 0.3])
    assert law[0].sum() == 0.0
    np.testing.assert_allclose(law[1:].sum(axis=1), 1.0)
    # random routing over 2 instances, nothing placed: q(1 − q)^(m−1), as session_cache
    np.testing.assert_allclose(last_prefill_law(np.zeros(4), 0.5)[3, :3], [0.5, 0.25, 0.125])


def test_three_fixed_turns_zero_think_by_hand() -> None:
    """S = 100, a = 400, o = 250, s_2 = s_3 = p = 0.4, m̄ = 150: turn 2's prompt on the prefill pool holds the
    appends left there, ā_P = (400 − 0.4·150)/0.6 = 566.67; T_2 = S + a = 500; T_3 = 0.6·(100 + 650 + 566.67) +
    0.4·500 = 990 (plain: 100 + 2·400 + 250 = 1150)."""
    w = _three_turns(ThinkTime("fixed", 1e-9))
    placed, m_bar = np.array([0.0, 0.4, 0.4]), np.array([0.0, 150.0, 150.0])
    items = prefill_items(w, placed, m_bar)
    np.testing.assert_allclose(items, [500.0, 100.0 + 650.0 + 340.0 / 0.6, 100.0 + 1300.0 + 340.0 / 0.6])
    view = PrefillView(w, 1e9, 1, 1.0, session_cache(w, 1e9).characteristic_time_s)
    hits, plain = view.hits(placed, m_bar)
    np.testing.assert_allclose(hits, [0.0, 500.0, 990.0])
    np.testing.assert_allclose(plain, [0.0, 500.0, 1150.0])
    # per request (turns 1/3 each): (0.6·500 + 0.6·990)/3 = 298 of plain's (500 + 1150)/3 = 550
    share = np.full(3, 1.0 / 3.0)
    assert remaining_share(share, placed, hits, plain) == pytest.approx(298.0 / 550.0)
    # one bin holding turns 2 and 3: ρ = (0.6·500 + 0.6·990)/(0.6·500 + 0.6·1150)
    assert bin_hit_scale(share, placed, np.ones((3, 1)), hits, plain)[0] == pytest.approx(1490.0 / 1650.0)


def test_survival_over_the_gaps_since_the_last_prefill_turn() -> None:
    """Fixed think time 4 s, turn duration 1 s, T_C between one gap (5 s) and two (10 s): a turn whose previous
    turn ran on decode finds nothing (its last prefill-pool turn is two gaps back), so T_3 = (1 − p)·item_2."""
    w = _three_turns(ThinkTime("fixed", 4.0), duration_s=1.0)
    placed, m_bar = np.array([0.0, 0.4, 0.4]), np.array([0.0, 150.0, 150.0])
    items = prefill_items(w, placed, m_bar)
    law = last_prefill_law(placed, 1.0)
    survive = np.array([1.0, 0.0, 0.0])  # c_1 = P(5 s < T_C), c_2 = P(10 s < T_C) at T_C = 7 s
    np.testing.assert_allclose(expected_hits(law, survive, items), [0.0, 500.0, 0.6 * items[1]])


@pytest.mark.parametrize(("routing", "system_prompts"), [("session-affine", 0), ("random", 0), ("session-affine", 2)])
def test_nothing_placed_is_plain_disaggregation(routing: Any, system_prompts: int) -> None:
    """Every s_j = 0: the characteristic time and hit tokens are session_cache's (geometric turns, exponential think
    time, a capacity that binds; a 1,000-token system prompt, shared by two groups of sessions or each its own)."""
    w = SessionWorkload(2.0, geometric_turns(3.1, 12), 1000.0, 400.0, 200.0, ThinkTime("exponential", 5.0), 1.5,
                        outputs_cached=False, system_prompts=system_prompts)  # fmt: skip
    instances = 1 if routing == "session-affine" else 3
    q = 1.0 if routing == "session-affine" else 1.0 / instances
    plain = session_cache(w, 60_000.0, instances=instances, routing=routing)
    n = len(w.turns_pmf)
    zero = np.zeros(n)
    t_c = prefill_characteristic_time_s(w, 60_000.0, instances, q, zero, w.prompt_tokens)
    assert t_c == pytest.approx(plain.characteristic_time_s, rel=1e-9)
    hits, ref = PrefillView(w, 60_000.0, instances, q, plain.characteristic_time_s).hits(zero, zero)
    np.testing.assert_allclose(hits, plain.hit_tokens, rtol=1e-9)
    np.testing.assert_allclose(ref, plain.hit_tokens, rtol=1e-9)
    assert (plain.hit_tokens[0] > 0.0) == (system_prompts > 0)  # turn 1 hits the shared system prompt alone


def test_fewer_inserts_lengthen_the_characteristic_time() -> None:
    """Turns placed at random (m̄ = a: the prompts left are the mean's): the prefill cache holds each session's
    older, shorter prompt, so its occupancy is lower at every t and T_C longer; the hits fall all the same."""
    w = SessionWorkload(2.0, geometric_turns(3.1, 12), 0.0, 400.0, 200.0, ThinkTime("exponential", 5.0), 1.5,
                        outputs_cached=False)  # fmt: skip
    n = len(w.turns_pmf)
    placed = np.r_[0.0, np.full(n - 1, 0.5)]
    t_c = prefill_characteristic_time_s(w, 20_000.0, 1, 1.0, placed, prefill_items(w, placed, np.full(n, 400.0)))
    plain = session_cache(w, 20_000.0).characteristic_time_s
    assert t_c > plain
    # turn 2's last prefill-pool turn is turn 1 in both: only the survival differs
    hits, ref = PrefillView(w, 20_000.0, 1, 1.0, plain).hits(placed, np.full(n, 400.0))
    assert hits[1] == pytest.approx(ref[1] * (w.think_time.cdf(t_c - 1.5) / w.think_time.cdf(plain - 1.5)))
    # a capacity that holds every session (T_C far past the gaps): the older prompts alone, fewer hit tokens
    ample = session_cache(w, 1e9).characteristic_time_s
    hits, ref = PrefillView(w, 1e9, 1, 1.0, ample).hits(placed, np.full(n, 400.0))
    assert np.all(hits[2:] < ref[2:])


def _threshold_scenario() -> Any:
    sessions = {
        "turns": {"dist": "fixed", "value": 3},
        "new_tokens": {"dist": "lognormal", "mean": 400, "sigma": 1.0, "max": 8192},
        "output_tokens": {"dist": "fixed", "value": 250},
        "think_time": {"dist": "fixed", "value": 0},
        "system_prompt_tokens": 0,
    }
    cache = {"routing": "affinity", "turn_placement": {"policy": "threshold", "append_threshold_tokens": 256}}
    return sessions_1p2d("ppd-3turn-zero-threshold", sessions, cache, routing="least-work")


@pytest.mark.slow
def test_model_prefill_hit_ratio_three_turns_threshold_by_hand() -> None:
    """3 turns, appends lognormal (mean 400) below 256 tokens on decode (p = P(m < 256), held with certainty), zero
    think time at 5 req/s (T_C far past the two turns' gaps): per session the prefill caches hit (1 − p)·400 on turn
    2 and (1 − p)·((1 − p)·(400 + 250 + ā_P) + p·400) on turn 3, ā_P = E[m | m ≥ 256], against plain
    disaggregation's 400 + 1,050 = 1,450 (p = 0.518, ā_P = 690: 603 tokens, 0.4158 of plain's), over the 6·400 +
    3·250 = 3,150 prompt tokens of the three turns (0.1914; the plain closed form's own ratio, 0.4626 against 1,450 /
    3,150 = 0.4603, carries its prompt bins' 0.5 %)."""
    res = with_cache_rate(resolve(_threshold_scenario(), open_catalog()), 5.0)
    model = build_model(res)
    law = length_pmf(res.cache.reuse.sessions.new_tokens)
    values, prob = np.asarray(law.values, dtype=np.float64), np.asarray(law.prob, dtype=np.float64)
    a = float(prob @ values)
    p = float(prob[values < 256].sum())
    above = (a - float(prob[values < 256] @ values[values < 256])) / (1.0 - p)
    placement = placement_of(model)
    assert placement is not None
    np.testing.assert_allclose(placement.placed, [0.0, p, p], rtol=1e-6)  # every history held
    hits = (1.0 - p) * a + (1.0 - p) * ((1.0 - p) * (a + 250.0 + above) + p * a)
    assert hits == pytest.approx(603.0, abs=1.0)
    pd = res.cache.spec.model_copy(update={"turn_placement": TurnPlacementSpec(policy="pd")})
    plain = build_model(dataclasses.replace(res, cache=dataclasses.replace(res.cache, spec=pd)))
    assert model.cache is not None
    assert plain.cache is not None
    assert plain.cache.token_hit_ratio == pytest.approx((a + 2.0 * a + 250.0) / (6.0 * a + 750.0), rel=6e-3)
    share = model.cache.token_hit_ratio / plain.cache.token_hit_ratio
    assert share == pytest.approx(hits / (a + 2.0 * a + 250.0), rel=1e-4)
    assert placement.prefill_hit_share == pytest.approx(share, rel=1e-9)
    assert model.cache.token_hit_ratio == pytest.approx(hits / (6.0 * a + 750.0), rel=6e-3)


@pytest.mark.slow
def test_model_prefill_hits_keep_how_often_a_turn_hits() -> None:
    """The same three turns: every turn left on the prefill pool but turn 1 finds an earlier prompt of its session
    (zero think time, ample cache), so the prefill side's hit mass is 2(1 − p)/3 of the requests and a hit holds
    603/(2(1 − p)) tokens on average (what it finds is often turn 1's prompt, shorter than plain's previous prompt).
    Scaling the hit mass by ρ_b instead (before issue #24's fix) gave 0.387 of the prefill-side turns where the
    simulator counts 0.491 hitting, the rest priced as full prefills."""
    res = with_cache_rate(resolve(_threshold_scenario(), open_catalog()), 5.0)
    model = build_model(res)
    law = length_pmf(res.cache.reuse.sessions.new_tokens)
    values, prob = np.asarray(law.values, dtype=np.float64), np.asarray(law.prob, dtype=np.float64)
    p = float(prob[values < 256].sum())
    rows = model.bin_prob.reshape(res.lengths.input_tokens.size, -1)  # miss, HBM, decode
    assert rows[:, 1].sum() == pytest.approx(2.0 * (1.0 - p) / 3.0, rel=5e-3)
    assert model.cache is not None
    hit_tokens = float(rows[:, 1] @ model.cache.hit_tokens[:, 1]) / float(rows[:, 1].sum())
    # 1 %: each bin's hit is its turns' mean given the bin (pdplan/serving/session_spread.py), weighed by the resolved
    # prompt law's bins, which put 0.047 on the 3,110-token bin where the session law over the cache model's
    # midpoint edges puts 0.034: plain disaggregation's priced hit per request is 486.9 tokens against the law's
    # 1,450 / 3 = 483.3 (+0.75 %; 483.5 when every bin priced the turn's overall mean)
    assert hit_tokens == pytest.approx(603.0 / (2.0 * (1.0 - p)), rel=1e-2)


@pytest.mark.parametrize("granularity", ["layer", "request"])
def test_placed_prices_at_own_hit_tokens_are_the_model_prices(granularity: str) -> None:
    """pdplan/serving/ppd_prices.py: the plain model's own hit tokens give its own prices (pool, exposed transfer,
    slack), and half the hit tokens cost more prefill on the hit rows."""
    sc = _threshold_scenario().model_copy(update={"granularity": granularity})
    res = with_cache_rate(resolve(sc, open_catalog()), 5.0)
    pd = res.cache.spec.model_copy(update={"turn_placement": TurnPlacementSpec(policy="pd")})
    model = build_model(dataclasses.replace(res, cache=dataclasses.replace(res.cache, spec=pd)))
    assert model.cache is not None
    cfg = transfer_config(res)
    prices = placed_prices(model, model.cache.hit_tokens, cfg)
    np.testing.assert_allclose(prices.point_latency_s, model.pool.point_latency_s, rtol=1e-12)
    np.testing.assert_allclose(prices.point_service_s, model.pool.point_service_s, rtol=1e-12)
    np.testing.assert_allclose(prices.exposed_s, model.exposed_s, rtol=1e-12)
    np.testing.assert_allclose(prices.point_exposed_s, model.point_exposed_s, rtol=1e-12)
    np.testing.assert_allclose(prices.link_slack_s, model.link_slack_s, rtol=1e-12)
    k = res.lengths.input_tokens.size
    fewer = placed_prices(model, model.cache.hit_tokens * 0.5, cfg).point_service_s.reshape(k, 2, -1)[:, 1]
    plain = model.pool.point_service_s.reshape(k, 2, -1)[:, 1]
    assert np.all(fewer >= plain)
    assert np.any(fewer > plain)


@pytest.mark.slow
def test_ppd_leaves_the_unheld_turns_their_prefill_hits() -> None:
    """Policy ppd, geometric turns, 5 s think times: every held Turn 2+ runs on decode, so plain disaggregation's hit
    mass less the placed is nothing; the turns whose history their decode instance no longer holds (1 − held_k) find
    their session's earlier prompt in the prefill cache with probability P_k (ppd_hits.hit_probability), so the
    prefill side's hit mass is Σ_k P(k)·(1 − held_k)·P_k (before issue #24's fix: 0, where the simulator counted
    0.005 of the prompt tokens as hits), P_k with the gaps conditioned on the misses as the model takes them
    (pdplan/serving/ppd_miss.py: 0.0117 of the requests, 0.0121 unconditioned)."""
    sc = _threshold_scenario()
    wl = sc.workload.model_dump(mode="json", exclude_none=True)
    wl["sessions"] |= {"turns": {"dist": "geometric", "mean": 3.1},
                       "think_time": {"dist": "exponential", "mean": 5.0}}  # fmt: skip
    cache = sc.cache.model_copy(update={"turn_placement": TurnPlacementSpec(policy="ppd")})
    sc = sc.model_copy(update={"workload": type(sc.workload).model_validate(wl), "cache": cache})
    res = with_cache_rate(resolve(sc, open_catalog()), 35.0)
    model = build_model(res)
    placement = placement_of(model)
    assert placement is not None
    assert 0.95 < float(placement.held[1]) < 1.0
    view = prefill_view(res, turns_pmf(res.cache.reuse.sessions), 0.017)  # T_C far past the gaps: P_k ≈ F_k ≈ 1
    law = length_pmf(res.cache.reuse.sessions.new_tokens)
    mean_append = float(np.asarray(law.prob) @ np.asarray(law.values, dtype=np.float64))  # ppd places every append
    miss = miss_of(res, placement.rate_rps, placement.free_tokens, placement.domains, placement.held, placement.placed)
    got = view.prefill_hits(placement.placed, np.full(placement.placed.size, mean_append), miss)
    left = placement.turn_share * (1.0 - placement.held)
    left[0] = 0.0
    rows = model.bin_prob.reshape(res.lengths.input_tokens.size, -1)
    assert rows[:, 1].sum() == pytest.approx(float(left @ got.hit_probability), rel=0.02)
    assert model.cache is not None
    assert model.cache.token_hit_ratio > 0.0
