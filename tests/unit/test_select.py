"""Selecting plans (pdplan.search.select) by hand: ranking under each objective, feasibility, the Pareto front."""

import numpy as np

from pdplan.search.select import Metrics, feasible_mask, pareto_front, rank

NAN = float("nan")


def _metrics(goodput: list[float], gpus: list[float], cost: list[float] | None = None) -> Metrics:
    g = np.array(goodput)
    return Metrics(g, np.array(gpus), np.array(cost if cost is not None else [NAN] * len(goodput)), g * 100.0)


def test_budget_objective_ranks_by_goodput_per_gpu_with_fewer_gpus_breaking_ties() -> None:
    # per GPU: 2.0, 2.0, 1.5, 0 (infeasible), 3.0 but 40 GPUs (over the budget of 32)
    m = _metrics([8.0, 4.0, 6.0, 0.0, 120.0], [4, 2, 4, 2, 40])
    assert rank(m, objective="gpus", budget_gpus=32, rate_rps=None).tolist() == [1, 0, 2]
    assert rank(m, objective="gpus", budget_gpus=None, rate_rps=None).tolist() == [4, 1, 0, 2]


def test_rate_objective_minimises_gpus_or_cost() -> None:
    # target 5 req/s: candidates 0 (8 rps, 4 GPUs, $8/h) and 2 (6 rps, 4 GPUs, $6/h) and 4 (120 rps, 40 GPUs)
    m = _metrics([8.0, 4.0, 6.0, 0.0, 120.0], [4, 2, 4, 2, 40], [8.0, 4.0, 6.0, 2.0, 80.0])
    assert rank(m, objective="gpus", budget_gpus=None, rate_rps=5.0).tolist() == [0, 2, 4]
    assert rank(m, objective="cost", budget_gpus=None, rate_rps=5.0).tolist() == [2, 0, 4]
    assert feasible_mask(m, budget_gpus=None, rate_rps=5.0).tolist() == [True, False, True, False, True]


def test_pareto_front_keeps_only_undominated_points() -> None:
    # (x, y): (3,1) (2,2) (1,3) are the front; (2,1) and (1,1) are dominated
    x = np.array([3.0, 2.0, 1.0, 2.0, 1.0])
    y = np.array([1.0, 2.0, 3.0, 1.0, 1.0])
    assert pareto_front(x, y).tolist() == [0, 1, 2]
