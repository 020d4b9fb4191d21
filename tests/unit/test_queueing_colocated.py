"""Colocated baseline (QUEUEING.md §3): hand-worked means, consistency identities, errors."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing import (
    LinearStepTime,
    colocated_distributions,
    decode_workload,
    mg1_wait_distribution,
    tpot_distribution,
)

STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)
WL = decode_workload([500.0, 2000.0], [50.0, 200.0], [0.5, 0.5])
S = np.array([0.05, 0.2])  # prefill seconds per bin


def test_prefill_first_by_hand() -> None:
    # E[n] = 125, E[work] = .5(50·500 + 1225) + .5(200·2000 + 19900) = 13112.5 + 209950 = 223062.5
    # λ = 2: u_d = 2(50e-6·125 + 3.9e-8·223062.5) = 2(6.25e-3 + 8.6994e-3) = .0298988
    # ρ_p = 2·.125 = .25 → TPOT̄ = 8e-3/(1 − .25 − .0298988) = 11.1096 ms
    r = colocated_distributions("prefill-first", [2.0], WL, STEP, prefill_service_s=S)
    assert r.prefill_utilisation[0] == pytest.approx(0.25)
    assert r.decode_utilisation[0] == pytest.approx(2 * (6.25e-3 + 3.9e-8 * 223062.5))
    assert r.tpot_mean_s[0] == pytest.approx(8e-3 / (1 - 0.25 - r.decode_utilisation[0]))
    # mixture mean = TPOT̄ + E[w]; E[w] = 50e-6 + 3.9e-8·E[L + (n−1)/2] = 50e-6 + 3.9e-8·1312.0
    assert r.tpot.mean_s[0] == pytest.approx(r.tpot_mean_s[0] + 50e-6 + 3.9e-8 * 1312.0)
    # TTFT mean = P-K wait + E[S] + (1 − ρ_p)·τ_step/2, τ_step = (1 − ρ_p)·TPOT̄
    wait = mg1_wait_distribution([2.0], S, WL.prob).mean_s[0]
    step = 0.75 * r.tpot_mean_s[0]
    assert r.ttft.mean_s[0] == pytest.approx(wait + 0.125 + 0.75 * step / 2)


def test_prefill_first_reduces_to_decode_at_tiny_prefill() -> None:
    r = colocated_distributions("prefill-first", [2.0], WL, STEP, prefill_service_s=S * 1e-9)
    d = tpot_distribution([2.0], WL, STEP)
    assert r.tpot.quantile(0.9)[0] == pytest.approx(d.quantile(0.9)[0], rel=1e-5)


def test_chunked_identities() -> None:
    kw = {"token_budget": 512.0, "prefill_s_per_token": 6e-5, "attention_s_per_token2": 1e-9}
    r = colocated_distributions("chunked", [0.0, 1.0, 2.0], WL, STEP, **kw)
    # u_p = λ(t_p E[L] + t_a E[L²]/2) = λ(6e-5·1250 + 1e-9·2125000/2) = λ·.0760625
    np.testing.assert_allclose(r.prefill_utilisation, [0.0, 0.0760625, 0.152125])
    np.testing.assert_allclose(
        r.tpot_mean_s, 8e-3 / (1 - r.decode_utilisation - r.prefill_utilisation)
    )
    # a request's decode starts as its own prompt leaves the chunk queue, which it leaves busy with
    # probability ρ: with equal prompts, short requests (n = 5) see a larger share of chunk steps
    # than long ones (n = 500), whose share tends to the step fraction π (work (u_d + u_p)τ̄ a step)
    assert np.all(r.tpot.load_mean_s[0] == 0.0)
    same = decode_workload([1000.0, 1000.0], [5.0, 500.0], [0.5, 0.5])
    s = colocated_distributions("chunked", [1.0, 2.0], same, STEP, **kw)
    assert np.all(s.tpot.load_mean_s[:, 0] > 1.2 * s.tpot.load_mean_s[:, 1])
    np.testing.assert_allclose(s.tpot.load_mean_s[:, 1],
                               (s.decode_utilisation + s.prefill_utilisation) * s.tpot_mean_s,
                               rtol=0.03)
    # TTFT at λ → 0: a lone prompt takes ⌈L/C⌉ plain steps of t0 plus its prefill work:
    # L = 500: 8e-3 + 6e-5·500 + 1e-9·500²/2 = .038125; L = 2000: 4·8e-3 + .12 + .002 = .154
    assert r.ttft.mean_s[0] == pytest.approx(0.5 * (0.038125 + 0.154))
    assert np.all(np.diff(r.ttft.quantile(0.9)) > 0)
    assert np.all(np.diff(r.tpot.quantile(0.9)) > 0)


def test_errors() -> None:
    with pytest.raises(ValueError, match="unstable"):
        colocated_distributions("prefill-first", [8.0], WL, STEP, prefill_service_s=S)
    with pytest.raises(ValueError, match="prefill capacity"):
        colocated_distributions(
            "chunked", [7.0], WL, STEP, token_budget=64.0, prefill_s_per_token=1e-5
        )
    with pytest.raises(ValueError, match="token budget"):
        colocated_distributions(
            "chunked", [20.0], WL, STEP, token_budget=8.0, prefill_s_per_token=1e-6
        )
    with pytest.raises(ValueError, match="unknown scheduler"):
        colocated_distributions("fcfs", [1.0], WL, STEP)
    with pytest.raises(ValueError, match="needs"):
        colocated_distributions("prefill-first", [1.0], WL, STEP)
