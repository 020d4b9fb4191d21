"""Hypothesis invariants of the queueing core."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.queueing import (
    LinearStepTime,
    decode_fixed_point,
    decode_workload,
    erlang_c,
    mg1_wait_distribution,
    pk_wait_moments,
    prefill_wait_distribution,
    tpot_distribution,
)

services = st.lists(st.floats(0.01, 2.0), min_size=1, max_size=6)


def _pmf(values: list[float]) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(values)
    return s, np.full(s.size, 1.0 / s.size)


@settings(deadline=None, max_examples=30)
@given(services, st.floats(0.05, 0.95))
def test_wait_cdf_monotone_and_bounded(values: list[float], rho: float) -> None:
    s, p = _pmf(values)
    w = mg1_wait_distribution([rho / float(p @ s)], s, p)
    t = np.linspace(-1.0, 50.0 * float(s.max()), 400)
    f = w.cdf(t)[0]
    assert np.all(np.diff(f) >= -1e-12)
    assert f[0] == 0.0
    assert np.all((f >= 0) & (f <= 1))
    assert w.cdf(0.0)[0] == pytest.approx(1.0 - rho)


@settings(deadline=None, max_examples=30)
@given(services, st.lists(st.floats(0.0, 0.99), min_size=2, max_size=6))
def test_mean_wait_nondecreasing_in_rate(values: list[float], rhos: list[float]) -> None:
    s, p = _pmf(values)
    rates = np.sort(np.asarray(rhos)) / float(p @ s)
    mean, second = pk_wait_moments(rates, s, p)
    assert np.all(np.diff(mean) >= 0)
    assert np.all(second >= mean**2 - 1e-15)


@settings(deadline=None, max_examples=30)
@given(st.integers(1, 40), st.floats(0.0, 0.999))
def test_erlang_c_properties(servers: int, rho: float) -> None:
    c = erlang_c(servers, servers * rho)[0]
    assert 0.0 <= c <= 1.0 + 1e-12
    if servers == 1:
        assert c == pytest.approx(rho)
    # pooling: more servers at the same utilisation wait less often
    assert erlang_c(servers + 1, (servers + 1) * rho)[0] <= c + 1e-12


@settings(deadline=None, max_examples=30)
@given(services, st.floats(0.1, 0.9), st.integers(1, 6), st.sampled_from(["random", "least-work"]))
def test_quantile_inverts_cdf(values: list[float], rho: float, x: int, policy: str) -> None:
    s, p = _pmf(values)
    w = prefill_wait_distribution(policy, [rho * x / float(p @ s)], s, p, x)
    for q in (0.5, 0.9, 0.99):
        t = w.quantile(q)[0]
        if t > 0:
            assert w.cdf(t)[0] == pytest.approx(q, abs=1e-9)
        else:  # the quantile is the atom at 0: it holds q (to the same 1e-9 as the cdf above; the atom and the
            # lattice's first cell can differ in the last bits, hypothesis found atom = 0.9 - 1e-16 at q = 0.9)
            assert w.atom[0] >= q - 1e-9


@settings(deadline=None, max_examples=30)
@given(
    st.lists(st.tuples(st.floats(1.0, 4000.0), st.integers(1, 300)), min_size=1, max_size=5),
    st.floats(0.0, 1.5),
)
def test_decode_littles_law_and_stability(bins: list[tuple[float, int]], load: float) -> None:
    lin = np.array([b[0] for b in bins])
    steps = np.array([float(b[1]) for b in bins])
    wl = decode_workload(lin, steps, np.full(lin.size, 1.0 / lin.size))
    step = LinearStepTime(8e-3, 50e-6, 3.9e-8)
    rate = load / (step.t1_s_per_seq * wl.mean_steps + step.t2_s_per_token * wl.mean_work)
    if load > 1.001:  # (exactly 1 is a floating-point coin toss)
        with pytest.raises(ValueError, match="unstable"):
            decode_fixed_point([rate], wl, step)
        return
    if load >= 0.999:
        return
    fp = decode_fixed_point([rate], wl, step)
    assert 0.0 <= fp.utilisation[0] < 1.0
    # Little: N = λ E[n] τ̄ and the step time at (N, K̄) is τ̄ itself
    assert fp.mean_seqs[0] == pytest.approx(rate * wl.mean_steps * fp.tau_mean_s[0])
    assert step(fp.mean_seqs, fp.mean_context_tokens)[0] == pytest.approx(fp.tau_mean_s[0])
    if load < 0.9:
        d = tpot_distribution([rate], wl, step)
        q50, q90, q99 = (d.quantile(q)[0] for q in (0.5, 0.9, 0.99))
        assert q50 <= q90 * (1 + 1e-9)  # quantiles come from brentq with rtol 1e-10
        assert q90 <= q99 * (1 + 1e-9)
        assert np.all(d.load_var_s2 >= 0)


@settings(deadline=None, max_examples=25)
@given(
    st.lists(st.floats(16.0, 6000.0), min_size=1, max_size=6),
    st.floats(1e-4, 0.02),
    st.floats(1e-6, 1e-4),
    st.floats(0.0, 1e-8),
    st.lists(st.floats(256.0, 32768.0), min_size=2, max_size=4),
)
def test_bigger_batch_budget_never_lowers_prefill_capacity(
    lengths: list[float], a: float, b: float, c: float, budgets: list[float]
) -> None:
    """Batched prefill (pdplan.queueing.batched): with a batch time a + b·Σl + c·Σl² (per-batch
    cost amortised, attention additive per prompt) a larger token budget serves at least as many
    requests per second (1 % tolerance), and a budget holding every prompt at least as many as
    one prompt at a time (3 %: the packing lattice of B/256 tokens rounds lengths)."""
    from pdplan.queueing.batched import batched_prefill

    lens, p = _pmf(lengths)

    def price(tokens: np.ndarray, sq: np.ndarray) -> np.ndarray:
        return a + b * np.asarray(tokens) + c * np.asarray(sq)

    caps = [batched_prefill(lens, p, budget, price).capacity_rps for budget in sorted(budgets)]
    assert np.all(np.diff(caps) >= -0.01 * np.asarray(caps[:-1]))
    alone = 1.0 / float(p @ price(lens, lens**2))
    assert caps[-1] >= alone * 0.97 or max(budgets) < float(lens.max())


@settings(deadline=None, max_examples=25)
@given(services, st.floats(0.05, 0.95), st.integers(2, 12))
def test_count_routers_between_least_work_and_random(values: list[float], rho: float, x: int) -> None:
    # the mean prefill wait: least-work ≤ least-loaded ≤ power-of-two ≤ random; the P50/P90/P99: least-loaded ≤
    # power-of-two ≤ random (against least-work the quantiles near the atom can swap, since JSQ's π is below Erlang C:
    # pdplan.queueing.jsq, "Orderings"; hypothesis found the P90 swapped at S = 1 s, ρ = 0.625, x = 9)
    s, p = _pmf(values)
    rate = [rho * x / float(p @ s)]
    order = ["least-work", "least-loaded", "power-of-two", "random"]
    waits = [prefill_wait_distribution(policy, rate, s, p, x) for policy in order]
    means = [float(w.mean_s[0]) for w in waits]
    assert all(a <= b * (1 + 1e-9) + 1e-12 for a, b in itertools.pairwise(means)), means
    for q in (0.5, 0.9, 0.99):
        qs = [float(w.quantile(q)[0]) for w in waits[1:]]
        cell = max(float(w.h_s[0]) for w in waits[1:])  # the lattices differ in step: one cell of the coarser
        assert all(a <= b + 2 * cell for a, b in itertools.pairwise(qs)), (q, qs)
