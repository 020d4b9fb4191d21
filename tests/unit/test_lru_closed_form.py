"""Closed-form LRU hit ratios (pdplan/cache/lru_closed_form.py): the DualPath identity, the think-time laws, limits,
and accuracy against the exact LRU on traces drawn from the same workloads (pdplan/cache/synthetic.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.optimize import brentq

from pdplan.cache.lru_closed_form import (
    SessionWorkload,
    SharedPrefixWorkload,
    ThinkTime,
    _own_hits,
    append_hit_ratio,
    characteristic_time_s,
    gap_sums,
    geometric_turns,
    session_cache,
    shared_prefix_cache,
    zipf_popularity,
)
from pdplan.cache.stack_distance import hit_ratio_curve
from pdplan.cache.synthetic import session_traces, shared_prefix_trace
from pdplan.errors import SpecError

BLOCK = 16


def _sessions(think: ThinkTime, turns: tuple[float, ...] | None = None) -> SessionWorkload:
    return SessionWorkload(
        session_rate_per_s=2.0,
        turns_pmf=turns or geometric_turns(4.0, 30),
        system_tokens=2 * BLOCK,
        append_tokens=2 * BLOCK,
        output_tokens=BLOCK,
        think_time=think,
        turn_duration_s=5.0,
    )


def test_dualpath_identity_is_exact() -> None:
    # docs/mission_features.md §3.1: 32,721-token context, 429-token append -> 32,292 / 32,721
    assert append_hit_ratio(32_721, 429) == 32_292 / 32_721
    assert round(append_hit_ratio(32_721, 429), 3) == 0.987
    # the session model with the history always cached gives the same ratio for that turn
    workload = SessionWorkload(
        session_rate_per_s=1.0,
        turns_pmf=(0.0, 1.0),
        system_tokens=32_721 - 429 - (429 + 176),
        append_tokens=429,
        output_tokens=176,
        think_time=ThinkTime("exponential", 10.0),
        turn_duration_s=1.0,
    )
    second = session_cache(workload, math.inf)
    assert second.prompt_tokens[1] == 32_721
    assert second.hit_tokens[1] / second.prompt_tokens[1] == 32_292 / 32_721


@pytest.mark.parametrize(
    "law", [ThinkTime("exponential", 30.0), ThinkTime("lognormal", 30.0, 0.8), ThinkTime("erlang", 30.0, 3.0)]
)
def test_think_time_laws_match_numerical_integration(law: ThinkTime) -> None:
    def density(z: float) -> float:
        h = 1e-5 * law.mean_s
        return (law.cdf(z + h) - law.cdf(max(z - h, 0.0))) / (2 * h)

    for t in (5.0, 30.0, 120.0):
        numeric, _ = integrate.quad(lambda z, t=t: min(t, z) * density(z), 0, 40 * law.mean_s, limit=400)
        assert law.mean_min(t) == pytest.approx(numeric, rel=2e-3)
    assert law.mean_min(math.inf) == law.mean_s
    assert law.cdf(0.0) == 0.0
    assert law.mean_min(0.0) == 0.0


def test_sums_of_think_times() -> None:
    rng = np.random.default_rng(0)
    exp3 = ThinkTime("exponential", 10.0).sum_of(3)
    assert exp3.kind == "erlang"
    assert exp3.mean_s == 30.0
    samples = rng.exponential(10.0, (200_000, 3)).sum(axis=1)
    assert exp3.cdf(25.0) == pytest.approx(np.mean(samples < 25.0), abs=0.005)
    assert ThinkTime("fixed", 7.0).sum_of(2).mean_s == 14.0
    assert ThinkTime("erlang", 10.0, 2.0).sum_of(2).sigma == 4.0
    lognormal = ThinkTime("lognormal", 10.0, 1.0).sum_of(4)  # Fenton-Wilkinson: mean and variance kept
    assert lognormal.mean_s == 40.0
    assert math.exp(lognormal.sigma**2) - 1 == pytest.approx((math.exp(1.0) - 1) / 4)
    assert ThinkTime("fixed", 5.0).cdf(4.0) == 0.0
    assert ThinkTime("fixed", 5.0).cdf(5.0) == 1.0


@pytest.mark.parametrize(
    "law",
    [
        ThinkTime("exponential", 45.0),
        ThinkTime("erlang", 20.0, 3.0),
        ThinkTime("lognormal", 30.0, 1.2),
        ThinkTime("fixed", 11.6),
    ],
)
@pytest.mark.parametrize("duration_s", [0.0, 4.0])
def test_gap_sums_are_each_law_evaluated_alone(law: ThinkTime, duration_s: float) -> None:
    """The gap sums evaluated an array at a time give, bit for bit, what each m-gap law gives alone."""
    workload = dataclasses.replace(_sessions(law), turn_duration_s=duration_s)
    depth = len(workload.turns_pmf)
    for t in (0.5, 7.0, 60.0, 333.3, 5000.0):
        cdf, mean_min = gap_sums(workload, t, depth)
        for i in range(depth):
            m = i + 1
            shifted = t - m * duration_s
            one = law.sum_of(m)
            assert cdf[i] == (one.cdf(shifted) if shifted > 0 else 0.0)
            assert mean_min[i] == (m * duration_s + one.mean_min(shifted) if shifted > 0 else min(t, m * duration_s))


def test_one_turn_sessions_never_hit_and_infinite_capacity_always_hits() -> None:
    one_turn = session_cache(_sessions(ThinkTime("exponential", 60.0), (1.0,)), 1e9)
    assert one_turn.token_hit_ratio == 0.0
    assert one_turn.hit_probability.tolist() == [0.0]
    everything = session_cache(_sessions(ThinkTime("exponential", 60.0)), math.inf)
    assert math.isinf(everything.characteristic_time_s)
    assert np.all(everything.hit_probability[1:] == 1.0)
    nothing = session_cache(_sessions(ThinkTime("exponential", 60.0)), 0.0)
    assert nothing.token_hit_ratio == 0.0


def test_routing() -> None:
    workload = _sessions(ThinkTime("exponential", 60.0))
    one = session_cache(workload, 5e4, instances=1, routing="random")
    affine = session_cache(workload, 5e4, instances=1, routing="session-affine")
    assert one.token_hit_ratio == pytest.approx(affine.token_hit_ratio)
    spread = session_cache(workload, 5e4, instances=4, routing="random")
    previous_only = session_cache(workload, 5e4, instances=4, routing="random", partial_hits=False)
    assert previous_only.token_hit_ratio <= spread.token_hit_ratio
    # the previous turn's instance only: at most 1/N of the affine hit probability
    assert previous_only.hit_probability[1] <= 0.25 + 1e-12
    with pytest.raises(SpecError, match="instances"):
        session_cache(workload, 1.0, instances=0)


def test_characteristic_time_solver() -> None:
    assert characteristic_time_s(lambda t: 2 * t, 10.0, math.inf) == pytest.approx(5.0)
    assert characteristic_time_s(lambda t: 2 * t, 0.0, math.inf) == 0.0
    assert math.isinf(characteristic_time_s(lambda t: min(t, 3.0), 3.0, 3.0))


def test_characteristic_time_evaluates_each_time_once_and_finds_the_same_root() -> None:
    """The bracket's values are reused, not evaluated again; the root is, bit for bit, SciPy's brentq on the bracket
    [0, 4^k] with 4^k the smallest power of 4 where the occupancy reaches the capacity."""
    times: list[float] = []

    def occupancy(t: float) -> float:
        times.append(t)
        return 3e4 * -math.expm1(-t / 700.0) + 2.5 * t

    for capacity in (1e-3, 0.7, 10.0, 2.9e4, 1e6):
        times.clear()
        root = characteristic_time_s(occupancy, capacity, math.inf)
        assert len(times) == len(set(times))
        high = 4.0 ** min(k for k in range(-40, 40) if occupancy(4.0**k) >= capacity)
        expected = brentq(lambda t, c=capacity: occupancy(t) - c, 0.0, high, xtol=1e-9 * high, rtol=1e-12)
        assert root == expected


def test_session_cache_is_memoised_by_value_not_identity() -> None:
    first = session_cache(_sessions(ThinkTime("lognormal", 30.0, 1.2)), 5e4, instances=2)
    again = session_cache(_sessions(ThinkTime("lognormal", 30.0, 1.2)), 5e4, instances=2)  # an equal, new workload
    assert again is first
    faster = session_cache(
        dataclasses.replace(_sessions(ThinkTime("lognormal", 30.0, 1.2)), session_rate_per_s=4.0), 5e4, instances=2
    )
    assert faster.characteristic_time_s < first.characteristic_time_s  # a changed value is a new answer
    assert session_cache(_sessions(ThinkTime("lognormal", 30.0, 1.2)), 5e4, instances=3) is not first
    with pytest.raises(ValueError, match="read-only"):
        first.hit_tokens[1] = 0.0  # shared by every caller: nobody may change it


def test_own_hits_are_the_prefix_sums() -> None:
    rng = np.random.default_rng(7)
    history = np.cumsum(rng.uniform(100.0, 900.0, 40))
    one_landing = np.r_[rng.uniform(), np.zeros(39)]  # session-affine: only the previous turn's landing is found
    for found in (one_landing, rng.uniform(0.0, 0.2, 40)):
        own_hit, own_tokens = _own_hits(found, history)
        for k in range(40):
            assert own_hit[k] == np.sum(found[:k])
            assert own_tokens[k] == np.sum(found[:k] * history[:k][::-1])


def test_shared_prefixes_limits() -> None:
    lengths = (100.0, 200.0, 300.0)
    full = SharedPrefixWorkload(10.0, lengths, zipf_popularity(3, 1.0), question_tokens=0.0, output_tokens=0.0)
    assert shared_prefix_cache(full, 600.0).hit_probability.tolist() == [1.0, 1.0, 1.0]
    result = shared_prefix_cache(full, 300.0)
    rates = 10.0 * np.asarray(full.popularity)
    assert result.hit_probability == pytest.approx(1 - np.exp(-rates * result.characteristic_time_s))
    assert sum(zipf_popularity(50, 1.2)) == pytest.approx(1.0)
    assert zipf_popularity(4, 0.0) == (0.25, 0.25, 0.25, 0.25)


@pytest.mark.parametrize("bad", [{"turns_pmf": (0.5, 0.4)}, {"session_rate_per_s": 0.0}, {"system_tokens": -1.0}])
def test_bad_session_workloads(bad: dict[str, object]) -> None:
    kwargs: dict[str, object] = {
        "session_rate_per_s": 1.0,
        "turns_pmf": (1.0,),
        "system_tokens": 0.0,
        "append_tokens": 1.0,
        "output_tokens": 1.0,
        "think_time": ThinkTime("fixed", 1.0),
        "turn_duration_s": 0.0,
    }
    with pytest.raises(SpecError):
        SessionWorkload(**{**kwargs, **bad})  # type: ignore[arg-type]


def test_a_lognormal_think_time_needs_a_shape() -> None:
    with pytest.raises(SpecError, match="sigma"):
        ThinkTime("lognormal", 1.0)


def test_bad_shared_prefix_workload() -> None:
    with pytest.raises(SpecError, match="popularity"):
        SharedPrefixWorkload(1.0, (1.0, 2.0), (0.5, 0.6), 1.0, 1.0)


@pytest.mark.parametrize("law", [ThinkTime("exponential", 60.0), ThinkTime("lognormal", 60.0, 1.0)])
@pytest.mark.parametrize(("routing", "instances"), [("session-affine", 1), ("random", 4)])
def test_sessions_close_to_exact_lru(law: ThinkTime, routing: str, instances: int) -> None:
    """The documented accuracy (docs/prefix_cache.md §5): within 0.03 of the exact LRU on about 120,000 turns."""
    workload = _sessions(law)
    traces = session_traces(workload, 30_000, BLOCK, instances=instances, routing=routing, seed=3)  # type: ignore[arg-type]
    curves = [hit_ratio_curve(t) for t in traces]
    total = sum(c.total_tokens for c in curves)
    for blocks in (1000, 2000, 5000, 10000):
        exact = sum(c.hit_tokens_at(blocks).item() for c in curves) / total
        closed = session_cache(workload, blocks * BLOCK, instances=instances, routing=routing)  # type: ignore[arg-type]
        assert closed.token_hit_ratio == pytest.approx(exact, abs=0.03)


def test_shared_prefixes_close_to_exact_lru() -> None:
    lengths = tuple(float(BLOCK * (1 + j % 8)) for j in range(500))
    workload = SharedPrefixWorkload(10.0, lengths, zipf_popularity(500, 1.0), BLOCK, BLOCK)
    curve = hit_ratio_curve(shared_prefix_trace(workload, 50_000, BLOCK, seed=2))
    total_blocks = sum(lengths) / BLOCK
    for fraction in (0.05, 0.2, 0.5, 1.0):
        exact = curve.token_hit_ratio(fraction * total_blocks).item()
        closed = shared_prefix_cache(workload, fraction * total_blocks * BLOCK).token_hit_ratio
        assert closed == pytest.approx(exact, abs=0.03)


def test_resent_questions_hand_worked() -> None:
    """One prefix of 100 tokens and U = 2 questions of 50 tokens resent in turn, outputs of 10, 1 request/s.

    W(T) = 100 (1 − e^{−T}) + 2·50·[(T/2)(1 − F_2(T)) + F_3(T)] + 10 T (module docstring, *Resent questions*). At
    T = 2 s: F_2(2) = 1 − 3e^{−2} = 0.593994, F_3(2) = 1 − 5e^{−2} = 0.323324, so W = 86.4665 + 100·(0.406006 +
    0.323324) + 20 = 179.40 tokens; a cache of that size has T_C = 2 s, finds the prefix with 1 − e^{−2} = 0.864665
    and the whole prompt with F_2(2) = 0.593994 (a question recurs every second request of its prefix: Erlang-2
    gaps)."""
    work = SharedPrefixWorkload(1.0, (100.0,), (1.0,), 50.0, 10.0, questions_per_prefix=2)
    e2 = math.exp(-2.0)
    capacity = 100.0 * (1 - e2) + 100.0 * ((1 - (1 - 3 * e2)) + (1 - 5 * e2)) + 20.0
    assert capacity == pytest.approx(179.40, abs=0.01)
    res = shared_prefix_cache(work, capacity)
    assert res.characteristic_time_s == pytest.approx(2.0, rel=1e-9)
    assert res.hit_probability.tolist() == pytest.approx([1 - e2])
    assert res.prompt_hit_probability.tolist() == pytest.approx([1 - 3 * e2])
    assert res.token_hit_ratio == pytest.approx((100 * (1 - e2) + 50 * (1 - 3 * e2)) / 150.0)
    # U = 1 is the prompt resent with its prefix: the exponential case, the whole prompt with the prefix's probability
    one = shared_prefix_cache(dataclasses.replace(work, questions_per_prefix=1), 120.0)
    assert one.prompt_hit_probability == pytest.approx(one.hit_probability, rel=1e-12)
    # new questions: the whole prompt is never cached
    new = shared_prefix_cache(dataclasses.replace(work, questions_per_prefix=None), 120.0)
    assert new.prompt_hit_probability[0] == 0
    # a cache that holds every prefix and question: all of it hits
    assert shared_prefix_cache(dataclasses.replace(work, output_tokens=0.0), 200.0).token_hit_ratio == 1.0


@pytest.mark.parametrize("questions", [1, 4, 10])
def test_resent_questions_close_to_exact_lru(questions: int) -> None:
    """The Erlang-gap Che form against an exact LRU over a trace that resends prefix j's k-th question k mod U: within
    0.02 of the token hit ratio at every size (recorded: at most +0.020 for U = 1, +0.009 for U = 4, 10)."""
    lengths = tuple(float(BLOCK * (1 + j % 8)) for j in range(50))
    workload = SharedPrefixWorkload(10.0, lengths, zipf_popularity(50, 1.0), 4 * BLOCK, 2 * BLOCK, questions)
    curve = hit_ratio_curve(shared_prefix_trace(workload, 60_000, BLOCK, seed=2))
    total_blocks = (sum(lengths) + 50 * questions * 4 * BLOCK) / BLOCK
    for fraction in (0.05, 0.2, 0.5, 1.0):
        exact = curve.token_hit_ratio(fraction * total_blocks).item()
        closed = shared_prefix_cache(workload, fraction * total_blocks * BLOCK).token_hit_ratio
        assert closed == pytest.approx(exact, abs=0.025)


def test_resent_questions_need_one_or_more() -> None:
    with pytest.raises(SpecError, match="questions_per_prefix"):
        SharedPrefixWorkload(1.0, (10.0,), (1.0,), 16.0, 16.0, questions_per_prefix=0)


def test_synthetic_traces_need_whole_blocks() -> None:
    workload = SharedPrefixWorkload(1.0, (10.0,), (1.0,), 16.0, 16.0)
    with pytest.raises(SpecError, match="whole blocks"):
        shared_prefix_trace(workload, 10, 16)
    fixed = _sessions(ThinkTime("fixed", 30.0))
    traces = session_traces(fixed, 50, BLOCK)
    assert len(traces) == 1
    assert traces[0].n_requests > 50


def _shared_system(turns: tuple[float, ...], prompts: int, think_s: float = 10.0) -> SessionWorkload:
    """1 session/s, a 1,000-token system prompt shared by the sessions (``prompts`` of them), 500 new tokens and
    100 output tokens a turn, a fixed think time and no turn duration."""
    think = ThinkTime("fixed", think_s)
    return SessionWorkload(1.0, turns, 1000.0, 500.0, 100.0, think, 0.0, system_prompts=prompts)


@pytest.mark.parametrize(("prompts", "rate_per_s"), [(1, 1.0), (2, 0.5)])
def test_one_turn_sessions_hit_their_shared_system_prompt(prompts: int, rate_per_s: float) -> None:
    # one turn a session: no history is reused, each stays T; the D system prompts are reached at 1/D s^-1 each:
    # W(T) = 1 s^-1 · (1,600 − 1,000)·T + D · 1,000 · (1 − e^{−T/D}). At T = 2 s: 1,200 + D·1,000·(1 − e^{−2/D}),
    # so that capacity gives T_C = 2 s and turn 1 (prompt 1,500) hits 1,000·(1 − e^{−2/D}) tokens
    hit = -math.expm1(-2.0 * rate_per_s)
    capacity = 1200.0 + prompts * 1000.0 * hit
    result = session_cache(_shared_system((1.0,), prompts), capacity)
    assert result.characteristic_time_s == pytest.approx(2.0, rel=1e-9)
    assert result.hit_probability[0] == pytest.approx(hit, rel=1e-9)
    assert result.hit_tokens[0] == pytest.approx(1000.0 * hit, rel=1e-9)
    assert result.token_hit_ratio == pytest.approx(1000.0 * hit / 1500.0, rel=1e-9)
    # without sharing (each session's system prompt its own) a one-turn session never hits
    alone = session_cache(dataclasses.replace(_shared_system((1.0,), prompts), system_prompts=0), capacity)
    assert alone.token_hit_ratio == 0.0


def test_a_turn_whose_history_is_gone_still_hits_the_system_prompt() -> None:
    # two turns 10 s apart; the histories' own parts: H_1 − S = 600 (refreshed by turn 2: min(T, 10)), H_2 − S =
    # 1,200 (stays T); the system prompt is reached at E[n] = 2 s^-1. W(T) = 600·min(T, 10) + 1,200·T +
    # 1,000·(1 − e^{−2T}). Prompts: turn 1 1,500, turn 2 H_1 + 500 = 2,100.
    workload = _shared_system((0.0, 1.0), 1)
    # T_C = 5 s < 10 s: turn 2's history is gone, both turns hit the system prompt only (h_S = 1 − e^{−10})
    h_s = -math.expm1(-10.0)
    short = session_cache(workload, 1800.0 * 5.0 + 1000.0 * h_s)
    assert short.characteristic_time_s == pytest.approx(5.0, rel=1e-9)
    assert short.hit_tokens.tolist() == pytest.approx([1000.0 * h_s, 1000.0 * h_s], rel=1e-9)
    assert short.history_hit_probability.tolist() == [0.0, 0.0]
    assert short.token_hit_ratio == pytest.approx(2000.0 * h_s / 3600.0, rel=1e-9)
    # T_C = 20 s: turn 2 finds its whole history H_1 = 1,600, system prompt included
    h_s = -math.expm1(-40.0)
    long = session_cache(workload, 6000.0 + 24_000.0 + 1000.0 * h_s)
    assert long.characteristic_time_s == pytest.approx(20.0, rel=1e-9)
    assert long.hit_tokens.tolist() == pytest.approx([1000.0 * h_s, 1600.0], rel=1e-9)
    assert long.token_hit_ratio == pytest.approx((1000.0 * h_s + 1600.0) / 3600.0, rel=1e-9)


def test_mean_min_array_is_mean_min_element_by_element() -> None:
    """The array form (pdplan/serving/ppd_miss.py's grids) gives the scalar form's E[min(Z, t)] for every law."""
    t = np.array([0.0, 0.3, 2.0, 7.5, 40.0])
    laws = (
        ThinkTime("exponential", 5.0),
        ThinkTime("fixed", 5.0),
        ThinkTime("erlang", 5.0, 3.0),
        ThinkTime("lognormal", 5.0, 0.8),
    )
    for law in laws:
        want = [law.mean_min(float(x)) for x in t]
        assert law.mean_min_array(t) == pytest.approx(want, rel=1e-12, abs=1e-15), law.kind
