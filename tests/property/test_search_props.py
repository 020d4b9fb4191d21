"""Optimiser invariants (hypothesis): budgets, SLOs, and the pick re-evaluated alone."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.errors import NoFeasiblePlanError
from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.optimize import optimize
from pdplan.serving.deployment import scenario_with

SMALL = load_scenario(Path(__file__).parents[1] / "data" / "small_scenario.yaml")
CATALOG = open_catalog()


def _best_per_gpu(**kwargs: object) -> float:
    try:
        return optimize(SMALL, catalog=CATALOG, analyse=False, top=1, **kwargs).best.goodput_rps_per_gpu  # type: ignore[arg-type]
    except NoFeasiblePlanError:
        return 0.0


@pytest.mark.slow
@settings(deadline=None, max_examples=4)
@given(budget=st.integers(1, 10), extra=st.integers(1, 8))
def test_a_larger_gpu_budget_never_lowers_the_best_goodput_per_gpu(budget: int, extra: int) -> None:
    assert _best_per_gpu(budget_gpus=budget + extra) >= _best_per_gpu(budget_gpus=budget) * (1 - 1e-9)


@pytest.mark.slow
@settings(deadline=None, max_examples=4)
@given(factor=st.floats(1.05, 2.0))
def test_a_looser_slo_never_lowers_the_best_goodput(factor: float) -> None:
    tight = optimize(SMALL, catalog=CATALOG, analyse=False, top=1).best
    slo = SMALL.slo.model_copy(update={"ttft": SMALL.slo.ttft * factor, "tpot": SMALL.slo.tpot * factor})
    loose_sc = SMALL.model_copy(update={"slo": slo})
    loose = optimize(loose_sc, catalog=CATALOG, analyse=False, top=1).best
    assert loose.goodput_rps_per_gpu >= tight.goodput_rps_per_gpu * (1 - 1e-6)


@pytest.mark.parametrize("kwargs", [{}, {"rate_rps": 50.0}, {"budget_gpus": 4}])
def test_the_best_plan_meets_the_slo_when_evaluated_alone(kwargs: dict[str, object]) -> None:
    best = optimize(SMALL, catalog=CATALOG, analyse=False, top=1, **kwargs).best  # type: ignore[arg-type]
    deployment = best.deployment
    alone = evaluate(scenario_with(SMALL, deployment), catalog=CATALOG, rate=best.operating_rate_rps)
    assert alone.operating_point is not None
    assert alone.operating_point.attainment >= SMALL.slo.attainment - 1e-3
    assert alone.goodput_rps == pytest.approx(best.goodput_rps, rel=1e-6)
    if "rate_rps" in kwargs:
        assert alone.goodput_rps >= 50.0
