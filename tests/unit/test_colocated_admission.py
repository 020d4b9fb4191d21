"""The colocated KV admission queue (issue #23 item 5): past the comfortable (P99) KV limit a colocated plan is priced
with the engine's KV admission wait on TTFT and marked, and refused only past the mean (fluid) KV limit
(pdplan.queueing.kv_admission.RidingKvAdmission, pdplan.serving.colocated)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from support.llama70b_colocated import llama70b_chat
from support.opt13b_colocated import opt13b_colocated

from pdplan.errors import NoFeasiblePlanError
from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.queueing import LinearStepTime, decode_workload
from pdplan.queueing.kv_admission import RidingKvAdmission, kv_held, kv_mean_rate, pinned_overflow_share, seat_held
from pdplan.queueing.ttft_mixture import TtftMixture
from pdplan.serving import build_model, resolve
from pdplan.serving.colocated import ColocatedModel
from pdplan.specs.scenario import Scenario
from pdplan.types import Binding

# One-step requests (n = 1, L = 100) on t0 = 10 ms, t1 = 1 ms per sequence, with p = 0.5 ms of prefill per request
# riding the steps (tests/unit/test_colocated_kv_limit.py): at λ = 400/s u_d = 0.4, u_p = 0.2, τ̄ = 10 ms/(1 − 0.6)
# = 25 ms, λτ̄ = 10 sequences of W = 100 tokens (K̄ = 1,000), and F = 4/3 (an AR(1) with a = 0.5, on the §2.4 grid's
# 16 circular steps: (1 + a¹⁶)/((1 − a¹⁶)(1 − a²))).
ONE_STEP = decode_workload([100.0], [1.0], [1.0])
STEP = LinearStepTime(10e-3, 1e-3, 0.0)
PREFILL_S = 0.5e-3
A = 0.5
F = (1.0 + A**16) / ((1.0 - A**16) * (1.0 - A * A))
SD_K = math.sqrt(10.0 * 100.0**2 * F)  # √(λτ̄ · E[Σ held²] · F), E[Σ held²] = 100² for one step of 100 tokens


def _one_step(kv_tokens: float, comfort: float) -> RidingKvAdmission:
    held = kv_held(ONE_STEP, 0.0, reserve=False)
    mean = kv_mean_rate(ONE_STEP, held, STEP, kv_tokens, PREFILL_S)
    return RidingKvAdmission(ONE_STEP, held, STEP, kv_tokens, comfort, mean, PREFILL_S)


def test_mean_rate_with_prefill_riding_by_hand() -> None:
    # λ_kv = M/(t0 W + M (per + p)) = 2,000/(0.01·100 + 2,000·1.5e-3) = 2,000/4 = 500/s, where λτ̄W = 500 · 0.01/(1 −
    # 0.75) · 100 = 2,000 = M; without the prefill (p = 0) it is the decode instance's 2,000/3 = 666.7/s.
    held = kv_held(ONE_STEP, 0.0, reserve=False)
    assert kv_mean_rate(ONE_STEP, held, STEP, 2000.0, PREFILL_S) == pytest.approx(500.0, rel=1e-12)
    assert kv_mean_rate(ONE_STEP, held, STEP, 2000.0) == pytest.approx(2000.0 / 3.0, rel=1e-12)
    assert _one_step(2000.0, 0.0).tau_s(np.array([500.0]))[0] == pytest.approx(0.04, rel=1e-12)


def test_halfin_whitt_wait_by_hand() -> None:
    # M_kv = K̄ + 1·sd K at λ = 400/s: β = 1, P_w = 1/(1 + Φ(1)/φ(1)) = 1/(1 + 0.841345/0.241971) = 0.223364; the wait
    # of those who wait has mean (1 + c_s²)/2 · W τ̄/(M − K̄) = ½ · 100 · 0.025/sd K (one length: c_s² = 0).
    adm = _one_step(1000.0 + SD_K, comfort=300.0)
    prob, cond = adm.wait(np.array([400.0]))
    assert prob[0] == pytest.approx(1.0 / (1.0 + 0.8413447460685429 / 0.24197072451914337), rel=1e-6)
    assert cond[0] == pytest.approx(0.5 * 100.0 * 0.025 / SD_K, rel=1e-6)
    assert adm.delay(np.array([400.0])).bin_mean_s[0, 0] == pytest.approx(prob[0] * cond[0], rel=0.02)


def test_no_wait_outside_the_band_and_one_percent_at_its_foot() -> None:
    # At the comfortable limit the margin is z99 sd K: β = 2.326, P_w = 0.011 (the module docstring); none at or below
    # it, none at or past the mean limit (the deployment refuses that rate).
    kv = 1000.0 + 2.3263478740408408 * SD_K
    adm = _one_step(kv, comfort=400.0)
    prob, cond = adm.wait(np.array([400.0, 400.0 * (1.0 + 1e-9), 0.999 * adm.mean_rate_per_s, adm.mean_rate_per_s]))
    assert prob[0] == cond[0] == 0.0
    assert prob[1] == pytest.approx(0.011, abs=0.0005)
    assert prob[2] > 0.9
    assert cond[2] > 100 * cond[1]
    assert prob[3] == cond[3] == 0.0


def _opt13b_kv_bound(engine: str) -> ColocatedModel:
    """The OPT-13B colocated pick with 400-token mean outputs (tests/support/opt13b_colocated.py), whose KV binds."""
    model = build_model(resolve(opt13b_colocated(engine, output_mean=400, ttft="1s"), open_catalog()))
    assert isinstance(model, ColocatedModel)
    return model


@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_limit_is_the_mean_kv_limit_with_the_comfortable_one_below(engine: str) -> None:
    model = _opt13b_kv_bound(engine)
    limit = model.limit()
    adm = model.kv_admission()
    assert limit.binding is Binding.DECODE_KV
    assert limit.rate_rps == pytest.approx(adm.mean_rate_per_s * model.z, rel=1e-12)
    assert limit.kv_comfort_rps == pytest.approx(model.bound_rates().kv_rate_per_s * model.z, rel=1e-12)
    assert limit.kv_comfort_rps < limit.rate_rps
    # at the mean limit the mean occupancy of the admitted footprint fills the pool: λ τ̄ W = M_kv
    lam = adm.mean_rate_per_s
    assert lam * adm.tau_s(np.array([lam]))[0] * adm.held.work == pytest.approx(adm.kv_capacity_tokens, rel=1e-9)
    assert float(adm.tau_s(np.array([lam]))[0]) == pytest.approx(model.token_interval_s(lam), rel=1e-12)


def _llama70b_long() -> Scenario:
    """Llama-3.1-70B on one 4x H100 colocated instance, prompts and outputs lognormal with means of 1,000 tokens."""
    lengths = {"dist": "lognormal", "mean": 1000, "sigma": 1.0, "min": 4, "max": 4000}
    data = {
        "model": "llama-3.1-70b",
        "mode": "colocated",
        "colocated": {"gpu": "h100-sxm", "tp": 4, "count": 1, "scheduler": "chunked"},
        "workload": {"input_tokens": lengths, "output_tokens": lengths},
        "slo": {"ttft": "2s", "tpot": "100ms", "percentile": 90, "attainment": 0.9},
        "ttft_convention": "A",
        "engine": "vllm",
    }
    return scenario_from_dict(data, source="test", base_dir=Path.cwd())


def test_on_demand_engine_keeps_its_p99_limit_where_a_full_pool_serves_less() -> None:
    # A pool pinned throughout serves λ_pin = M/(t0 W + M(per + p + f r)) = 4.012 req/s, below the P99 bound (4.387;
    # pdplan's simulator saturates at 3.98): nothing is priced past the bound, which stays the limit, unmarked, as
    # before (kv_admission, *Preemption with recompute*).
    model = build_model(resolve(_llama70b_long(), open_catalog()))
    assert isinstance(model, ColocatedModel)
    adm = model.kv_admission()
    comfort = model.bound_rates().kv_rate_per_s
    pinned = kv_mean_rate(
        model.cells,
        adm.held,
        adm.step,
        adm.kv_capacity_tokens,
        adm.prefill_s_per_request + adm.overflow_share * adm.recompute_s_per_preemption,
    )
    assert pinned < comfort
    assert adm.comfort_rate_per_s == adm.mean_rate_per_s == comfort
    limit = model.limit()
    assert limit.binding is Binding.DECODE_KV
    assert limit.rate_rps == pytest.approx(comfort * model.z, rel=1e-12)
    assert limit.kv_comfort_rps is None


def test_on_demand_engine_is_priced_past_its_p99_bound() -> None:
    # It used to be refused at its P99 bound, 1.123 req/s; a full pool serves λ_pin = 1.911 req/s (pdplan's simulator
    # saturates at 1.887), so the plan is priced up to λ_pin, its admission queue drained at λ_pin, comfortable where
    # that queue's P_w is the P99 rule's (1.099 req/s), and marked past it.
    sc = llama70b_chat()
    model = build_model(resolve(sc, open_catalog()))
    assert isinstance(model, ColocatedModel)
    adm = model.kv_admission()
    p99 = model.bound_rates().kv_rate_per_s
    limit = model.limit()
    assert limit.binding is Binding.DECODE_KV
    assert limit.rate_rps == pytest.approx(adm.mean_rate_per_s * model.z, rel=1e-12)
    assert adm.comfort_rate_per_s < p99 < adm.mean_rate_per_s
    assert limit.kv_comfort_rps == pytest.approx(adm.comfort_rate_per_s * model.z, rel=1e-12)
    # the wait starts at the P99 rule's P_w (Halfin–Whitt's at β = z99) where the comfortable limit lies
    foot = adm.comfort_rate_per_s * (1.0 + 1e-9)
    assert adm.wait(np.array([foot]))[0][0] == pytest.approx(0.01144, rel=1e-3)  # 1/(1 + 2.3263·0.99/0.026652)
    z99 = 2.3263478740408408  # Φ⁻¹(0.99); the comfortable rate is brentq's root of P_w = 1/(1 + z Φ(z)/φ(z))
    target = 1.0 / (1.0 + z99 * 0.99 / (math.exp(-(z99**2) / 2.0) / math.sqrt(2.0 * math.pi)))
    assert adm._queue(np.array([adm.comfort_rate_per_s]))[0][0] == pytest.approx(target, rel=1e-9)
    rates = np.array([0.99 * adm.comfort_rate_per_s, 1.1 * p99, 1.3 * p99])
    prob, _ = adm.wait(rates)
    assert prob[0] == 0.0
    assert 0.011 < prob[1] < prob[2] < 1.0
    np.testing.assert_allclose(adm.preemptions_per_request(rates), adm.overflow_share * prob, rtol=1e-12)
    ev = evaluate(sc, rate=float(rates[2]) * model.z)
    assert ev.beyond_kv_comfort
    plain, priced = model._loaded(rates * model.z).tpot, model._distributions(rates * model.z).tpot
    assert priced.mean_s[0] == pytest.approx(plain.mean_s[0], rel=1e-12)
    assert np.all(priced.mean_s[1:] > plain.mean_s[1:])  # the recompute stretches τ̄ and pauses its victims
    with pytest.raises(NoFeasiblePlanError, match="decode KV capacity") as err:
        evaluate(sc, rate=1.01 * limit.rate_rps)
    assert err.value.binding_constraint is Binding.DECODE_KV


def test_pinned_overflow_share_by_hand() -> None:
    # f = (1 − e^{−x})/x, x = ℓ/E[n]: ℓ = E[n] gives 1 − 1/e; ℓ = 600, E[n] = 400 gives (1 − e^{−1.5})/1.5
    assert pinned_overflow_share(400.0, 400.0) == pytest.approx(1.0 - math.exp(-1.0), rel=1e-12)
    assert pinned_overflow_share(600.0, 400.0) == pytest.approx(0.5179132, rel=1e-6)  # e^{−1.5} = 0.2231302
    assert pinned_overflow_share(1e-6, 400.0) == pytest.approx(1.0, rel=1e-8)  # no room left: every cycle overruns
    with pytest.raises(ValueError, match="positive context"):
        pinned_overflow_share(0.0, 400.0)


def test_pinned_queue_by_hand() -> None:
    # The one-step instance at β = 1 (M = 1,000 + sd K, λ = 400/s: K̄ = 1,000, fluid P_w = 0.223364,
    # test_halfin_whitt_wait_by_hand) with a pinned limit λ_pin = 500/s, f = 0.5 and r = 1 ms: P_w = 0.223364 ·
    # (500/100) · (sd K/M), E[W | W > 0] = (1 + c_s²)/2/(λ_pin − λ) = ½/100 = 5 ms (one length: c_s² = 0), π = f·P_w.
    held = kv_held(ONE_STEP, 0.0, reserve=False)
    kv = 1000.0 + SD_K
    adm = RidingKvAdmission(ONE_STEP, held, STEP, kv, 300.0, 500.0, PREFILL_S, 0.5, 1e-3)
    fluid = 1.0 / (1.0 + 0.8413447460685429 / 0.24197072451914337)
    p_w = fluid * 5.0 * SD_K / kv
    prob, cond = adm.wait(np.array([400.0]))
    assert prob[0] == pytest.approx(p_w, rel=1e-6)
    assert cond[0] == pytest.approx(0.005, rel=1e-12)
    pre = 0.5 * p_w
    assert adm.preemptions_per_request(np.array([400.0]))[0] == pytest.approx(pre, rel=1e-6)
    # the recompute stretches τ̄ = 10 ms/(1 − 400(1.5 ms + π·1 ms)) from 25 ms; a victim pauses 1/λ_pin + r = 3 ms
    stretch, pause = adm.recompute_s(np.array([400.0]))
    assert stretch[0] == pytest.approx(10e-3 / (1.0 - 400.0 * (1.5e-3 + pre * 1e-3)) - 0.025, rel=1e-6)
    assert pause[0] == pytest.approx(pre * 3e-3, rel=1e-6)


def test_admission_wait_adds_to_ttft_only_past_the_comfortable_limit() -> None:
    model = _opt13b_kv_bound("sglang")
    comfort = model.bound_rates().kv_rate_per_s
    rates = np.array([0.9, 1.02, 1.05]) * comfort * model.z
    plain = model._loaded(rates).ttft
    admitted = model._admitted(model._loaded(rates), rates).ttft  # before SGLang's overlap step (test_overlap_step)
    assert isinstance(admitted, TtftMixture)
    prob, cond = model.kv_admission().wait(rates / model.z)
    assert prob[0] == 0.0
    assert prob[1] > 0.011
    # the delay's mean is the wait's mean, P_w · E[W | W > 0], to the band discretisation (tail_bands)
    np.testing.assert_allclose(admitted.mean_s - plain.mean_s, prob * cond, rtol=0.02, atol=1e-12)
    assert admitted.mean_s[0] == pytest.approx(plain.mean_s[0], rel=1e-12)
    parts = model.ttft_parts(float(rates[2]))
    assert parts.total_s == pytest.approx(float(model.snapshot(rates[2:]).ttft.mean_s[0]), rel=0.02)
    # TPOT is unchanged: waiting requests hold no KV and run no step
    np.testing.assert_array_equal(model._loaded(rates).tpot.offset_s, model._distributions(rates).tpot.offset_s)


def test_past_the_comfortable_limit_the_plan_is_priced_and_marked() -> None:
    # SGLang, 400-token outputs, TTFT 1 s at P90: the goodput 5.617 req/s lies past the comfortable KV limit 5.371
    # (which bounded it before, -4.5 % from the simulator's 5.623; docs/accuracy.md §6), below the mean one, 5.784.
    # With the prompt tokens priced at the step's width (pdplan/queueing/chunk_width.py; issue #23) the riding prefill
    # is a little cheaper at this occupancy: 5.371 -> 5.437, 5.784 -> 5.838, goodput 5.617 -> 5.668 (+0.8 % from the
    # simulator's 5.623 of before the change). SGLang's overlap step on token 1 (2026-12-07, test_overlap_step): 5.668
    # -> 5.666.
    ev = evaluate(opt13b_colocated("sglang", output_mean=400, ttft="1s"))
    assert ev.kv_comfort_limit_rps == pytest.approx(5.4373, abs=0.001)
    assert ev.stability_limit_rps == pytest.approx(5.838, abs=0.001)
    assert ev.goodput_rps == pytest.approx(5.666, abs=0.002)
    doc = ev.to_document()
    assert doc["beyond_comfortable_kv_limit"] is True
    assert "beyond the comfortable decode KV limit: requests queue for KV admission" in doc["binding_constraint"]


def test_past_the_mean_kv_limit_it_is_refused() -> None:
    model = _opt13b_kv_bound("trtllm")
    smaller = dataclasses.replace(model, decode=dataclasses.replace(model.decode, kv_capacity_tokens=60_000.0))
    limit = smaller.limit()
    assert limit.binding is Binding.DECODE_KV
    assert limit.rate_rps < model.limit().rate_rps
    assert limit.kv_comfort_rps is not None
    assert limit.kv_comfort_rps < limit.rate_rps


def test_seat_footprint_by_hand() -> None:
    """One seat at each decode step: steps 10 and 30 at 1/2 each give W = Σf² = E[n] = 20 seat·steps and
    c_s² = E[n²]/E[n]² − 1 = 500/400 − 1 = 0.25."""
    held = seat_held(decode_workload([100.0, 100.0], [10.0, 30.0], [0.5, 0.5]))
    assert (held.work, held.square_sum, held.scv) == pytest.approx((20.0, 20.0, 0.25))


def test_past_the_p99_seat_bound_requests_queue_for_a_seat() -> None:
    """OPT-13B on one A100 TP4, chunked (the DistServe example's colocated baseline), 256 seats (vLLM's default): the
    P99 seat bound lies below the utilisation limit, so past it the plan is priced with the seat wait on TTFT and
    marked, and refused only past the fluid seat limit λτ̄E[n] = 256 (module docstring of kv_admission, *Seats*)."""
    doc = opt13b_colocated("vllm").model_dump(mode="json", exclude_none=True)
    doc["colocated"]["tp"] = 4
    sc = scenario_from_dict(doc, source="test", base_dir=Path.cwd())
    model = build_model(resolve(sc, open_catalog()))
    assert isinstance(model, ColocatedModel)
    seats = model.seat_admission()
    assert seats.kv_capacity_tokens == model.decode.max_num_seqs == 256.0  # vLLM's default max_num_seqs
    assert seats.comfort_rate_per_s == pytest.approx(model.bound_rates().seats_rate_per_s)
    assert seats.comfort_rate_per_s < seats.mean_rate_per_s
    lt = seats.mean_rate_per_s * seats.tau_s(np.array([seats.mean_rate_per_s]))[0]
    assert lt * seats.held.work == pytest.approx(256.0, rel=1e-6)  # the fluid seat limit fills the seats
    foot = seats.wait(np.array([seats.comfort_rate_per_s * (1.0 + 1e-9)]))[0][0]
    # Halfin–Whitt at β = z₉₉ gives the P99 rule's own 0.0114; the queue takes the riding prefill p at the fluid limit
    # (0.021318 s) where the bound took p(λ) at its own rate (0.021240 s): 0.0141 at its foot
    assert foot == pytest.approx(0.0114, abs=0.004)
    limit = model.limit()
    assert limit.seat_comfort_rps is not None
    assert limit.seat_comfort_rps < limit.rate_rps
    mid = 0.5 * (limit.seat_comfort_rps + limit.rate_rps)
    prob, cond = model.admission_wait(np.array([mid]) / model.z)
    assert prob[0] > 0.0114
    assert model.ttft_parts(mid).queue_s >= prob[0] * cond[0]
    report = evaluate(sc).to_document()
    assert report["comfortable_seat_limit_rps"] == pytest.approx(limit.seat_comfort_rps)
