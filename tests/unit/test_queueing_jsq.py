"""Routers that count requests (pdplan.queueing.jsq): least-loaded (JSQ) and power-of-two (JSQ(2)), by hand."""

import numpy as np
import pytest
from scipy import sparse
from scipy.sparse.linalg import spsolve

from pdplan.queueing import mg1_wait_distribution, prefill_wait_distribution
from pdplan.queueing.jsq import (
    count_routing_terms,
    jsq2_delay_probability,
    jsq_delay_probability,
    jsq_stretch,
    mean_field_ahead,
)

S = np.array([0.1, 0.3, 0.9])
P = np.array([0.5, 0.3, 0.2])  # E[S] = 0.32 s, E[S²] = 0.197 s², E[R] = E[S²]/(2E[S]) = 0.3078 s


@pytest.mark.parametrize("policy", ["least-loaded", "power-of-two"])
def test_one_instance_is_the_mg1_exactly(policy: str) -> None:
    rates = [0.5, 2.0]
    w = prefill_wait_distribution(policy, rates, S, P, 1)
    m = mg1_wait_distribution(rates, S, P)
    np.testing.assert_allclose(w.cdf_grid, m.cdf_grid)
    np.testing.assert_allclose(w.h_s, m.h_s)
    np.testing.assert_allclose(w.atom, m.atom)
    np.testing.assert_allclose(w.mean_s, m.mean_s)


def _jsq2_by_hand(rho: float) -> float:
    """The balanced chain of c = 2 (module docstring), μ = 1, λ = 2ρ, written out state by state:
    A (2 idle), B (1 idle), C (both busy, none waiting), D (one waiting: instances hold 1 and 2), E (1 idle, the other
    holds 2), G (q ≥ 2, leaves to D at 2(1 − ρ)). A→B λ; B→A 1, B→C λ; C→B 2, C→D λ; D→E 1, D→C 1, D→G λ; E→D λ,
    E→B 1. All busy: C, D, G."""
    lam = 2.0 * rho
    rates = {
        ("A", "B"): lam,
        ("B", "A"): 1.0,
        ("B", "C"): lam,
        ("C", "B"): 2.0,
        ("C", "D"): lam,
        ("D", "E"): 1.0,
        ("D", "C"): 1.0,
        ("D", "G"): lam,
        ("E", "D"): lam,
        ("E", "B"): 1.0,
        ("G", "D"): 2.0 * (1.0 - rho),
    }
    names = "ABCDEG"
    q = np.zeros((6, 6))
    for (a, b), r in rates.items():
        q[names.index(a), names.index(b)] = r
    q -= np.diag(q.sum(axis=1))
    system = q.T.copy()
    system[0] = 1.0
    p = np.linalg.solve(system, np.eye(6)[0])
    return float(p[2] + p[3] + p[5])


def test_two_instances_at_half_load_by_hand() -> None:
    # ρ = 1/2 (λ = 1): the six balance equations give p = (A 7, B 7, C 3, D 2, E 1, G 2)/22 (e.g. A: 1·B = λ·A; G:
    # 2(1 − ρ)·G = λ·D), so π = C + D + G = 7/22, below Erlang C's C(2, 1) = 1/3 (an instance whose own queue
    # empties idles while the other holds a waiting request)
    assert _jsq2_by_hand(0.5) == pytest.approx(7.0 / 22.0)
    assert jsq_delay_probability(2, [0.5])[0] == pytest.approx(7.0 / 22.0)
    assert jsq2_delay_probability(0.5) == pytest.approx(7.0 / 22.0)
    for rho in (0.1, 0.3, 0.7, 0.95):
        assert jsq_delay_probability(2, [rho])[0] == pytest.approx(_jsq2_by_hand(rho), rel=1e-9)
        assert float(jsq2_delay_probability(rho)) == pytest.approx(_jsq2_by_hand(rho), rel=1e-9)


def _exact_jsq2_exponential(rho: float, top: int = 60) -> tuple[float, float]:
    """P(W > 0) and E[W]/E[S] of exact JSQ over two exponential servers (ties split evenly): the chain on both queue
    lengths (n₁, n₂), truncated at ``top`` each; the arrival waits min(n₁, n₂) services."""
    lam, n = 2.0 * rho, (top + 1) ** 2
    rows: list[int] = []
    cols: list[int] = []
    rates: list[float] = []
    for a in range(top + 1):
        for b in range(top + 1):
            k = a * (top + 1) + b
            moves = [
                (a < top and a <= b, k + top + 1, lam if a < b else lam / 2.0),
                (b < top and b <= a, k + 1, lam if b < a else lam / 2.0),
                (a > 0, k - top - 1, 1.0),
                (b > 0, k - 1, 1.0),
            ]
            for allowed, to, rate in moves:
                if allowed:
                    rows.append(k)
                    cols.append(to)
                    rates.append(rate)
    q = sparse.csr_matrix((rates, (rows, cols)), shape=(n, n))  # duplicate entries are summed, as += did
    q = q - sparse.diags(np.asarray(q.sum(axis=1)).ravel())
    system = q.T.tolil()
    system[0, :] = 1.0  # the balance equation of state 0 replaced by the normalisation (a direct sparse LU solve)
    p = np.asarray(spsolve(system.tocsc(), np.eye(n)[0])).reshape(top + 1, top + 1)
    ahead = np.minimum.outer(np.arange(top + 1), np.arange(top + 1))
    return float(p[ahead >= 1].sum()), float((p * ahead).sum())


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.7, 0.9])
def test_two_exponential_instances_against_exact_jsq(rho: float) -> None:
    # measured: π +0.3…+0.8 %, E[W] −0.2…−0.8 % of exact two-server exponential JSQ (which does not keep the two
    # queues within one request of each other, as the balanced chain does)
    pi_exact, wait_exact = _exact_jsq2_exponential(rho)
    # a two-point service with E[S] = 1 s and E[S²] = 2 s² (c_s² = 1, as exponential): E[R] = 1 s
    service, prob = [0.2, 2.25], [1.25 / 2.05, 0.8 / 2.05]
    w = prefill_wait_distribution("least-loaded", [2.0 * rho], service, prob, 2)
    assert 1.0 - w.atom[0] == pytest.approx(pi_exact, rel=0.01)
    assert w.mean_s[0] == pytest.approx(wait_exact, rel=0.01)


def test_stretch_and_mean_by_hand() -> None:
    # c = 2, ρ = 0.5: σ = 1/(1 + ρ) = 2/3; E[W | W > 0] = E[R]/(1 − ρ²) = E[R]/0.75
    assert jsq_stretch(2, 0.5) == pytest.approx(2.0 / 3.0)
    rho = 0.5
    w = prefill_wait_distribution("least-loaded", [2.0 * rho / 0.32], S, P, 2)
    e_r = float(P @ S**2) / (2.0 * float(P @ S))
    assert w.mean_s[0] == pytest.approx(7.0 / 22.0 * e_r / 0.75)


def test_power_of_two_limits() -> None:
    # c = 2: both instances are drawn, so power-of-two is JSQ over the two
    pi2, sigma2 = count_routing_terms("power-of-two", 2, [0.5])
    pij, sigmaj = count_routing_terms("least-loaded", 2, [0.5])
    assert pi2[0] == pytest.approx(pij[0])
    assert sigma2[0] == pytest.approx(sigmaj[0])
    # mean field (Mitzenmacher 2001): E[K | K ≥ 1] = 1 + ρ⁴ + ρ¹² + ρ²⁸ + … ; ρ = 0.5: 1.0627...
    assert float(mean_field_ahead(0.5)) == pytest.approx(1.0 + 0.5**4 + 0.5**12 + 0.5**28 + 0.5**60)
    assert float(mean_field_ahead(0.5, choices=1)) == pytest.approx(2.0)  # d = 1: the M/G/1's 1/(1 − ρ)
    # c = 5, ρ = 0.5: π = ρ² + (7/22 − ρ²)/4
    pi5, sigma5 = count_routing_terms("power-of-two", 5, [0.5])
    assert pi5[0] == pytest.approx(0.25 + (7.0 / 22.0 - 0.25) / 4.0)
    ahead = float(mean_field_ahead(0.5)) + (1.0 / 0.75 - float(mean_field_ahead(0.5))) / 4.0
    assert sigma5[0] == pytest.approx(0.5 * ahead)


def test_rejects_unstable_and_unknown() -> None:
    with pytest.raises(ValueError, match="unstable"):
        prefill_wait_distribution("least-loaded", [10.0], S, P, 2)  # ρ = 1.6
    with pytest.raises(ValueError, match="not a count-based"):
        count_routing_terms("least-work", 2, [0.5])
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        jsq_delay_probability(3, [1.0])


def test_above_the_chain_limit_the_delay_probability_is_erlang_c_an_upper_bound() -> None:
    """Past CHAIN_MAX_SERVERS instances π_c is Erlang C (jsq.CHAIN_MAX_SERVERS' docstring): the chain at the limit
    lies below Erlang C at every load (an idle instance never waits beside a waiting request in one central queue),
    so the bound is conservative; at c = 64, ρ = 0.9 the chain gives about 0.126 against Erlang C's 0.311."""
    from pdplan.queueing.erlang import erlang_c
    from pdplan.queueing.jsq import CHAIN_MAX_SERVERS

    rho = np.array([0.5, 0.8, 0.9, 0.95, 0.99])
    c = CHAIN_MAX_SERVERS
    chain = jsq_delay_probability(c, rho)
    assert np.all(chain <= erlang_c(c, c * rho))
    assert chain[2] == pytest.approx(0.1259, abs=5e-4)
    above = jsq_delay_probability(c + 1, rho)
    assert np.array_equal(above, np.clip(erlang_c(c + 1, (c + 1) * rho), 0.0, 1.0))


def test_count_routing_terms_memo_gives_fresh_copies_of_the_same_doubles() -> None:
    from pdplan.queueing import jsq

    rho = np.array([0.2, 0.5, 0.9])
    jsq.clear_memo()
    first = count_routing_terms("least-loaded", 3, rho)
    assert first[0].tobytes() == jsq_delay_probability(3, rho).tobytes()
    assert first[1].tobytes() == jsq_stretch(3, rho).tobytes()
    first[0][:] = -1.0  # the caller's copy
    again = count_routing_terms("least-loaded", 3, rho)
    assert again[0].tobytes() == jsq_delay_probability(3, rho).tobytes()
    assert count_routing_terms("least-loaded", 3, rho[:2])[0].tobytes() == again[0][:2].tobytes()
    with pytest.raises(ValueError, match="not a count-based"):
        count_routing_terms("random", 3, rho)
    with pytest.raises(ValueError, match="per-instance load"):
        count_routing_terms("least-loaded", 3, [1.0])
