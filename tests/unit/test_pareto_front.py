"""The Pareto front is decided on the numbers the report prints (exact where a plan was re-evaluated)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.optimized import Optimized

from pdplan import load_scenario, optimize
from pdplan.search.plans import Plan

ROOT = Path(__file__).parents[2]


def _dominates(a: Plan, b: Plan) -> bool:
    ax, ay, bx, by = a.goodput_rps_per_gpu, a.tokens_per_s_per_user, b.goodput_rps_per_gpu, b.tokens_per_s_per_user
    return ax >= bx and ay >= by and (ax > bx or ay > by)


@pytest.mark.xdist_group("optimized")
def test_no_front_plan_is_dominated_and_rank_1_is_on_it(optimized: Optimized) -> None:
    """Default run: rank 2 (1.941 req/s per GPU, 30.3 tok/s per user) used to be on the front while rank 1
    (1.983, 32.0), which dominates it, was not."""
    result = optimized("default", analyse=False)  # optimize(examples/default.yaml, analyse=False), shared
    shown = [*result.plans, *result.pareto, *([result.baseline] if result.baseline else [])]
    for p in result.pareto:
        assert not any(_dominates(q, p) for q in shown), p.label
    best = result.plans[0]
    if not any(_dominates(q, best) for q in shown):
        assert best in result.pareto


def test_the_question_and_the_objective_name_the_same_objective() -> None:
    """``--objective tokens-per-dollar --gpus 24`` used to ask how to "maximise goodput per GPU"; with a rate target
    it silently ranked by fewest GPUs."""
    sc = load_scenario(ROOT / "examples" / "default.yaml")
    budget = optimize(sc, budget_gpus=24, objective="tokens-per-dollar", analyse=False, top=1)
    assert "output tokens/s per $/h" in budget.objective
    assert budget.objective in budget.question
    target = optimize(sc, rate_rps=20.0, objective="tokens-per-dollar", analyse=False, top=3)
    assert "lowest cost" in target.objective
    assert target.objective in target.question
    costs = [p.cost_usd_per_hour for p in target.plans]
    assert all(c is not None for c in costs)
    assert costs == sorted(costs)  # type: ignore[type-var]


def test_a_rate_target_reports_as_many_plans_as_asked_when_enough_pass() -> None:
    sc = load_scenario(ROOT / "examples" / "default.yaml")
    result = optimize(sc, rate_rps=20.0, analyse=False, top=5)
    assert result.search.feasible >= 5
    assert len(result.plans) == 5
