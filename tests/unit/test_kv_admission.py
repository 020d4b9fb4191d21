"""The decode KV admission queue (pdplan.queueing.kv_admission): the fluid limit, the Halfin-Whitt wait against
Erlang-C, and the delay it adds."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing import (
    DecodeWorkload,
    LinearStepTime,
    decode_capacity,
    decode_fixed_point,
    decode_workload,
    erlang_c,
)
from pdplan.queueing.kv_admission import KvAdmission, add_delays, kv_held, kv_mean_rate
from pdplan.queueing.link_delay import BinDelay

STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)  # docs/queueing.md §6.3 coefficients


def _admission(wl: DecodeWorkload, kv: float) -> KvAdmission:
    cap = decode_capacity(wl, STEP, kv_capacity_tokens=kv, max_num_seqs=1e9)
    held = kv_held(wl, 0.0, reserve=False)
    return KvAdmission(wl, held, STEP, kv, cap.kv_rate_per_s, kv_mean_rate(wl, held, STEP, kv))


def test_mean_rate_fills_the_kv_on_average() -> None:
    wl = decode_workload([500.0, 3000.0], [50.0, 300.0], [0.7, 0.3])
    held = kv_held(wl, 0.0, reserve=False)
    assert held.work == pytest.approx(wl.mean_work)
    assert held.square_sum == pytest.approx(wl.context_square_sum)
    lam = kv_mean_rate(wl, held, STEP, 200_000.0)
    st = decode_fixed_point([lam], wl, STEP)
    assert float(st.mean_context_tokens[0]) == pytest.approx(200_000.0, rel=1e-9)
    assert lam > decode_capacity(wl, STEP, kv_capacity_tokens=200_000.0, max_num_seqs=1e9).kv_rate_per_s


def test_no_wait_below_the_comfortable_limit_and_one_percent_at_it() -> None:
    wl = decode_workload([500.0, 3000.0], [50.0, 300.0], [0.7, 0.3])
    adm = _admission(wl, 200_000.0)
    rates = np.array([0.5, 0.999999, 1.000001, 1.2]) * adm.comfort_rate_per_s
    prob, cond = adm.wait(rates)
    assert prob[0] == prob[1] == cond[0] == 0.0
    assert 0.008 < prob[2] < 0.014  # β = z99 at the P99 limit: [1 + β Φ(β)/φ(β)]⁻¹ = 0.011
    assert prob[3] > prob[2]
    assert cond[3] > cond[2] > 0.0


def test_halfin_whitt_close_to_erlang_c_on_equal_footprints() -> None:
    """Long fixed prompts and short outputs: every sequence holds ≈ L tokens, so the KV is c = M/L seats and the
    wait probability is M/G/c's; Erlang-C (M/M/c) within 15 % over β ≈ 0.5-1.5."""
    lin, n = 4000.0, 4.0
    wl = decode_workload([lin], [n], [1.0])
    step = LinearStepTime(8e-3, 0.0, 0.0)  # no load feedback: F = 1
    seats = 100
    r_bar = wl.mean_work / wl.mean_steps
    kv = seats * r_bar
    held = kv_held(wl, 0.0, reserve=False)
    adm = KvAdmission(wl, held, step, kv, 0.0, kv_mean_rate(wl, held, step, kv))
    for a in (85.0, 90.0, 95.0):
        lam = a / (n * 8e-3)
        prob, _ = adm.wait(np.array([lam]))
        assert prob[0] == pytest.approx(float(erlang_c(seats, a)[0]), rel=0.15)


def test_reserved_footprint_holds_the_whole_request() -> None:
    """TensorRT-LLM's GUARANTEED_NO_EVICT: L + n for all n steps, more than the growing context, so a lower limit."""
    wl = decode_workload([500.0, 3000.0], [50.0, 300.0], [0.7, 0.3])
    grow, keep = kv_held(wl, 16.0, reserve=False), kv_held(wl, 16.0, reserve=True)
    assert keep.work == pytest.approx(0.7 * 50 * 566 + 0.3 * 300 * 3316)
    assert keep.square_sum == pytest.approx(0.7 * 50 * 566**2 + 0.3 * 300 * 3316**2)
    assert keep.work > grow.work
    assert kv_mean_rate(wl, keep, STEP, 2e5) < kv_mean_rate(wl, grow, STEP, 2e5)


def test_work_scv_and_delay_moments() -> None:
    wl = decode_workload([1000.0], [100.0], [1.0])
    assert kv_held(wl, 0.0, reserve=False).scv == pytest.approx(0.0, abs=1e-12)
    adm = _admission(wl, 60_000.0)
    rate = np.array([1.1 * adm.comfort_rate_per_s])
    prob, cond = adm.wait(rate)
    delay = adm.delay(rate)
    assert float(delay.weights.sum()) == pytest.approx(1.0)
    assert float(delay.bin_mean_s[0, 0]) == pytest.approx(float(prob[0] * cond[0]), rel=0.05)
    link = BinDelay(np.array([[[0.0, 0.2], [0.0, 0.4]]]), np.array([[[0.5, 0.5], [0.9, 0.1]]]))
    both = add_delays(link, delay, 16)
    assert both.points_s.shape == (1, 2, 17)
    np.testing.assert_allclose(both.weights.sum(axis=2), 1.0)
    np.testing.assert_allclose(both.weights[0, :, 0], [0.5 * (1 - prob[0]), 0.9 * (1 - prob[0])])  # both at 0
    np.testing.assert_allclose(both.bin_mean_s[0], link.bin_mean_s[0] + delay.bin_mean_s[0, 0], rtol=0.05)


def test_distserve_example_runs_past_its_comfortable_kv_limit() -> None:
    """Issue #23 item 5: DistServe's OPT-13B 1P1D ran at 6 and 7.5 req/s; pdplan called both unstable (decode KV at
    5.46 req/s). Now the stability limit is the mean KV occupancy and the plan is flagged past the P99 one."""
    from pathlib import Path

    from pdplan.evaluation.evaluate import evaluate
    from pdplan.io.scenario import load_scenario
    from pdplan.serving.limits import BEYOND_KV_COMFORT
    from pdplan.types import Binding

    root = Path(__file__).resolve().parents[2]
    ev = evaluate(load_scenario(root / "examples" / "opt-13b-a100-distserve.yaml"))
    assert ev.stability_binding == Binding.DECODE_KV
    assert ev.kv_comfort_limit_rps is not None
    assert ev.kv_comfort_limit_rps < ev.goodput_rps < ev.stability_limit_rps
    assert ev.goodput_rps > 6.0
    assert ev.binding_constraint.endswith(f"({BEYOND_KV_COMFORT})")
    doc = ev.to_document()
    assert doc["beyond_comfortable_kv_limit"] is True
    assert doc["comfortable_kv_limit_rps"] == ev.kv_comfort_limit_rps
    plain = evaluate(load_scenario(root / "examples" / "default.yaml"))  # bound by prefill: no KV queue, no keys
    assert plain.stability_binding == Binding.PREFILL_UTILISATION
    assert plain.kv_comfort_limit_rps is None
    assert "comfortable_kv_limit_rps" not in plain.to_document()
    assert "beyond_comfortable_kv_limit" not in plain.to_document()
