"""A pick's rows away from its goodput on the line of its concave decode law each rate runs on
(pdplan.search.law_rows): Mixtral-8x7B on H100 TP2 under vLLM 0.18, whose goodput runs on the flat line and whose
light loads run on the steep one (P90 TPOT at 0.2 req/s: 8.9 ms on the steep line against 17.7 ms on the flat)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from support.vllm018_colocated import vllm018_colocated

from pdplan.search.exact import evaluate_exact
from pdplan.search.law_rows import line_models, rate_curve, rate_rows
from pdplan.serving.build import goodput_model, mean_step_s, model_at_rate
from pdplan.serving.decode_lines import least_step_lines


@pytest.fixture(scope="module")
def pick() -> Any:
    res = vllm018_colocated("mixtral-8x7b", 2)
    bound, model, good = goodput_model(res, res.scenario.slo)
    plan = SimpleNamespace(operating_rate_rps=good.rate_rps)
    return SimpleNamespace(res=bound, model=model, plan=plan, lines=line_models(bound, model))


def test_light_loads_run_on_the_steep_line(pick: Any) -> None:
    """The goodput's line is the flat one (index 1); at 0.2 req/s the steep line's mean step is the least, and its
    P90 TPOT is 0.50 of the flat line's there."""
    assert pick.res.decode_line == 1
    models = line_models(pick.res, pick.model)
    assert len(models) == 2
    assert models[1] is pick.model
    assert list(least_step_lines(models, np.array([0.2, pick.plan.operating_rate_rps * 0.9]), mean_step_s)) == [0, 1]
    steep, flat = (float(m.snapshot(np.array([0.2])).tpot_at_percentile_s(90)[0]) for m in models)
    assert steep < 0.55 * flat


def test_rate_curve_reads_each_rates_line_as_evaluate_does(pick: Any) -> None:
    """Every point of the curve equals ``evaluate --rate``'s model there (pdplan.serving.build.model_at_rate, which
    picks the line by its own route), and none prices above the goodput line's model at the same rate; the first
    point (0.80 req/s) runs on the steep line, P99 TPOT 17.3 ms against the flat line's 18.4."""
    curve = rate_curve(pick, points=6)
    slo = pick.res.scenario.slo
    law = dataclasses.replace(pick.res, decode_line=None)
    for rate, att, ttft, tpot in curve:
        snap = model_at_rate(law, rate).snapshot(np.array([rate]))
        assert tpot == pytest.approx(float(snap.tpot_at_percentile_s(slo.percentile)[0]), rel=1e-12)
        assert ttft == pytest.approx(float(snap.ttft_at_percentile_s(slo.percentile)[0]), rel=1e-12)
        assert att == pytest.approx(float(snap.attainment(slo.ttft, slo.tpot)[0]), rel=1e-12)
        own = pick.model.snapshot(np.array([rate])).tpot_at_percentile_s(slo.percentile)[0]
        assert tpot <= float(own) * (1.0 + 1e-12)
    assert curve[0][3] < 0.97 * float(pick.model.snapshot(np.array([curve[0][0]])).tpot_at_percentile_s(99)[0])


def test_rate_rows_use_the_laws_limit(pick: Any) -> None:
    """Rate x1.2 lies past the law's stable limit (the largest of its lines', 15.97 req/s): no goodput there."""
    low, high = rate_rows(pick)
    assert low.attainment is not None
    assert low.attainment > 0.9
    assert high.goodput_rps == 0.0
    assert "beyond the stable limit of 15.97 req/s" in high.note


def test_a_target_rates_operating_point_runs_on_its_line() -> None:
    """``optimize --rate 1``: the plan's goodput is the law's (the flat line's, 15.92 req/s), its latencies at 1 req/s
    those of the steep line that rate runs on, as ``evaluate --rate 1`` prices them."""
    res = vllm018_colocated("mixtral-8x7b", 2)
    exact = evaluate_exact(res, res.hardware.deployment, target_rps=1.0)
    assert exact is not None
    assert exact.res.decode_line == 0
    assert exact.plan.goodput_rps == pytest.approx(15.92, rel=1e-3)
    snap = model_at_rate(res, 1.0).snapshot(np.array([1.0]))
    assert exact.plan.tpot_s is not None
    assert exact.plan.tpot_s.p90 == pytest.approx(snap.tpot_summary(99)[0].p90, rel=1e-12)
