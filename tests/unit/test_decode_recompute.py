"""vLLM's disaggregated decode instance past its KV bound (issue #23 item 5): the pinned queue with the recompute
priced on the decode instance (pdplan.queueing.kv_admission.pinned_decode_admission, pdplan.serving.
decode_recompute), by hand and on the DistServe OPT-13B example."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario, revalidate
from pdplan.queueing import LinearStepTime, decode_workload
from pdplan.queueing.kv_admission import (
    KvAdmission,
    RidingKvAdmission,
    _halfin_whitt,
    _pinned_wait,
    _recompute_wait,
    kv_held,
    kv_mean_rate,
    pinned_batch,
    pinned_decode_admission,
    recompute_tokens,
)
from pdplan.serving import build_model, resolve
from pdplan.serving.append_price import append_work_s
from pdplan.serving.decode_recompute import recompute_s
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.types import Binding

ROOT = Path(__file__).resolve().parents[2]

# One-step requests (n = 1, L = 100) on t0 = 10 ms, t1 = 1 ms a sequence (tests/unit/test_colocated_admission.py):
# per = t1 E[n] = 1 ms, W = 100 token·steps.
ONE_STEP = decode_workload([100.0], [1.0], [1.0])
STEP = LinearStepTime(10e-3, 1e-3, 0.0)
Z99_WAIT = 1.0 / (1.0 + 2.3263478740408408 * 0.99 / (math.exp(-(2.3263478740408408**2) / 2.0) / math.sqrt(2 * math.pi)))


def test_pinned_limit_and_no_riding_prefill_by_hand() -> None:
    # λ_pin = M/(t0 W + M(per + f r)) = 2,000/(0.01·100 + 2,000·(1 ms + 0.5·1 ms)) = 2,000/4 = 500/s, below the
    # fluid 2,000/3 = 666.7/s that no recompute would give; no prefill rides a decode instance's steps (p = 0):
    # τ̄ = 10 ms/(1 − 400·1 ms) = 16.67 ms at 400/s.
    held = kv_held(ONE_STEP, 0.0, reserve=False)
    adm = pinned_decode_admission(ONE_STEP, held, STEP, 2000.0, 490.0, 0.5, 1e-3)
    assert adm.mean_rate_per_s == pytest.approx(500.0, rel=1e-12)
    assert kv_mean_rate(ONE_STEP, held, STEP, 2000.0) == pytest.approx(2000.0 / 3.0, rel=1e-12)
    assert adm.prefill_s_per_request == 0.0
    assert adm.tau_s(np.array([400.0]))[0] == pytest.approx(0.01 / 0.6, rel=1e-12)
    # comfortable at the P99 bound of 490/s: the queue's P_w there (K̄ ≈ 970 of 2,000 tokens) is 0.0022, below the
    # P99 rule's 0.011 (test_recompute_wait_by_hand has a pool whose comfortable limit lies below its bound)
    assert adm.comfort_rate_per_s == 490.0
    prob, _ = adm.wait(np.array([0.99 * adm.comfort_rate_per_s, 495.0, 510.0]))
    assert prob[0] == 0.0 < prob[1] < Z99_WAIT
    assert prob[2] == 0.0  # past λ_pin: refused by the deployment's limit, not priced


def _hw(beta: float) -> float:
    """Halfin–Whitt's P_w = [1 + βΦ(β)/φ(β)]⁻¹ by hand."""
    cdf = 0.5 * (1.0 + math.erf(beta / math.sqrt(2.0)))
    pdf = math.exp(-beta * beta / 2.0) / math.sqrt(2.0 * math.pi)
    return 1.0 / (1.0 + beta * cdf / pdf)


def test_recompute_wait_by_hand() -> None:
    # The one-step pool on M = 1,200 tokens, f = 0.5, r = 1 ms: λ_pin = 1,200/(0.01·100 + 1,200·1.5 ms) = 428.57/s,
    # the fluid limit without recompute 1,200/2.2 = 545.45/s. At 400/s the load feedback is F = 1.190477 and the
    # queue's P_w is the fixed point P = HW(β(P)) of the recompute-stretched step: P = 0.038673 gives
    # τ̄ = 10 ms/(1 − 400·(1 ms + 0.5·P·1 ms)) = 16.8843 ms, K̄ = 400·τ̄·100 = 675.37 tokens,
    # sd = √(400·τ̄·100²·F) = 283.55, β = (1,200 − 675.37)/283.55 = 1.8502 and HW(1.8502) = 0.038673 again;
    # E[W | W > 0] = (1 + 0)/2 · W τ̄/(M − K̄) = 0.5·100·16.8843 ms/524.63 = 1.6092 ms (c_s² = 0: n = 1, L = 100).
    held = kv_held(ONE_STEP, 0.0, reserve=False)
    adm = pinned_decode_admission(ONE_STEP, held, STEP, 1200.0, 428.0, 0.5, 1e-3)
    assert adm.mean_rate_per_s == pytest.approx(1200.0 / 2.8, rel=1e-12)
    factor = float(adm.feedback(np.array([400.0]))[0])
    assert factor == pytest.approx(1.190477, rel=1e-6)
    prob, cond = (float(x[0]) for x in adm.wait(np.array([400.0])))
    tau = 0.01 / (1.0 - 400.0 * (1e-3 + 0.5 * prob * 1e-3))
    occupancy = 400.0 * tau * 100.0
    beta = (1200.0 - occupancy) / math.sqrt(400.0 * tau * 100.0**2 * factor)
    assert (tau, occupancy, beta) == pytest.approx((16.8843e-3, 675.37, 1.8502), rel=1e-4)
    assert prob == pytest.approx(_hw(beta), rel=1e-9) == pytest.approx(0.038673, rel=1e-4)
    assert cond == pytest.approx(0.5 * 100.0 * tau / (1200.0 - occupancy), rel=1e-9)
    assert cond == pytest.approx(1.6092e-3, rel=1e-4)
    # the recompute raises P_w above the queue at the plain step (0.0349) and far below the pinned queue's 0.2327
    # (the colocated instance's, drained at λ_pin − λ), which overstated the simulator's waits (docs/queueing.md §2.6)
    plain = 0.01 / (1.0 - 400.0 * 1e-3)
    fluid = _hw((1200.0 - 400.0 * plain * 100.0) / math.sqrt(400.0 * plain * 100.0**2 * factor))
    assert fluid == pytest.approx(0.034906, rel=1e-4)
    assert fluid < prob
    pinned = _pinned_wait(np.array([400.0]), np.array([plain]), np.array([factor]), held, 1200.0, adm.mean_rate_per_s)
    assert float(pinned[0][0]) == pytest.approx(0.232705, rel=1e-4)
    # comfortable where P_w is the P99 rule's, 370.695/s below the bound of 428/s
    assert adm.comfort_rate_per_s == pytest.approx(370.695, rel=1e-5)
    assert adm._queue(np.array([adm.comfort_rate_per_s]))[0][0] == pytest.approx(Z99_WAIT, rel=1e-9)


def test_recompute_wait_is_the_least_fixed_point() -> None:
    # P ← HW(P) from 0 rises to the least fixed point; the grid-and-halving search lands on the same one, at every
    # rate of the band
    held = kv_held(ONE_STEP, 0.0, reserve=False)
    adm = pinned_decode_admission(ONE_STEP, held, STEP, 1200.0, 428.0, 0.5, 1e-3)
    rates = np.array([380.0, 400.0, 420.0, 428.0])
    factor = adm.feedback(rates)
    prob = np.zeros(rates.size)
    for _ in range(500):
        tau = 0.01 / (1.0 - rates * (1e-3 + 0.5e-3 * prob))
        prob = _halfin_whitt(rates * tau, tau, factor, held, 1200.0)[0]
    np.testing.assert_allclose(adm.wait(rates)[0], prob, rtol=1e-9)
    assert np.all(np.diff(prob) > 0.0)
    # at 600/s, past λ_pin (428.57/s) and the fluid limit (545.45/s), K̄ > M_kv already at P = 0 and HW(P) > P on
    # all of [0, 1] (β < 0): no fixed point, and the search says so rather than pricing a wait (the band ends at λ_pin)
    with pytest.raises(ValueError, match="pinned limit"):
        _recompute_wait(adm, np.array([400.0, 600.0]), adm.feedback(np.array([400.0, 600.0])))


def test_pinned_limit_below_the_p99_bound_keeps_the_bound() -> None:
    # the same pool with a P99 bound of 600/s above λ_pin = 500/s: the bound stays the limit and nothing waits
    held = kv_held(ONE_STEP, 0.0, reserve=False)
    adm = pinned_decode_admission(ONE_STEP, held, STEP, 2000.0, 600.0, 0.5, 1e-3)
    assert adm.comfort_rate_per_s == adm.mean_rate_per_s == 600.0
    assert not np.any(adm.wait(np.array([300.0, 599.0]))[0])


def test_recompute_tokens_and_pinned_batch_by_hand() -> None:
    # E[L] = 600 (500 and 700 tokens, half each), E[n] = 400: ℓ = 600, f = (1 − e^{−1.5})/1.5 = 0.517913,
    # c̄ = min(600, 400) = 400; with s = 16 ℓ = 616
    wl = decode_workload([500.0, 700.0], [400.0, 400.0], [0.5, 0.5])
    share, lost, context = recompute_tokens(wl, 0.0)
    assert (context, lost) == (600.0, 400.0)
    assert share == pytest.approx((1.0 - math.exp(-1.5)) / 1.5, rel=1e-12)
    assert recompute_tokens(wl, 16.0)[2] == 616.0
    # a pinned pool holds N̄ = M E[n]/W: M = 2,000, W = 100, E[n] = 1 → 20 sequences
    assert pinned_batch(kv_held(ONE_STEP, 0.0, reserve=False), ONE_STEP, 2000.0) == pytest.approx(20.0)


def _distserve(engine: str) -> DisaggregatedModel:
    sc = load_scenario(ROOT / "examples" / "opt-13b-a100-distserve.yaml")
    model = build_model(resolve(sc if engine == "vllm" else revalidate(sc, {"engine": engine}), open_catalog()))
    assert isinstance(model, DisaggregatedModel)
    return model


def test_vllm_decode_instance_prices_its_recompute() -> None:
    model = _distserve("vllm")
    adm = model.admission
    assert isinstance(adm, RidingKvAdmission)
    dec, cells = model.decode, model.cells
    share, lost, _ = recompute_tokens(cells, dec.state_tokens_per_seq)
    assert adm.overflow_share == share
    # r is PPD's append price of c̄ tokens over the cached rest of the prompt at the pinned batch (one source)
    batch = pinned_batch(adm.held, cells, dec.kv_capacity_tokens)
    cached = float(cells.prob @ cells.input_tokens) - lost
    hw, budget = model.res.hardware.decode, model.res.chunk_tokens
    work, _ = append_work_s(hw, batch, np.array([lost]), np.array([cached]), budget)
    assert adm.recompute_s_per_preemption == float(work[0]) == recompute_s(hw, cells, dec, batch, budget) > 0.0
    fluid = kv_mean_rate(cells, adm.held, dec.step, dec.kv_capacity_tokens)
    p99 = model.capacity.kv_rate_per_s
    assert adm.comfort_rate_per_s <= p99 < adm.mean_rate_per_s < fluid
    limit = model.limit()
    assert limit.binding is Binding.DECODE_KV
    assert limit.rate_rps == pytest.approx(adm.mean_rate_per_s * model.y, rel=1e-12)
    assert limit.kv_comfort_rps == pytest.approx(adm.comfort_rate_per_s * model.y, rel=1e-12)


def test_recompute_moves_tpot_only_past_the_comfortable_limit() -> None:
    model = _distserve("vllm")
    adm = model.admission
    assert isinstance(adm, RidingKvAdmission)
    lam = np.array([0.9 * adm.comfort_rate_per_s, 0.5 * (adm.comfort_rate_per_s + adm.mean_rate_per_s)])
    from pdplan.queueing import tpot_distribution

    plain = tpot_distribution(lam, model.cells, model.decode.step)
    priced = model._recomputed(plain, lam * model.y)
    stretch, pause = adm.recompute_s(lam)
    assert stretch[0] == pause[0] == 0.0 < stretch[1]
    steps = np.maximum(model.cells.decode_steps, 1.0)
    np.testing.assert_allclose(priced.offset_s, plain.offset_s + stretch[:, None] + pause[:, None] / steps, rtol=1e-12)
    assert np.all(priced.offset_s[1] > plain.offset_s[1])


@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_engines_that_hold_requests_back_keep_their_queue(engine: str) -> None:
    adm = _distserve(engine).admission
    assert isinstance(adm, KvAdmission)
