"""Colocated baseline (docs/queueing.md §3): hand-worked means, consistency identities, errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.integrate import quad

from pdplan.queueing import (
    LinearStepTime,
    colocated_distributions,
    decode_workload,
    mg1_wait_distribution,
    tpot_distribution,
)
from pdplan.queueing.arrivals import service_scv
from pdplan.queueing.chunk_window import chunk_queue, gamma_cdf
from pdplan.queueing.colocated_queue import (
    _behind_s,
    _landing_law,
    _landing_row,
    _landing_step,
    _renewal_landing,
    _with_gated_step,
    _with_step_rest,
    colocated_chunked,
)
from pdplan.queueing.components import ComponentMixture
from pdplan.queueing.distributions import WaitDistribution
from pdplan.queueing.gig1 import delay_probability
from pdplan.types import FloatArray

STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)
WL = decode_workload([500.0, 2000.0], [50.0, 200.0], [0.5, 0.5])
S = np.array([0.05, 0.2])  # prefill seconds per bin


def test_prefill_first_by_hand() -> None:
    # E[n] = 125, E[work] = .5(50·500 + 1225) + .5(200·2000 + 19900) = 13112.5 + 209950 = 223062.5
    # λ = 2: u_d = 2(50e-6·125 + 3.9e-8·223062.5) = 2(6.25e-3 + 8.6994e-3) = .0298989
    # ρ_p = 2·.125 = .25 → TPOT̄ = 8e-3/(1 − .25 − .0298989) = 11.10955 ms, τ_p = .75·TPOT̄ = 8.33216 ms
    r = colocated_distributions("prefill-first", [2.0], WL, STEP, prefill_service_s=S)
    assert r.prefill_utilisation[0] == pytest.approx(0.25)
    assert r.decode_utilisation[0] == pytest.approx(2 * (6.25e-3 + 3.9e-8 * 223062.5))
    tbar = 8e-3 / (1 - 0.25 - r.decode_utilisation[0])
    assert r.tpot_mean_s[0] == pytest.approx(tbar)
    assert tbar == pytest.approx(11.10955e-3, rel=1e-6)
    # vacation residual: N = 2·125·TPOT̄ = 2.77739, v = τ_p/2·(1 − e^{−N}) = 3.906948 ms
    # TTFT mean = P-K wait + E[S] + v
    v = 0.75 * tbar / 2 * -np.expm1(-2 * 125 * tbar)
    assert v == pytest.approx(3.906948e-3, rel=1e-6)
    wait = mg1_wait_distribution([2.0], S, WL.prob).mean_s[0]
    assert r.ttft.mean_s[0] == pytest.approx(wait + 0.125 + v)
    # the rest is a wait, uniform on [0, τ_p] while decodes run: E = P-K + v, P(0) = (1 − ρ_p)e^{−N} = .75·.062196
    assert r.ttft.wait.mean_s[0] == pytest.approx(wait + v)
    assert r.ttft.wait.atom[0] == pytest.approx(0.75 * math.exp(-2 * 125 * tbar))
    # group mates: m = (ρ(1 − ρ) + λ²E[S²])/(1 − ρ)² + ρ/(1 − ρ) = (.1875 + .085)/.5625 + 1/3 = .817778
    # one mate's load per step of cell 0 (n = 50): E_j[50(t1 + t2 L_j) + t2·50·49/2]/50
    #   = .5(3.522775e-3 + 6.447775e-3)/50 = 9.97055e-5; cell 1 (n = 200): j = 0 overlaps 50 steps,
    #   j = 1 all 200: .5(3.522775e-3 + 200·1.28e-4 + 3.9e-8·19900)/200 = 7.474719e-5
    #   → mates = [8.15369e-5, 6.11266e-5]; own weight w = t1 + t2(L + (n−1)/2) = [7.04555e-5,
    #   1.318805e-4]; mean step τ_i = t0 + w + u_d TPOT̄ (.332164 ms) + mates = [8.484157, 8.525171] ms
    assert isinstance(r.tpot, ComponentMixture)
    np.testing.assert_allclose(
        r.tpot.comp_mean_s[0, 0] - r.decode_utilisation[0] * tbar, [8.15369e-5, 6.11266e-5], rtol=1e-5
    )
    # stall window: E[W] = 2·.02125/(2·.75) = .0283333, S̃(2) = .5(e^{−.1} + e^{−.4}) = .787579,
    # c_i = S_i + v + (n_i − 1)τ_i = .469631 / 1.900416; E[B] = .125/.75 = 1/6
    # P(Z = 0) = .75 e^{−2c}/S̃ = .372264 / .021286; E[Z] = 2(E[W] + c)E[B] = .165988 / .642916
    np.testing.assert_allclose(r.tpot.weights[0, 0], [0.372264, 0.021286], rtol=1e-4)
    stall = r.tpot.weights[1, 0] * (r.tpot.comp_mean_s[1, 0] - r.tpot.comp_mean_s[0, 0])
    np.testing.assert_allclose(stall * WL.decode_steps, [0.165988, 0.642916], rtol=1e-5)
    # Σ p E[Z] = ρ/(1 − ρ)(E[W] + v + E[S] + E[(n − 1)τ_i]) = .4044522
    assert float(WL.prob @ (stall * WL.decode_steps)) == pytest.approx(0.4044522, rel=1e-6)
    # TPOT mean = t0 + E[w] + u_d TPOT̄ + E[mates] + Σ p E[Z]/n
    # = 8e-3 + .101168e-3 + .332164e-3 + .071332e-3 + .5(3.31976 + 3.21458)e-3 = 11.771833 ms
    assert r.tpot.mean_s[0] == pytest.approx(11.771833e-3, rel=1e-6)


def test_prefill_first_stall_window() -> None:
    # equal prompts (S = .1 s), n = 1 / 10 / 3,000 decode steps, λ = 3 (ρ_p = .3), no context cost
    wl = decode_workload([1000.0] * 3, [1.0, 10.0, 3000.0], [0.4, 0.4, 0.2])
    step = LinearStepTime(8e-3, 50e-6, 0.0)
    r = colocated_distributions("prefill-first", [3.0], wl, step, prefill_service_s=[0.1] * 3)
    tpot = r.tpot
    assert isinstance(tpot, ComponentMixture)
    per_step = tpot.weights[1, 0] * (tpot.comp_mean_s[1, 0] - tpot.comp_mean_s[0, 0])
    tau_p = 0.7 * r.tpot_mean_s[0]
    # n = 1 only sees the busy time its own prompt leaves: P(Z = 0) = (1 − ρ)e^{−λ(S + v)}/e^{−λS}
    v = tau_p / 2 * -np.expm1(-3.0 * float(wl.mean_steps) * r.tpot_mean_s[0])
    assert tpot.weights[0, 0, 0] == pytest.approx(0.7 * np.exp(-3.0 * v))
    # a short request pays that start-up stall over few steps; a long one tends to the mean field,
    # stall per step ρ_p τ/(1 − ρ_p) with τ its own mean step, t0 + w + u_d TPOT̄ + mates (up to the
    # start-up stall over 3,000 steps); ≈ TPOT̄ − τ_p, as τ is τ_p plus small own/mate weights
    assert per_step[0] > per_step[1] > 2 * per_step[2]
    tau = tpot.offset_s[0, 2] + tpot.comp_mean_s[0, 0, 2]
    assert per_step[2] == pytest.approx(0.3 / 0.7 * tau, rel=1e-2)
    assert per_step[2] == pytest.approx(r.tpot_mean_s[0] - tau_p, rel=2e-2)
    # and so a higher P90 per step for short outputs
    q = [
        ComponentMixture.of(
            tpot.offset_s[:, [i]],
            tpot.weights[:, :, [i]],
            tpot.comp_mean_s[:, :, [i]],
            tpot.comp_var_s2[:, :, [i]],
            np.array([1.0]),
            tpot.comp_lo_s[:, :, [i]],
            tpot.comp_hi_s[:, :, [i]],
        ).quantile(0.9)[0]
        for i in range(3)
    ]
    assert q[0] > q[1] > q[2]


def test_prefill_first_reduces_to_decode_at_tiny_prefill() -> None:
    r = colocated_distributions("prefill-first", [2.0], WL, STEP, prefill_service_s=S * 1e-9)
    d = tpot_distribution([2.0], WL, STEP)
    assert r.tpot.quantile(0.9)[0] == pytest.approx(d.quantile(0.9)[0], rel=1e-5)


def test_chunked_identities() -> None:
    kw: dict[str, Any] = {"token_budget": 512.0, "prefill_s_per_token": 6e-5, "attention_s_per_token2": 1e-9}
    r = colocated_distributions("chunked", [0.0, 1.0, 2.0], WL, STEP, **kw)
    # u_p = λ(t_p E[L] + t_a E[L²]/2) = λ(6e-5·1250 + 1e-9·2125000/2) = λ·.0760625
    np.testing.assert_allclose(r.prefill_utilisation, [0.0, 0.0760625, 0.152125])
    np.testing.assert_allclose(r.tpot_mean_s, 8e-3 / (1 - r.decode_utilisation - r.prefill_utilisation))
    # a request's decode starts as its own prompt leaves the chunk queue, which it leaves busy with
    # probability ρ: with equal prompts, short requests (n = 5) see a larger share of chunk steps
    # than long ones (n = 500), whose share tends to the step fraction π (work (u_d + u_p)τ̄ a step)
    assert np.all(r.tpot.load_mean_s[0] == 0.0)
    same = decode_workload([1000.0, 1000.0], [5.0, 500.0], [0.5, 0.5])
    s = colocated_distributions("chunked", [1.0, 2.0], same, STEP, **kw)
    assert np.all(s.tpot.load_mean_s[:, 0] > 1.2 * s.tpot.load_mean_s[:, 1])
    np.testing.assert_allclose(
        s.tpot.load_mean_s[:, 1], (s.decode_utilisation + s.prefill_utilisation) * s.tpot_mean_s, rtol=0.03
    )
    # TTFT at λ → 0: a lone prompt takes ⌈L/C⌉ plain steps of t0 plus its prefill work:
    # L = 500: 8e-3 + 6e-5·500 + 1e-9·500²/2 = .038125; L = 2000: 4·8e-3 + .12 + .002 = .154
    assert r.ttft.mean_s[0] == pytest.approx(0.5 * (0.038125 + 0.154))
    assert np.all(np.diff(r.ttft.quantile(0.9)) > 0)
    assert np.all(np.diff(r.tpot.quantile(0.9)) > 0)


def test_errors() -> None:
    with pytest.raises(ValueError, match="unstable"):
        colocated_distributions("prefill-first", [8.0], WL, STEP, prefill_service_s=S)
    with pytest.raises(ValueError, match="prefill capacity"):
        colocated_distributions("chunked", [7.0], WL, STEP, token_budget=64.0, prefill_s_per_token=1e-5)
    with pytest.raises(ValueError, match="token budget"):
        colocated_distributions("chunked", [20.0], WL, STEP, token_budget=8.0, prefill_s_per_token=1e-6)
    with pytest.raises(ValueError, match="unknown scheduler"):
        colocated_distributions("fcfs", [1.0], WL, STEP)
    with pytest.raises(ValueError, match="needs"):
        colocated_distributions("prefill-first", [1.0], WL, STEP)


def test_gated_step_lattice_sum() -> None:
    """W ≡ 0: W + G is G itself, an atom plus a gamma (the lattice's midpoint masses, to within a cell)."""
    zero = mg1_wait_distribution([0.0], [1.0], [1.0])
    out = _with_gated_step(zero, np.array([0.3]), np.array([0.05]), np.array([0.0005]), 2**14)
    shape, scale = 0.05**2 / 0.0005, 0.0005 / 0.05
    t = np.array([0.02, 0.05, 0.1])
    want = 0.3 + 0.7 * gamma_cdf(t, shape, scale)
    np.testing.assert_allclose(out.cdf(t)[0], want, atol=0.7 * float(out.h_s[0]) * 20.0)
    assert out.atom[0] == 0.3
    assert out.mean_s[0] == pytest.approx(0.7 * 0.05)


def test_chunked_ttft_gated_regime_by_hand() -> None:
    """Short equal prompts, a large budget: every chunk step drains (f_d = ρ, P_d = 1), so a prompt lands in a plain
    or a drain step and the mean TTFT is the gated law's ``τ_p + s + E[T*](1/2 + λs)`` (module docstring) with no
    fluid wait on top (each prompt ahead counted once), weighted by the chance decodes run (else W_f alone)."""
    wl = decode_workload([200.0], [300.0], [1.0])
    t_p, rate = 6e-5, 10.0
    r = colocated_distributions(
        "chunked", [rate], wl, STEP, token_budget=4096.0, prefill_s_per_token=t_p, attention_s_per_token2=0.0
    )
    q = chunk_queue(np.array([rate]), wl, STEP, 4096.0, t_p, 0.0)
    assert q.p_drain[0] == 1.0
    assert q.drain_time[0] == q.rho[0]
    s = t_p * 200.0  # own work, d = t_p m by default
    u_p = rate * s
    tau = float(r.tpot_mean_s[0])
    tau_p = STEP.t0_s + float(r.decode_utilisation[0]) * tau
    var = rate * tau * s**2 / (1.0 - u_p**2)
    t_star = (tau**2 + var) / tau  # the step law's cap at τ_c ≈ 0.25 s is 20 standard deviations out
    n_seqs = rate * 300.0 * tau
    wait_f = mg1_wait_distribution([rate], [200.0 * tau_p / (4096.0 - n_seqs) + s], [1.0]).mean_s[0]
    gated = tau_p + s + -np.expm1(-n_seqs) * t_star * (0.5 + u_p) + np.exp(-n_seqs) * wait_f
    assert float(r.ttft.mean_s[0]) == pytest.approx(gated, rel=2e-3)  # the landing part's mean is a lattice sum


def test_landing_law_caps_the_step_at_a_full_chunk() -> None:
    """``E[min(T, τ_c)²]`` of the gamma step law by quadrature, and the balance that gives the drain step's law
    (prompts that fit a step, a few long enough for the cap to bind: E[T*] 78 ms, τ_c 132 ms)."""
    wl = decode_workload([200.0, 1500.0], [100.0, 100.0], [0.8, 0.2])
    q = chunk_queue(np.array([20.0]), wl, STEP, 2048.0, 6e-5, 1e-9)
    law = _landing_law(q, wl)
    tau, tau_c, rho = float(q.tau_mean_s[0]), float(q.tau_chunk_s[0]), float(q.rho[0])
    t_star = float(_landing_step(q, wl)[0][0])
    var = t_star * tau - tau**2
    k, theta = tau**2 / var, var / tau
    pdf = lambda t: t ** (k - 1.0) * np.exp(-t / theta) / (math.gamma(k) * theta**k)  # noqa: E731
    capped = (quad(lambda t: t**2 * pdf(t), 0.0, tau_c)[0] + tau_c**2 * quad(pdf, tau_c, np.inf)[0]) / tau
    assert capped < 0.98 * t_star
    full = rho - float(q.drain_time[0])
    assert law.full[0] == pytest.approx(full)
    assert law.plain[0] + law.drain[0] + law.full[0] == pytest.approx(1.0)
    drain_star = (capped - (1.0 - rho) * float(q.tau_plain_s[0]) - full * tau_c) / float(q.drain_time[0])
    tau_d = float(q.tau_drain_s[0])
    assert law.drain_shape[0] * law.drain_scale_s[0] == pytest.approx(tau_d)  # mean τ_d
    assert drain_star > tau_d
    assert law.drain_scale_s[0] == pytest.approx(drain_star - tau_d, rel=1e-6)  # variance τ_d(E[T_d*] − τ_d)


def test_renewal_landing_by_hand() -> None:
    """A renewal arrival (c² ≠ 1) finds a chunk step with Whitt's GI/G/1 delay probability π at the chunk queue's ρ and
    its fluid service's c_s² (PASTA's ρ for Poisson): plain share 1 − π, drain and full shares scaled by π/ρ; smooth
    arrivals land in plain steps more often, bursty ones less often. The TTFT mean falls with smooth arrivals and
    rises with bursty ones; Poisson (c² = 1) is the Poisson law itself."""
    wl = decode_workload([200.0, 1500.0], [100.0, 100.0], [0.8, 0.2])
    q = chunk_queue(np.array([20.0]), wl, STEP, 2048.0, 6e-5, 1e-9)
    law = _landing_law(q, wl)
    rho = float(q.rho[0])
    for ca2 in (0.5, 2.5):
        pi = float(delay_probability(rho, ca2, service_scv(q.fluid_service_s[0], wl.prob)))
        seen = _renewal_landing(q, wl, ca2)
        assert seen.plain[0] == pytest.approx(1.0 - pi)
        assert seen.drain[0] == pytest.approx(law.drain[0] * pi / rho)
        assert seen.full[0] == pytest.approx(law.full[0] * pi / rho)
        assert seen.plain[0] + seen.drain[0] + seen.full[0] == pytest.approx(1.0)
        assert (seen.plain[0] > law.plain[0]) == (ca2 < 1.0)
    kw = {"token_budget": 2048.0, "prefill_s_per_token": 6e-5, "attention_s_per_token2": 1e-9}
    mean = {c: colocated_chunked([20.0], wl, STEP, arrival_ca2=c, **kw).ttft.mean_s[0] for c in (0.5, 1.0, 2.5)}
    assert mean[0.5] < mean[1.0] < mean[2.5]


def test_landing_row_matches_monte_carlo() -> None:
    """The lattice of one rate against sampling the same mixture: a plain, a drain and a full landing step, the
    others' work compound Poisson, a full last step with probability 0.2, and an M/D/1 fluid wait."""
    rate, work, prob = 4.0, np.array([0.02, 0.1]), np.array([0.7, 0.3])
    fluid = mg1_wait_distribution([rate], [0.15], [1.0])
    parts = [(t, w, full, rate * t) for t, w, full in [(0.02, 0.4, False), (0.12, 0.35, False), (0.3, 0.25, True)]]
    h, cdf, mean = _landing_row(fluid, parts, work, prob, 0.05, 0.2, 0.0, 2**12)
    rng = np.random.default_rng(7)
    n = 200_000
    kind = rng.choice(3, size=n, p=[0.4, 0.35, 0.25])
    t = np.array([0.02, 0.12, 0.3])[kind]
    rest = rng.uniform(size=n) * t
    w_busy = _sample_md1_busy(rate, 0.15, rng, n)
    wait = np.where(kind == 2, np.maximum(w_busy, rest), rest)
    count = rng.poisson(rate * t)
    draws = rng.choice(work, size=int(count.sum()), p=prob)  # each request's others: its run of ``count`` draws
    others = np.bincount(np.repeat(np.arange(n), count), weights=draws, minlength=n)
    sample = wait + others + np.where(rng.uniform(size=n) < 0.2, 0.05, 0.0)
    grid = np.arange(cdf.size) * h
    for x in np.quantile(sample, [0.25, 0.5, 0.9, 0.99]):
        assert float(np.interp(x, grid, cdf)) == pytest.approx(np.mean(sample <= x), abs=0.01)
    assert mean == pytest.approx(sample.mean(), rel=0.02)


def _sample_md1_busy(rate: float, service: float, rng: np.random.Generator, n: int) -> FloatArray:
    """M/D/1 waits given > 0, by Lindley's recursion ``W' = max(0, W + S − A)`` over a long run, vectorised as the
    running sum less its running minimum (as :func:`support.lindley.round_robin_wait`)."""
    gaps = rng.exponential(1.0 / rate, size=20 * n)
    steps = np.concatenate(([0.0], np.cumsum(service - gaps[1:])))
    w = steps - np.minimum(0.0, np.minimum.accumulate(steps))
    busy = w[w > 0]
    return np.asarray(rng.choice(busy, size=n), dtype=np.float64)


def test_behind_by_hand() -> None:
    """A 2,000-token prompt at c = 509.55 tokens (C = 512 less the decode batch) spends 3 full steps before its last
    chunk of 2000 − 3c = 471.3 tokens: the λ·3τ_c·E[L] tokens arriving meanwhile (at most 4c − 2000) ride in that
    step, e/c each, when it drains (P_d)."""
    q = chunk_queue(np.array([0.0, 2.0]), WL, STEP, 512.0, 6e-5, 1e-9)
    out = _behind_s(q, WL)
    np.testing.assert_allclose(out[0], 0.0)
    c, tau_c, e = float(q.chunk_tokens[1]), float(q.tau_chunk_s[1]), float(q.extra_s[1])
    assert c == pytest.approx(509.554941)
    want = float(q.p_drain[1]) * e / c * min(4.0 * c - 2000.0, 2.0 * 3.0 * tau_c * 1250.0)
    np.testing.assert_allclose(out[1], [0.0, want])


def test_step_rest_by_hand() -> None:
    # W = 0: P(W + V ≤ x) = (1 − b) + b·min(x/τ, 1); b = .5, τ = 4 ms: .5 at 0, .75 at 2 ms, 1 at 4 ms; mean b·τ/2
    zero = WaitDistribution(np.array([1e-3]), np.ones((1, 5)), np.array([1.0]), np.array([0.0]))
    out = _with_step_rest(zero, np.array([0.5]), np.array([4e-3]), 2**10)
    np.testing.assert_allclose(out.cdf(np.array([0.0, 1e-3, 2e-3, 4e-3, 6e-3]))[0], [0.5, 0.625, 0.75, 1.0, 1.0])
    assert out.mean_s[0] == pytest.approx(1e-3)
    assert out.atom[0] == pytest.approx(0.5)
    # W: .5 at 0, .5 uniform on (0, 1 ms]; V = U·2 ms always (b = 1). P(W + V ≤ 1 ms) = .5·P(V ≤ 1) + .5·P(W' + V ≤ 1)
    # = .5·.5 + .5·∫_0^1 (1 − w)/2 dw = .25 + .125 = .375; P(≤ 2 ms) = .5·1 + .5(1 − ∫_0^1 w/2 dw) = .875
    half = WaitDistribution(np.array([1e-3]), np.array([[0.5, 1.0]]), np.array([0.5]), np.array([0.25e-3]))
    out = _with_step_rest(half, np.array([1.0]), np.array([2e-3]), 2**10)
    np.testing.assert_allclose(out.cdf(np.array([0.0, 1e-3, 2e-3, 3e-3]))[0], [0.0, 0.375, 0.875, 1.0])
    assert out.mean_s[0] == pytest.approx(1.25e-3)
    assert out.atom[0] == 0.0
