"""Planning a capacity review with the optimiser (pdplan.search.planning and the search it drives): planning margins
(headroom, n+1), prices and dollar budgets, the objective's own words, the comparable baseline, the sensitivity rows
(and their "meets target"), E2E and ITL, and "why not"."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from support.plan_fixture import pick, runner_up

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.report.markdown import to_markdown
from pdplan.search.exact import degraded
from pdplan.search.optimize import optimize
from pdplan.search.planning import price_sensitivity
from pdplan.search.plans import Plan, PlanResult
from pdplan.search.space import build_space
from pdplan.serving import Deployment, bind, build_model, find_goodput, resolve
from pdplan.serving.deployment import Colocated, Disaggregated
from pdplan.serving.deployment import Role as RoleChoice
from pdplan.specs.scenario import Scenario

DATA = Path(__file__).parents[1] / "data"
EXAMPLES = Path(__file__).parents[2] / "examples"
pytestmark = pytest.mark.xdist_group("planning")  # one worker runs the module, so each _run(key) optimises once


def _small(**search: object) -> Scenario:
    sc = load_scenario(DATA / "small_scenario.yaml")
    assert sc.search is not None
    return sc.model_copy(update={"search": sc.search.model_copy(update=search)})


@cache
def _run(key: str) -> PlanResult:
    """One optimisation per case (nine cases, all kept), shared by the tests that read it."""
    catalog = open_catalog()
    cases = {
        "default": lambda: optimize(_small(), catalog=catalog),
        "headroom": lambda: optimize(_small(), catalog=catalog, headroom=0.25),
        "n+1": lambda: optimize(_small(), catalog=catalog, redundancy="n+1"),
        "cost-h20": lambda: optimize(
            _small(prefill_gpus=["h20", "h100-sxm"], decode_gpus=["h20", "h100-sxm"]), catalog=catalog, objective="cost"
        ),
        "priced-h20": lambda: optimize(
            _small(prefill_gpus=["h20", "h100-sxm"], decode_gpus=["h20", "h100-sxm"]),
            catalog=catalog,
            objective="cost",
            prices={"h20": 1.0},
        ),
        "colocated-3": lambda: optimize(_small(), catalog=catalog, colocated_count=3),
        "tpd-budget": lambda: optimize(_small(), catalog=catalog, objective="tokens-per-dollar", budget_gpus=6),
        "tpd-rate": lambda: optimize(_small(), catalog=catalog, objective="tokens-per-dollar", rate_rps=30.0),
        "dollars": lambda: optimize(_small(), catalog=catalog, budget_usd_per_hour=12.0),
    }
    return cases[key]()


def _rebuilt_goodput(res_scenario: Scenario, d: Deployment) -> float:
    base = resolve(res_scenario, open_catalog())
    return find_goodput(build_model(bind(base, d)), res_scenario.slo).rate_rps


def _deployment(p: Plan) -> Deployment:
    """The deployment a reported plan describes."""
    if p.colocated is not None:
        assert p.scheduler is not None
        return Colocated(p.colocated, scheduler=p.scheduler, max_num_seqs=p.max_num_seqs)
    assert p.prefill is not None
    assert p.decode is not None
    assert p.link is not None
    assert p.granularity is not None
    assert p.routing is not None
    return Disaggregated(
        p.prefill,
        p.decode,
        granularity=p.granularity,
        link=p.link,
        routing=p.routing,
        max_num_seqs=p.max_num_seqs,
    )


# --- headroom -----------------------------------------------------------------------------------------------


def test_headroom_reports_the_slo_meeting_rate_over_one_plus_h() -> None:
    result = _run("headroom")
    plan = result.best
    limit = _rebuilt_goodput(_small(), _deployment(plan))
    assert plan.goodput_rps == pytest.approx(limit / 1.25, rel=1e-6)
    assert plan.operating_rate_rps == pytest.approx(plan.goodput_rps, rel=1e-5)
    assert result.planning["headroom"] == 0.25
    assert "headroom 25%" in to_markdown(result)


@pytest.mark.slow
def test_headroom_lowers_goodput_against_no_margin() -> None:
    assert _run("headroom").best.goodput_rps_per_gpu < _run("default").best.goodput_rps_per_gpu


def test_default_headroom_is_printed_in_every_report() -> None:
    from pdplan.report import render_optimize
    from pdplan.report.render import Format

    result = _run("default")
    assert result.planning["headroom"] == 0.0
    from pdplan.report.table import optimize_renderable, to_text

    assert "headroom 0%" in to_text(optimize_renderable(result), width=400)
    assert "headroom 0%" in str(render_optimize(result, Format.markdown))
    assert result.to_document()["planning"]["headroom"] == 0.0
    assert result.to_document()["inputs"]["planning"]["redundancy"] == "none"


def test_headroom_out_of_range_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="--headroom"):
        build_space(_small(), open_catalog(), headroom=-0.1)
    with pytest.raises(SpecError, match="--redundancy"):
        build_space(_small(), open_catalog(), redundancy="n+2")


# --- n+1 redundancy -------------------------------------------------------------------------------------------


def test_n_plus_one_goodput_is_that_of_one_instance_per_pool_down() -> None:
    result = _run("n+1")
    for plan in (*result.plans, result.baseline):
        assert plan is not None
        for role in (plan.prefill, plan.decode, plan.colocated):
            assert role is None or role.count >= 2
    plan = result.best
    down = degraded(_deployment(plan))
    assert plan.goodput_rps == pytest.approx(_rebuilt_goodput(_small(), down), rel=1e-6)


def test_degraded_refuses_a_single_instance_pool() -> None:
    from pdplan.errors import NoFeasiblePlanError

    def d(x: int, y: int) -> Disaggregated:
        return Disaggregated(
            RoleChoice("h100-sxm", 1, 1, x),
            RoleChoice("h100-sxm", 1, 1, y),
            granularity="layer",
            link="ib-ndr",
            routing="least-work",
        )

    with pytest.raises(NoFeasiblePlanError, match="two instances"):
        degraded(d(1, 3))
    down = degraded(d(3, 2))
    assert isinstance(down, Disaggregated)
    assert (down.prefill, down.decode) == (RoleChoice("h100-sxm", 1, 1, 2), RoleChoice("h100-sxm", 1, 1, 1))


# --- prices, dollar budget, unpriced GPUs -----------------------------------------------------------------------


def test_unpriced_gpus_are_reported_as_skipped_in_a_cost_search() -> None:
    result = _run("cost-h20")
    skipped = [w for w in result.warnings if w.startswith("h20 skipped")]
    assert skipped
    assert "--price h20=" in skipped[0]
    assert all("h20" not in p.label for p in result.plans)
    assert any(r["gpu"] == "h20" and "no price" in str(r["reason"]) for r in result.rejected)
    assert "h20 skipped" in to_markdown(result)
    assert any(w.startswith("h20 skipped") for w in result.to_document()["warnings"])


@pytest.mark.slow
def test_price_override_prices_the_gpu() -> None:
    result = _run("priced-h20")
    assert not any(w.startswith("h20 skipped") for w in result.warnings)
    assert result.inputs["gpus"]["h20"]["price_usd_per_gpu_hour"] == 1.0
    assert "--price h20=1" in result.inputs["gpus"]["h20"]["price_source"]
    for plan in result.plans:
        assert plan.cost_usd_per_hour is not None
        expected = sum(
            r.gpus * (1.0 if r.gpu == "h20" else 3.45) for r in (plan.prefill, plan.decode, plan.colocated) if r
        )
        assert plan.cost_usd_per_hour == pytest.approx(expected, rel=1e-9)


def test_price_override_of_an_unknown_gpu_fails() -> None:
    from pdplan.errors import UnknownNameError

    with pytest.raises(UnknownNameError):
        open_catalog().with_prices({"h999": 1.0})


@pytest.mark.slow
def test_dollar_budget_is_a_constraint() -> None:
    result = _run("dollars")
    assert result.plans
    for plan in result.plans:
        assert plan.cost_usd_per_hour is not None
        assert plan.cost_usd_per_hour <= 12.0
    assert "$12/h" in result.objective
    assert max(p.cost_usd_per_hour or 0 for p in _run("default").plans) > 12.0  # the budget did bind


def test_price_sensitivity_flips_the_pick_when_its_gpu_gets_dearer() -> None:
    """Hand-worked, at a rate target under objective cost, H100 at $3 and H20 at $2 per GPU-hour: the pick (12 H100
    GPUs) costs $36/h, the runner-up (6 H20 + 8 H100 GPUs) 6*2 + 8*3 = $36/h too and loses the tie on goodput per
    GPU. H100 +20 %: the pick 12*3.6 = $43.20/h, the runner-up 12 + 28.8 = $40.80/h, so it ranks first; H100 -20 %
    keeps the pick ($28.80 against $31.20); H20 -20 % makes the runner-up $33.60/h and flips it."""
    from dataclasses import replace

    from pdplan.search.space import Space

    a = replace(pick(), cost_usd_per_hour=36.0, goodput_rps=20.0)
    other = runner_up()
    assert isinstance(other.deployment, Disaggregated)
    b = replace(
        other,
        deployment=replace(
            other.deployment, prefill=RoleChoice("h20", 1, 1, 6), decode=RoleChoice("h100-sxm", 4, 1, 2)
        ),
        num_gpus=14,
        cost_usd_per_hour=6 * 2.0 + 8 * 3.0,
        goodput_rps=20.0,
    )
    space = build_space(_small(), open_catalog(), rate_rps=10.0, objective="cost")
    catalog = open_catalog().with_prices({"h100-sxm": 3.0, "h20": 2.0})
    rows = price_sensitivity([a, b], space, catalog)
    by = {(r.gpu, round(r.factor, 2)): r for r in rows}
    assert isinstance(space, Space)
    up = by[("h100-sxm", 1.2)]
    assert up.pick_cost_usd_per_hour == pytest.approx(12 * 3.6)
    assert up.winner == b.label
    assert up.winner_changes
    assert not by[("h100-sxm", 0.8)].winner_changes
    assert by[("h20", 0.8)].winner == b.label  # $33.6/h < $36/h: H20 cheaper flips it too


# --- objective words ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_markdown_names_the_objective_it_ranked_by() -> None:
    assert "It ranks first on goodput per $/h" in to_markdown(_run("priced-h20"))
    tpd = _run("tpd-budget")
    assert tpd.objective.startswith("maximise output tokens/s per $/h within 6 GPUs")
    assert "It ranks first on output tokens/s per $/h" in to_markdown(tpd) or "only plan" in to_markdown(tpd)
    rate = _run("tpd-rate")
    assert "lowest cost" in rate.objective
    assert "fewest GPUs" not in rate.objective
    assert "It ranks first on cost per hour" in to_markdown(rate) or "only plan" in to_markdown(rate)
    assert "goodput per GPU (req/s)" not in to_markdown(rate).split("## Recommended")[1].split("## Alternatives")[0]


# --- baseline and sensitivity -------------------------------------------------------------------------------


def test_colocated_count_sets_the_baseline_size() -> None:
    result = _run("colocated-3")
    assert result.baseline is not None
    assert result.baseline.colocated is not None
    assert result.baseline.colocated.count == 3


def test_budget_baseline_is_the_most_instances_within_the_picks_gpus() -> None:
    result = _run("default")
    base, plan = result.baseline, result.best
    assert base is not None
    assert base.colocated is not None
    per_instance = base.colocated.tp * base.colocated.pp
    assert base.num_gpus <= plan.num_gpus < base.num_gpus + per_instance or base.colocated.count == 4


def test_rate_rows_report_what_the_rate_changes() -> None:
    rows = {s.change.split(" (")[0]: s for s in _run("default").sensitivity}
    low, high = rows["rate x0.8"], rows["rate x1.2"]
    assert low.goodput_rps != high.goodput_rps
    rate = _run("default").best.operating_rate_rps
    assert low.attainment is not None
    assert low.goodput_rps == pytest.approx(0.8 * rate * low.attainment, rel=1e-9)


def test_isl_and_osl_rows_move_goodput_the_physical_way() -> None:
    rows = {s.change.split(" (")[0]: s for s in _run("default").sensitivity}
    best = _run("default").best.goodput_rps
    assert rows["ISL x1.2"].goodput_rps < best * 0.99 < best * 1.01 < rows["ISL x0.8"].goodput_rps
    assert rows["OSL x1.2"].goodput_rps <= best * (1 + 1e-3)


# --- metrics ------------------------------------------------------------------------------------------------


def test_e2e_and_itl_hand_worked_on_fixed_lengths() -> None:
    """Fixed 512/64 tokens: every request has 63 decode gaps, so E2E = E[TTFT] + 63 E[TPOT] and ITL = E[TPOT]."""
    from pdplan.io.overrides import apply_overrides
    from pdplan.specs.command_line import ScenarioOverrides

    sc = apply_overrides(_small(), ScenarioOverrides(isl=512, osl=64))
    plan = optimize(sc, catalog=open_catalog(), analyse=False, top=1).best
    assert plan.ttft_s is not None
    assert plan.tpot_s is not None
    assert plan.e2e_mean_s == pytest.approx(plan.ttft_s.mean + 63 * plan.tpot_s.mean, rel=1e-6)
    assert plan.itl_mean_s == pytest.approx(plan.tpot_s.mean, rel=1e-6)
    assert plan.output_tokens_per_s_per_gpu == pytest.approx(plan.goodput_rps * 64 / plan.num_gpus, rel=1e-6)


def test_metrics_in_json_csv_and_tables() -> None:
    from pdplan.report.csv import to_csv
    from pdplan.report.table import optimize_renderable, to_text

    result = _run("default")
    doc = result.to_document()["plans"][0]
    for key in ("e2e_mean_s", "itl_mean_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user"):
        assert isinstance(doc[key], float)
        assert doc[key] > 0
    assert doc["e2e_mean_s"] > doc["ttft_s"]["mean"]
    header = to_csv(result).splitlines()[0].split(",")
    assert {"e2e_mean_s", "itl_mean_s", "output_tokens_per_s_per_gpu", "cost_usd_per_hour"} <= set(header)
    text = to_text(optimize_renderable(result), width=400)
    assert "$/h" in text
    for word in ("E2E", "ITL", "tok/s"):  # headers break one word per line (report/table.py)
        assert word in text


# --- why not ------------------------------------------------------------------------------------------------


def test_why_not_explains_the_l40s_of_the_mixed_example() -> None:
    result = optimize(load_scenario(EXAMPLES / "h100-prefill-l40s-decode.yaml"), catalog=open_catalog(), analyse=False)
    used = {r.gpu for p in (*result.plans, result.baseline) if p for r in (p.prefill, p.decode, p.colocated) if r}
    rows = [r for r in result.rejected if r["gpu"] == "l40s"]
    if "l40s" not in used:
        assert rows, "an L40S type the search tried must be explained"
    for r in result.rejected:
        assert r["reason"]
        assert r["role"] in ("prefill", "decode", "colocated")
    assert "## Why not" in to_markdown(result)
    assert result.to_document()["why_not"] == [dict(r) for r in result.rejected]


def test_why_not_lists_tp_sizes_dropped_before_the_screen() -> None:
    space = build_space(_small(tp=[1, 2, 16]), open_catalog())
    reasons = [r for r in space.rejected if r["tp"] == 16]
    assert reasons
    assert "node" in str(reasons[0]["reason"])


# --- flags that were YAML-only ------------------------------------------------------------------------------


def test_pp_in_the_search_block_is_honoured() -> None:
    space = build_space(_small(pp=[2]), open_catalog())
    assert {h.pp for h in (*space.prefill, *space.decode)} == {2}
    assert np.all([h.pp == 1 for h in build_space(_small(), open_catalog()).prefill])


def test_rank_skips_unpriced_candidates_only_when_the_objective_reads_prices() -> None:
    """Hand-worked: three candidates, the best per GPU unpriced (NaN cost)."""
    from pdplan.search.select import Metrics, rank

    m = Metrics(
        goodput_rps=np.array([10.0, 8.0, 6.0]),
        num_gpus=np.array([4.0, 4.0, 4.0]),
        cost_usd_per_hour=np.array([np.nan, 12.0, 8.0]),
        output_tokens_per_s=np.array([1000.0, 800.0, 600.0]),
    )
    assert rank(m, objective="gpus", budget_gpus=None, rate_rps=None).tolist() == [0, 1, 2]
    assert rank(m, objective="cost", budget_gpus=None, rate_rps=None).tolist() == [2, 1]  # 0.75 vs 0.667 req/s per $/h
    assert rank(m, objective="gpus", budget_gpus=None, rate_rps=None, budget_usd_per_hour=10.0).tolist() == [2]


def test_planning_margins_from_the_search_block() -> None:
    space = build_space(_small(headroom=0.1, redundancy="n+1", budget_usd_per_hour=50.0), open_catalog())
    assert (space.headroom, space.redundancy, space.budget_usd_per_hour) == (0.1, "n+1", 50.0)
    wins = build_space(_small(headroom=0.1), open_catalog(), headroom=0.3)
    assert wins.headroom == 0.3  # the argument (command line) wins over the block


def test_an_unchanged_goodput_meets_the_target_in_the_sensitivity_rows() -> None:
    """The default pick's link x0.5 row used to read "meets target: no" at 55.5353 vs 55.5354 (the link does not
    bind; the two goodputs differ by the root's tolerance)."""
    result = optimize(load_scenario(EXAMPLES / "default.yaml"), catalog=open_catalog(), top=1)
    link = next(s for s in result.sensitivity if s.change.startswith("link"))
    assert link.goodput_rps == pytest.approx(result.best.goodput_rps, rel=3e-3)
    assert link.meets_target
