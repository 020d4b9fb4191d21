"""Chunked colocated pieces (pdplan.queueing.chunk_window, .components): hand-worked numbers,
limits and a fluid M/G/1 Monte Carlo of the departure-started decode window."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import gammainc

from pdplan.queueing import GammaMixture, LinearStepTime, decode_workload
from pdplan.queueing.chunk_window import (
    ChunkQueue,
    _alternation,
    _drain_counts,
    _drain_rho,
    _gamma_p012,
    _idle_start_var,
    _remaining_busy,
    busy_left,
    chunk_queue,
    wait_moments,
    window_components,
)
from pdplan.queueing.components import ComponentMixture

STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)
WL = decode_workload([500.0, 2000.0], [50.0, 200.0], [0.5, 0.5])


def test_chunk_queue_by_hand() -> None:
    q = chunk_queue(np.array([0.0, 2.0]), WL, STEP, 512.0, 6e-5, 1e-9)
    # λ = 0: c = C = 512, τ_p = t0, e = 512(6e-5 + 1e-9·E[L²]/(2E[L])) = 512·6.085e-5 = .0311552
    assert q.chunk_tokens[0] == 512.0
    assert q.tau_chunk_s[0] == pytest.approx(8e-3 + 0.0311552)
    # lone prompts: ⌈L/C⌉·t0 + t_p L + t_a L²/2
    np.testing.assert_allclose(q.service_s[0], [0.038125, 0.154])
    assert q.rho[0] == 0.0
    # λ = 2: u_d = .029898875, u_p = .152125, τ̄ = 8e-3/(1 − .182023875) = 9.780237e-3,
    # N = 2·125·τ̄ = 2.445059, c = 509.554941, τ_p = t0 + u_d τ̄ = 8.292418e-3,
    # e = c·6.085e-5 = .031006418, τ_c = .039298836, ρ_f = λE[L]τ_c/c = .192809612
    assert q.tau_mean_s[1] == pytest.approx(9.780236556e-3)
    assert q.tau_plain_s[1] == pytest.approx(8.292418070e-3)
    assert q.tau_chunk_s[1] == pytest.approx(0.039298836222)
    assert q.rho_fluid[1] == pytest.approx(0.192809612224)
    # drain: m_L = (500, 2000 − 3·512 = 464), m̄ = 482; x = λτ_p = .016584836, g = (1 − e^{−x})/x = .991753235;
    # drain step τ_d = τ_p + (b/a)·m̄·6.085e-5 with a = g e^{λτ_d}, b = 1 + gλτ_d e^{λτ_d}, solved by iteration:
    # λτ_d = .075860975, a = 1.069915869, b = 1.081164861; σ̄ = m̄τ_p/c = 7.843993e-3 (d = t_p m: no GEMM saving),
    # κ = λ(aτ_p − bσ̄) = 7.830796e-4, ρ = (ρ_f + κ)/(1 + κ) = .193441212, P_d = (1 − ρ)b = .872023020
    assert q.rho[1] == pytest.approx(0.193441212, rel=1e-8)
    waste = q.tau_plain_s[1] * (1.0 - np.array([500.0, 464.0]) / q.chunk_tokens[1])
    np.testing.assert_allclose(q.service_s[1] - q.fluid_service_s[1], 0.872023020 * waste, rtol=1e-8)
    assert q.p_drain[1] == pytest.approx(0.872023020, rel=1e-8)
    # τ_d = .075860975/λ; drain steps take f_d = λ(1 − ρ)aτ_d = 2·.806558788·1.069915869·.0379304875 of the time,
    # the rest of ρ is in full steps; λ = 0: every prompt alone in a drain step
    assert q.tau_drain_s[1] == pytest.approx(0.075860975 / 2.0, rel=1e-8)
    assert q.drain_time[1] == pytest.approx(0.0654642319, rel=1e-8)
    assert q.p_drain[0] == 1.0
    assert float(q.rate[1] * q.fluid_service_s[1] @ WL.prob) == pytest.approx(q.rho_fluid[1])


def _md1(rate: float = 0.5, service: float = 1.0, tau_plain: float = 0.25) -> ChunkQueue:
    """A one-bin chunk queue with deterministic service (M/D/1), τ_c = 1 s = one chunk step."""
    one = np.array([1.0])
    s = np.array([[service]])
    return ChunkQueue(
        rate=np.array([rate]),
        u_decode=0 * one,
        u_prefill=one * rate * service,
        tau_mean_s=one,
        tau_plain_s=tau_plain * one,
        tau_chunk_s=one,
        chunk_tokens=one,
        rho=np.array([rate * service]),
        service_s=s,
        rho_fluid=np.array([rate * service]),
        fluid_service_s=s,
        p_drain=one,
        drain_time=np.array([rate * service]),
        tau_drain_s=one,
    )


def test_remaining_busy_md1_by_hand() -> None:
    q, prob = _md1(), np.array([1.0])
    w1, w2 = wait_moments(q, prob)
    # P-K with S = 1, λ = .5: E[W] = .5/(2·.5) = .5, E[W²] = 2·.25 + .5/(3·.5) = .8333
    assert w1[0] == pytest.approx(0.5)
    assert w2[0] == pytest.approx(0.5 + 1.0 / 3.0)
    p0, shape, scale = _remaining_busy(q, prob, w1, w2)
    # one bin: P(N = 0) = (1 − ρ)e^{−λS}/S̃(λ) = 1 − ρ = .5
    # E[N] = λ(E[W] + S) = .75, E[N(N−1)] = λ²(E[W²] + 2E[W]S + S²) = .25·2.8333 = .708333
    # E[B] = S/(1 − ρ) = 2, E[B²] = S²/(1 − ρ)³ = 8: E[R] = 1.5, E[R²] = 6 + .708333·4 = 8.833333
    # given R > 0: m1 = 3, m2 = 17.666667, var = 26/3 → shape 9/(26/3) = 27/26, scale 26/9
    assert p0[0, 0] == pytest.approx(0.5)
    assert shape[0, 0] == pytest.approx(27.0 / 26.0)
    assert scale[0, 0] == pytest.approx(26.0 / 9.0)


def test_busy_left_longer_window_by_hand() -> None:
    # M/D/1, S = 1, λ = .5 (E[W] = .5, E[W²] = .8333), window c = S + 2 (the prefill-first decode
    # window of 3 steps of τ_p = 1): P(Z = 0) = (1 − ρ)e^{−λc}/e^{−λS} = .5e^{−1} = .18394
    # E[N] = λ(E[W] + c) = 1.75, E[N(N−1)] = λ²(E[W²] + 2E[W]c + c²) = .25(.8333 + 3 + 9) = 3.2083
    # E[Z] = 1.75·2 = 3.5, E[Z²] = 1.75·8 + 3.2083·4 = 26.8333; given Z > 0: m1 = 3.5/.81606 = 4.2889
    # var = 26.8333/.81606 − 4.2889² = 14.4869
    one = np.array([1.0])
    p0, m1, var = busy_left(0.5 * one, 0.5 * one, one, one, np.array([[3.0]]), 0.5 * one, (0.5 + 1.0 / 3.0) * one)
    z = 1.0 - 0.5 * math.exp(-1.0)
    assert p0[0, 0] == pytest.approx(0.5 * math.exp(-1.0))
    assert m1[0, 0] == pytest.approx(3.5 / z)
    assert var[0, 0] == pytest.approx((14.0 + 0.25 * (0.5 + 1 / 3 + 3 + 9) * 4) / z - (3.5 / z) ** 2)
    assert var[0, 0] == pytest.approx(14.4869, rel=1e-4)


def test_departures_leave_the_queue_empty_with_probability_one_minus_rho() -> None:
    q = chunk_queue(np.array([1.0, 3.0]), WL, STEP, 512.0, 6e-5, 1e-9).fluid()
    p0, _, _ = _remaining_busy(q, WL.prob, *wait_moments(q, WL.prob))
    np.testing.assert_allclose(p0 @ WL.prob, 1.0 - q.rho)
    assert p0[0, 0] > p0[0, 1]  # longer own prefill: more arrivals behind it


def test_alternation_by_hand() -> None:
    # a = 1/(λτ_p) = 1/(.5·.25) = 8 idle steps, b = E[B]/τ_c = 2, b₂ = 8, μ = 10:
    # p = b/μ = .2, θ = a·b₂/(2μb) = 64/40 = 1.6
    a, p, theta = _alternation(_md1(), np.array([1.0]))
    assert a[0, 0] == pytest.approx(8.0)
    assert p[0, 0] == pytest.approx(0.2)
    assert theta[0, 0] == pytest.approx(1.6)


def test_idle_start_variance() -> None:
    p, theta = np.array(0.2), np.array(1.6)
    # exact double integral of the two-state covariance (started off) at m = 3
    m = 3.0
    s = np.linspace(0.0, m, 1201)
    ss, tt = np.meshgrid(s, s, indexing="ij")
    lo, hi = np.minimum(ss, tt), np.maximum(ss, tt)
    cov = p * (1 - np.exp(-lo / theta)) * ((1 - p) * np.exp(-(hi - lo) / theta) + p * np.exp(-hi / theta))
    direct = np.trapezoid(np.trapezoid(cov, s, axis=1), s)
    assert float(_idle_start_var(np.array(m), p, theta)) == pytest.approx(direct, rel=1e-4)
    # limits: p m³/(3θ) for m ≪ θ, slope 2p(1 − p)θ for m ≫ θ
    small = float(_idle_start_var(np.array(1e-2), p, theta))
    assert small == pytest.approx(0.2 * 1e-6 / (3 * 1.6), rel=1e-2)
    big = _idle_start_var(np.array([1e4, 2e4]), p, theta)
    assert float(big[1] - big[0]) / 1e4 == pytest.approx(2 * 0.2 * 0.8 * 1.6, rel=1e-6)


def test_gamma_recurrence() -> None:
    a = np.array([0.3, 1.0, 2.5, 7.0])
    x = np.array([0.05, 1.0, 3.0, 20.0])
    p0, p1, p2 = _gamma_p012(a, x)
    np.testing.assert_allclose(p0, gammainc(a, x))
    np.testing.assert_allclose(p1, gammainc(a + 1, x), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(p2, gammainc(a + 2, x), rtol=1e-10, atol=1e-15)


def test_window_components_limits() -> None:
    wl = decode_workload([500.0, 2000.0, 500.0], [1.0, 20.0, 5000.0], [0.4, 0.4, 0.2])
    q = chunk_queue(np.array([0.0, 1.5]), wl, STEP, 512.0, 6e-5, 1e-9)
    win = window_components(q, wl)
    np.testing.assert_allclose(win.weights.sum(axis=0), 1.0)
    np.testing.assert_allclose(win.weights[0, 0], 1.0)  # no load: no chunk ever
    assert np.all((win.mean >= 0) & (win.mean <= 1))
    assert np.all(win.var <= win.mean * (1 - win.mean) + 1e-15)
    # n = 1 sees a chunk step iff its prompt left work behind: all ≈ 1 − P₀ (up to a prompt
    # arriving in its one plain step, idle start)
    fq = q.fluid()
    p0, _, _ = _remaining_busy(fq, wl.prob, *wait_moments(fq, wl.prob))
    assert win.weights[3, 1, 0] + win.weights[2, 1, 0] == pytest.approx(1.0 - p0[1, 0])
    # a very long window averages to the stationary chunk-step fraction π = λE[L]τ̄/c
    mean_f = float(win.weights[:, 1, 2] @ win.mean[:, 1, 2])
    pi = 1.5 * float(wl.prob @ wl.input_tokens) * q.tau_mean_s[1] / q.chunk_tokens[1]
    assert mean_f == pytest.approx(pi, rel=0.01)


def _fluid_mg1_windows(
    lam: float, service: np.ndarray, tau_p: float, steps: int, rng: np.random.Generator, count: int
) -> np.ndarray:
    """Chunk-step fraction of the ``steps`` decode steps after each departure of a FCFS M/G/1
    (time in chunk-step units: a busy second holds one chunk step, an idle one 1/τ_p steps)."""
    arr = np.cumsum(rng.exponential(1.0 / lam, count))
    s = rng.choice(service, size=count)
    dep = np.empty(count)
    t = 0.0
    for j in range(count):
        t = max(t, arr[j]) + s[j]
        dep[j] = t
    start = np.r_[True, arr[1:] > dep[:-1]]
    b0, b1 = arr[start], dep[np.r_[start[1:], True]]
    out = np.empty(count - 200)
    for j in range(200, count):
        t, k, left, busy = dep[j], int(np.searchsorted(b1, dep[j], side="right")), float(steps), 0.0
        while left > 0 and k < b0.size:
            if b0[k] <= t:  # inside busy stretch k: one step per unit time
                run = min(b1[k] - t, left)
                busy, left, t, k = busy + run, left - run, b1[k], k + 1
            else:
                gap = min((b0[k] - t) / tau_p, left)
                left, t = left - gap, b0[k]
        out[j - 200] = busy / steps
    return out


@pytest.mark.parametrize("steps", [2, 12])
def test_window_matches_fluid_monte_carlo(steps: int) -> None:
    lam, tau_p = 0.4, 0.12  # service in chunk steps: ρ = .4·1.25 = .5
    service = np.array([0.25, 0.75, 1.5, 2.5])
    q = ChunkQueue(
        rate=np.array([lam]),
        u_decode=np.zeros(1),
        u_prefill=np.zeros(1),
        tau_mean_s=np.ones(1),
        tau_plain_s=np.array([tau_p]),
        tau_chunk_s=np.ones(1),
        chunk_tokens=np.ones(1),
        rho=np.array([0.5]),
        service_s=service[None, :],
        rho_fluid=np.array([0.5]),
        fluid_service_s=service[None, :],
        p_drain=np.ones(1),
        drain_time=np.array([0.5]),
        tau_drain_s=np.ones(1),
    )
    wl = decode_workload(service, np.full(4, float(steps)), np.full(4, 0.25))
    win = window_components(q, wl)
    f = _fluid_mg1_windows(lam, service, tau_p, steps, np.random.default_rng(3), 40_000)
    model_mean = float(np.sum(win.weights * win.mean, axis=0)[0] @ wl.prob)
    assert model_mean == pytest.approx(f.mean(), rel=0.08)
    assert float(win.weights[3, 0] @ wl.prob) == pytest.approx(np.mean(f > 1 - 1e-9), abs=0.03)
    assert float(win.weights[0, 0] @ wl.prob) == pytest.approx(np.mean(f < 1e-9), abs=0.03)


def test_component_mixture() -> None:
    offset = np.full((1, 2), 0.01)
    mean, var = np.array([[0.02, 0.03]]), np.array([[1e-5, 4e-5]])
    prob = np.array([0.5, 0.5])
    plain = GammaMixture(offset, mean, var, prob)
    one = ComponentMixture.of(
        offset, np.ones((1, 1, 2)), mean[None], var[None], prob, np.zeros((1, 1, 2)), np.full((1, 1, 2), np.inf)
    )
    for b in (0.015, 0.03, 0.05):
        np.testing.assert_allclose(one.cdf_per_bin(b), plain.cdf_per_bin(b))
    np.testing.assert_allclose(one.quantile(0.9), plain.quantile(0.9))
    # two parts: a point mass at .02 (weight .3) and a gamma on [.01, .05] cut at .05 (weight .7)
    w = np.array([0.3, 0.7])[:, None, None] * np.ones((2, 1, 2))
    m = np.stack([np.full((1, 2), 0.02), np.full((1, 2), 0.03)])
    v = np.stack([np.zeros((1, 2)), np.full((1, 2), 1e-4)])
    mix = ComponentMixture.of(
        offset,
        w,
        m,
        v,
        prob,
        np.stack([np.zeros((1, 2)), np.full((1, 2), 0.01)]),
        np.stack([np.full((1, 2), np.inf), np.full((1, 2), 0.05)]),
    )
    # load mean .3·.02 + .7·.03 = .027; var .7e-4 + .3·4e-4 + .7·9e-4 − .027² = 9.1e-5
    assert mix.load_mean_s[0, 0] == pytest.approx(0.027)
    assert mix.load_var_s2[0, 0] == pytest.approx(9.1e-5)
    # at b = offset + .05 both parts are complete; just below .02 only the gamma part contributes
    np.testing.assert_allclose(mix.cdf_per_bin(0.06), 1.0)
    shape, scale = 0.02**2 / 1e-4, 1e-4 / 0.02  # gamma of X − .01: mean .02, var 1e-4
    norm = gammainc(shape, 0.04 / scale)
    expect = 0.7 * gammainc(shape, 0.0099 / scale) / norm
    np.testing.assert_allclose(mix.cdf_per_bin(0.0299), expect)
    np.testing.assert_allclose(mix.cdf_per_bin(0.0301), 0.3 + 0.7 * gammainc(shape, 0.0101 / scale) / norm)
    assert math.isfinite(float(mix.quantile(0.5)[0]))


def test_drain_counts_stay_finite_far_beyond_the_limit() -> None:
    """λτ_d of 1e3 arrivals per drain step overflowed e^{λτ_d} (inf, then NaN in ρ); it is capped at 700."""
    rate, tau_p, work = np.array([1.0, 1e5]), np.array([0.01, 0.01]), np.array([0.001, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b, tau_d = _drain_counts(rate, tau_p, work)
        rho, p_drain = _drain_rho(rate, np.array([0.5, 0.99]), tau_p, a, b, np.zeros(2))
    assert np.all(np.isfinite(np.concatenate([a, b, tau_d])))
    assert rho[1] == 1.0  # saturated: beyond every stable limit
    assert p_drain[1] == 0.0
    # Below the cap nothing changes: the stable case's a = g e^y with y = λ(τ_p + (b/a) work).
    g = -np.expm1(-0.01) / 0.01
    assert a[0] == pytest.approx(g * np.exp(1.0 * (0.01 + (b[0] / a[0]) * 0.001)), rel=1e-12)
