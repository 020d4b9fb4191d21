"""The prompt tokens riding in a chunked step priced at the step's width (pdplan/queueing/chunk_width.py, issue #23).

Hand-worked on a two-piece roofline: ``G(n) = max(W, F·n)`` with a weight read W = 10 ms and F = 40 µs per token,
so the GEMM's compute knee is at n = W/F = 250 tokens. The full-chunk secant the closed form used to charge is
``t_p = (G(2048) − G(1))/2047 = (81.92 − 10) ms/2047 = 35.13 µs`` per token, whatever the step's width.
"""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing.chunk_width import GemmWidth, lower_convex_hull, riding_mean_field, step_price
from pdplan.queueing.chunk_window import chunk_queue
from pdplan.queueing.decode import DecodeWorkload, LinearStepTime
from pdplan.sim.deployment import SimChunkPrice

W_S, F_S = 0.010, 4e-5
TOKENS = np.arange(1.0, 2050.0)
WIDTH = GemmWidth(TOKENS, np.maximum(W_S, F_S * TOKENS))
SECANT = (max(W_S, F_S * 2048.0) - W_S) / 2047.0
BUDGET = 2048.0


def _fixed(prompt: float, steps: float = 100.0) -> DecodeWorkload:
    return DecodeWorkload(np.array([prompt]), np.array([steps]), np.array([1.0]))


def test_secant_hand_worked() -> None:
    secant = (max(W_S, F_S * 2048.0) - W_S) / 2047.0
    assert secant == pytest.approx(35.13e-6, rel=1e-3)


def test_below_the_knee_prompt_tokens_ride_on_the_weight_read() -> None:
    # 100 decodes + 100 prompt tokens: a 200-token step, below the 250-token knee: G(200) − G(100) = 10 − 10 ms = 0
    # (the full-chunk secant charged 100 × 35.13 µs = 3.51 ms)
    assert WIDTH.extra_s(np.array(100.0), np.array(100.0)) == pytest.approx(0.0, abs=1e-15)


def test_across_the_knee_only_the_tokens_past_it_cost() -> None:
    # 100 decodes + 400 prompt tokens: G(500) − G(100) = 20 − 10 ms: the 250 tokens past the knee at 40 µs each
    assert WIDTH.extra_s(np.array(100.0), np.array(400.0)) == pytest.approx(0.010, rel=1e-12)


def test_above_the_knee_each_token_costs_its_compute() -> None:
    # 300 decodes (already compute-bound) + 100 prompt tokens: G(400) − G(300) = 100 × 40 µs = 4 ms
    assert WIDTH.extra_s(np.array(300.0), np.array(100.0)) == pytest.approx(0.004, rel=1e-12)


def test_past_the_table_is_an_error() -> None:
    with pytest.raises(ValueError, match="past the table"):
        WIDTH.extra_s(np.array(2000.0), np.array(100.0))


def test_step_width_of_a_step_that_carries_prompts() -> None:
    # x = 0.5 prompts of 200 tokens arrive per step: given one, 0.5/(1 − e^{−0.5}) = 1.2707 of them, 254.1 tokens;
    # beside 10 decodes: G(264.1) − G(10) = (264.1 × 40 µs − 10 ms) = 0.566 ms, t_p = 0.566 ms/254.1 = 2.23 µs
    t_p, c_s = step_price(np.array([10.0]), np.array([0.5]), 200.0, BUDGET, WIDTH)
    assert c_s[0] == pytest.approx(200.0 * 0.5 / (1.0 - np.exp(-0.5)), rel=1e-12)
    assert c_s[0] == pytest.approx(254.15, abs=0.01)
    assert t_p[0] == pytest.approx((F_S * (10.0 + c_s[0]) - W_S) / c_s[0], rel=1e-9)
    # the room left in the budget caps it: 2,000 decodes leave 48 tokens
    _, capped = step_price(np.array([2000.0]), np.array([0.5]), 200.0, BUDGET, WIDTH)
    assert capped[0] == pytest.approx(48.0)


def test_mean_step_below_the_knee_is_the_decode_step() -> None:
    # λ = 1 req/s, 200-token prompts, 100 decode steps, τ = 10 ms + 0.1 ms·B: u_d = 1 × 0.1 ms × 100 = 0.01; the steps
    # hold N = 1.01 decodes and c_s = 201 prompt tokens, below the knee, so τ̄ = 10 ms/(1 − 0.01) = 10.101 ms
    # (the full-chunk secant gave 10 ms/(0.99 − 200 × 35.13 µs) = 10.173 ms)
    step = LinearStepTime(0.010, 1e-4, 0.0)
    out = riding_mean_field(np.array([1.0]), _fixed(200.0), step, BUDGET, WIDTH, np.zeros(1))
    assert out.s_per_token[0] == 0.0
    assert out.tau_mean_s[0] == pytest.approx(0.010 / 0.99, rel=1e-12)
    old = chunk_queue(np.array([1.0]), _fixed(200.0), step, BUDGET, SECANT, 0.0, np.zeros(1))
    new = chunk_queue(np.array([1.0]), _fixed(200.0), step, BUDGET, SECANT, 0.0, np.zeros(1), width=WIDTH)
    assert old.tau_mean_s[0] == pytest.approx(0.010173, rel=1e-4)
    assert new.tau_mean_s[0] == pytest.approx(0.010 / 0.99, rel=1e-12)


def test_mean_step_above_the_knee_grows_at_the_compute_rate() -> None:
    # λ = 100 req/s, τ = 10 ms + 0.01 ms·B: u_d = 0.1. Past the knee every prompt token costs F = 40 µs, so
    # τ̄ = 10 ms/(1 − 0.1 − 100 × 200 × 40 µs) = 10 ms/0.1 = 100 ms; there N = 100 × 100 × 0.1 = 1,000 decodes (past
    # the knee) and the step carries the budget's remaining c_s = 1,048 tokens: G(2048) − G(1000) = 1,048 × 40 µs.
    # The full-chunk secant (35.13 µs) under-priced these steps: 10 ms/(0.9 − 0.7026) = 50.7 ms.
    step = LinearStepTime(0.010, 1e-5, 0.0)
    out = riding_mean_field(np.array([100.0]), _fixed(200.0), step, BUDGET, WIDTH, np.zeros(1))
    assert out.tau_mean_s[0] == pytest.approx(0.1, rel=1e-9)
    assert out.s_per_token[0] == pytest.approx(F_S, rel=1e-9)
    assert out.decode_tokens[0] == pytest.approx(1000.0, rel=1e-9)
    assert out.step_prompt_tokens[0] == pytest.approx(1048.0, rel=1e-9)


def test_fixed_point_holds_and_attention_stays_additive() -> None:
    # τ̄ = t0 + u_d τ̄ + λτ̄(t_p E[L] + E[A]) at the returned t_p; 2 ms of attention per prompt adds λ·2 ms to the share
    step = LinearStepTime(0.010, 1e-4, 0.0)
    rates = np.array([0.0, 2.0, 5.0, 10.0])
    for attention in (0.0, 0.002):
        out = riding_mean_field(rates, _fixed(1000.0), step, BUDGET, WIDTH, np.array([attention]))
        tau = out.tau_mean_s
        share = rates * 1e-4 * 100.0 + rates * (out.s_per_token * 1000.0 + attention)
        np.testing.assert_allclose(tau, 0.010 + share * tau, rtol=1e-10)
        assert np.all(out.stable)
    assert riding_mean_field(rates[:1], _fixed(1000.0), step, BUDGET, WIDTH, np.zeros(1)).tau_mean_s[0] == 0.010


def test_no_room_in_the_budget_is_unstable() -> None:
    # 2,000 decode steps at 100 req/s: even with free prompts τ̄ ≥ 10 ms/(1 − 100 × 1 µs × 2000) = 12.5 ms, so the
    # decode batch λE[n]τ̄ ≥ 2,500 fills the 2,048-token budget: no fixed point with room for a prompt token
    step = LinearStepTime(0.010, 1e-6, 0.0)
    out = riding_mean_field(np.array([100.0]), _fixed(200.0, 2000.0), step, BUDGET, WIDTH, np.zeros(1))
    assert not out.stable[0]
    assert out.decode_tokens[0] == pytest.approx(BUDGET)  # reported at the edge N = C
    with pytest.raises(ValueError, match="token budget"):
        chunk_queue(np.array([100.0]), _fixed(200.0, 2000.0), step, BUDGET, SECANT, 0.0, np.zeros(1), width=WIDTH)
    # past u_d + u_p = 1 (10 ms/(1 − 0.2 − 0.8)) likewise: 1,000-token prompts at 20 req/s, all past the knee
    hot = riding_mean_field(
        np.array([20.0]), _fixed(1000.0), LinearStepTime(0.010, 1e-4, 0.0), BUDGET, WIDTH, np.zeros(1)
    )
    assert not hot.stable[0]


def test_width_and_drain_prices_are_exclusive() -> None:
    step = LinearStepTime(0.010, 1e-4, 0.0)
    with pytest.raises(ValueError, match="drain_s is None"):
        chunk_queue(np.array([1.0]), _fixed(200.0), step, BUDGET, SECANT, 0.0, np.zeros(1), np.zeros(1), WIDTH)


def test_simulator_prices_the_step_width_its_own_way() -> None:
    # the simulator's integer table of the same G: pieces of an iteration with B decodes cost G(B + Σc) − G(B)
    price = SimChunkPrice(TOKENS[:-1], np.maximum(W_S, F_S * TOKENS[:-1]), np.array([0.0, 1e6]), np.zeros(2))
    none = np.zeros(1)
    assert price(np.array([100.0]), none, 100.0)[0] == pytest.approx(0.0, abs=1e-15)
    assert price(np.array([400.0]), none, 100.0)[0] == pytest.approx(0.010, rel=1e-12)
    assert price(np.array([100.0]), none, 300.0)[0] == pytest.approx(0.004, rel=1e-12)
    # a prefill-only iteration (B = 0): its decode step of none pays the weight read, the pieces G(Σc) − G(1)
    assert price(np.array([400.0]), none, 0.0)[0] == pytest.approx(0.016 - 0.010, rel=1e-12)
    # two pieces share the step's GEMM side by tokens
    np.testing.assert_allclose(price(np.array([100.0, 300.0]), np.zeros(2), 100.0), [0.0025, 0.0075], rtol=1e-12)


def test_tile_waves_are_priced_on_the_convex_envelope() -> None:
    # a staircase G (tile waves: 10 ms up to 128 tokens, 20 ms to 256, 30 ms to 384) has its envelope through the
    # points where each wave is full, (1, 10), (128, 10), (256, 20), (384, 30): flat, then 10 ms per 128 tokens; the
    # price per token no longer jumps with the width (129 tokens: 10 + 10/128 ms, not 20)
    tokens = np.array([1.0, 64.0, 128.0, 129.0, 192.0, 256.0, 257.0, 320.0, 384.0])
    stairs = np.array([10.0, 10.0, 10.0, 20.0, 20.0, 20.0, 30.0, 30.0, 30.0]) * 1e-3
    hull = lower_convex_hull(tokens, stairs)
    np.testing.assert_allclose(hull[[0, 1, 2, 5, 8]], stairs[[0, 1, 2, 5, 8]], rtol=1e-12)
    assert hull[3] == pytest.approx(0.010 + 0.010 / 128.0, rel=1e-12)
    assert hull[4] == pytest.approx(0.015, rel=1e-12)
    assert np.all(hull <= stairs + 1e-15)
    assert np.all(np.diff(np.diff(hull) / np.diff(tokens)) >= -1e-12)  # convex: slopes never fall
