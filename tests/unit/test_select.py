"""Optimiser building blocks worked by hand: ranking, Pareto front, Erlang C grid, goodput from a curve."""

import numpy as np
import pytest

from pdplan.queueing import erlang_c
from pdplan.search.screen import goodput_from_curve
from pdplan.search.select import Metrics, feasible_mask, pareto_front, rank
from pdplan.search.tables import erlang_c_grid, interp_rows

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


def test_erlang_c_grid_matches_the_scalar_recursion() -> None:
    servers = np.array([1.0, 2.0, 4.0, 8.0])
    load = np.array([0.5, 1.0, 3.0, 6.4])
    expected = [float(erlang_c(int(c), a)[0]) for c, a in zip(servers, load, strict=True)]
    assert erlang_c_grid(servers, load).tolist() == pytest.approx(expected, rel=1e-12)
    assert float(erlang_c_grid(np.array([2.0]), np.array([1.0]))[0]) == pytest.approx(1 / 3)


def test_goodput_from_curve_interpolates_in_log_rate() -> None:
    lam = np.array([1.0, 2.0, 4.0, 8.0])
    att = np.array(
        [
            [0.99, 0.95, 0.85, 0.5],  # crosses 0.9 halfway between 2 and 4 (log-linear): 2·√2
            [0.99, 0.99, 0.99, 0.99],  # never fails on the grid: the last rate
            [0.5, 0.4, 0.3, 0.2],
        ]
    )  # fails even at the lowest rate: 0
    good, first_bad = goodput_from_curve(att, lam, 0.9)
    assert good.tolist() == pytest.approx([2.0 * np.sqrt(2.0), 8.0, 0.0])
    assert first_bad.tolist() == [2, 3, 0]


def test_interp_rows_is_linear_between_grid_rows() -> None:
    table = np.array([[0.0, 10.0], [1.0, 20.0], [3.0, 40.0]])
    grid = np.array([0.0, 1.0, 2.0])
    got = interp_rows(table, grid, np.array([0.5, 1.5, 5.0]))
    assert got.tolist() == [[0.5, 15.0], [2.0, 30.0], [3.0, 40.0]]


def test_plan_label_spaces_pipeline_parallelism_like_every_other_label() -> None:
    """``h100-sxm TP4 PP2``, as the report's role text and RoleHardware.label write it (was ``TP4PP2``)."""
    from pdplan.search.plans import Plan
    from pdplan.serving.deployment import Disaggregated, Role

    d = Disaggregated(
        prefill=Role("h100-sxm", tp=4, pp=2, count=2),
        decode=Role("h100-sxm", tp=4, pp=1, count=1),
        granularity="layer",
        link="ib-ndr",
        routing="least-work",
    )
    plan = Plan.of(
        d,
        max_num_seqs=256,
        num_gpus=20,
        goodput_rps=1.0,
        output_tokens_per_s=100.0,
        cost_usd_per_hour=None,
        operating_rate_rps=1.0,
        binding_constraint="TTFT at P90",
        tpot_mean_s=0.05,
        exact=False,
    )
    assert plan.label == "2P1D h100-sxm TP4 PP2 / h100-sxm TP4 layer"
    assert plan.tokens_per_s_per_user == pytest.approx(20.0)
    assert plan.deployment == d  # the inverse of Plan.of
