"""``optimize`` of PrfaaS deployments (pdplan.search.prfaas): splits, threshold search, pinning, rate mode,
reports, and the guarantee against homogeneous PD on the same local GPUs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from support.optimized import Optimized

from pdplan.errors import NoFeasiblePlanError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.report import render_optimize
from pdplan.search.optimize import optimize
from pdplan.search.plans import PlanResult
from pdplan.search.prfaas import local_splits
from pdplan.serving import Disaggregated, Role, resolve
from pdplan.serving.checks.prfaas import prfaas_breaches
from pdplan.serving.prfaas.build import prfaas_setup
from pdplan.serving.prfaas.queue import RATE_XTOL, goodput

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
H20 = EXAMPLES / "prfaas-h200-h20.yaml"
H100 = EXAMPLES / "prfaas-h200-h100.yaml"


def _res(prefill: Role, decode: Role) -> Disaggregated:
    return Disaggregated(prefill, decode, "ib-ndr", "layer", "least-work")


def test_local_splits_are_the_maximal_ones() -> None:
    """8-GPU instances on 64 GPUs: 1P7D … 7P1D. TP4 prefill + TP8 decode on 24 GPUs: 1P2D leaves 4 GPUs (room for
    one more prefill instance: not maximal), 2P2D uses 24, 3P1D leaves 4 (not maximal), 4P1D uses 24."""
    same = _res(Role("h20", 8, 1, 3), Role("h20", 8, 1, 5))
    assert local_splits(same, None, None) == [(n, 8 - n) for n in range(1, 8)]
    mixed = _res(Role("h100-sxm", 4, 1, 1), Role("h100-sxm", 8, 1, 1))
    assert local_splits(mixed, 24, None) == [(2, 2), (4, 1)]
    assert local_splits(same, None, (3, 5)) == [(3, 5)]
    with pytest.raises(NoFeasiblePlanError, match="fits no prefill"):
        local_splits(same, 8, None)


@pytest.fixture(scope="module")
def h20(optimized: Optimized) -> PlanResult:
    """``optimize`` of examples/prfaas-h200-h20.yaml (shared: tests/support/optimized.py)."""
    return optimized(H20)


def _homogeneous_best(path: Path, total: int) -> float:
    """Homogeneous PD on the same local GPUs, computed here apart from the search: the best goodput over every
    prefill/decode split of ``total`` instances with nothing offloaded."""
    sc = load_scenario(path)
    setup = prfaas_setup(resolve(sc, open_catalog()))
    cap = setup.capacity
    best = 0.0
    for n_p in range(1, total):
        c = cap.__class__(
            law=cap.law,
            mean_output_tokens=cap.mean_output_tokens,
            remote=cap.remote.__class__(cap.remote.curves, 0),
            local=cap.local.__class__(cap.local.curves, n_p),
            decode=cap.decode.__class__(cap.decode.tokens_per_s_per_instance, total - n_p, cap.decode.source),
            link_bytes_per_s=cap.link_bytes_per_s,
        )
        trial = setup.__class__(**{**setup.__dict__, "capacity": c})
        best = max(best, goodput(trial, cap.law.upper, sc.slo.ttft, sc.slo.attainment).goodput_rps)
    return best


@pytest.mark.xdist_group("optimized")
def test_searched_plan_beats_homogeneous_pd_on_the_same_local_gpus(h20: PlanResult) -> None:
    pick = h20.best
    assert pick.prfaas is not None
    homo = _homogeneous_best(H20, 8)
    assert pick.goodput_rps >= homo * (1 - RATE_XTOL)
    assert pick.prfaas.gain_vs_homogeneous == pytest.approx(pick.goodput_rps / homo, rel=2 * RATE_XTOL)
    assert pick.goodput_rps > 2 * homo  # the paper's case: offloading long prompts more than doubles goodput


@pytest.mark.xdist_group("optimized")
def test_threshold_is_continuous_and_the_plan_carries_the_contract(h20: PlanResult) -> None:
    for plan in h20.plans:
        pf = plan.prfaas.to_document() if plan.prfaas is not None else None
        assert pf is not None
        assert pf["threshold_searched"]
        assert 128 < pf["threshold_tokens"] < 131072
        assert pf["threshold_tokens"] != round(pf["threshold_tokens"])  # a scalar search, not a token grid
        assert 0 < pf["offload_fraction"] < 1
        assert pf["remote_instances"] == 4
        assert plan.num_gpus == 8 * (plan.prefill.count + plan.decode.count) + 4 * 8  # type: ignore[union-attr]
        assert pf["remote_ttft_p90_s"] > 0
        assert pf["local_ttft_p90_s"] > 0
        assert plan.ttft_s is not None
        assert plan.ttft_s.p90 <= 20.0 * (1 + 1e-3)  # the SLO at its goodput
        assert pf["egress_gbps"] == pytest.approx(pf["link_utilization"] * 100 * 0.87, rel=1e-6)
    assert h20.best.prfaas is not None
    assert len(h20.best.prfaas.link_sensitivity) == 2


@pytest.mark.xdist_group("optimized")
def test_every_plan_passes_the_physics_invariants(h20: PlanResult) -> None:
    res = resolve(load_scenario(H20), open_catalog())
    setup = prfaas_setup(res)
    for plan in h20.plans:
        assert plan.prfaas is not None
        assert plan.prefill is not None
        assert plan.decode is not None
        from pdplan.search.prfaas import with_counts

        s = with_counts(setup, plan.prefill.count, plan.decode.count, plan.prfaas.remote_instances)
        assert prfaas_breaches(res, s, plan.prfaas.threshold_tokens, plan.operating_rate_rps) == []


def test_pinned_threshold_is_kept() -> None:
    sc = load_scenario(H20)
    pinned = sc.model_copy(update={"prfaas": sc.prfaas.model_copy(update={"threshold": 32768})})  # type: ignore[union-attr]
    result = optimize(pinned, catalog=open_catalog(), analyse=False)
    for plan in result.plans:
        assert plan.prfaas is not None
        assert plan.prfaas.threshold_tokens == 32768
        assert not plan.prfaas.threshold_searched


@pytest.mark.slow
def test_rate_target_searches_the_remote_count() -> None:
    """At 2.5 req/s three remote instances suffice on the case-study shape (four are needed for ~3.1): the search
    returns the fewest GPUs that meet the rate, remote ones counted."""
    result = optimize(load_scenario(H20), catalog=open_catalog(), rate_rps=2.5, analyse=False)
    pick = result.best
    assert pick.prfaas is not None
    assert pick.goodput_rps >= 2.5
    assert pick.prfaas.remote_instances < 4
    assert pick.operating_rate_rps == 2.5
    assert all(p.num_gpus >= pick.num_gpus for p in result.plans)


@pytest.mark.xdist_group("optimized")
def test_roofline_example_and_formats(optimized: Optimized) -> None:
    result = optimized(H100)
    pick = result.best
    assert pick.prfaas is not None
    assert pick.goodput_rps >= pick.prfaas.homogeneous_goodput_rps * (1 - RATE_XTOL)
    assert pick.cost_usd_per_hour is not None
    assert math.isfinite(pick.cost_usd_per_hour)
    md = str(render_optimize(result, "markdown"))
    assert "## Prefill-as-a-Service" in md
    assert "link bandwidth x0.5" in md
    csv = str(render_optimize(result, "csv"))
    assert "prfaas_threshold_tokens" in csv.splitlines()[0]


def test_invariants_catch_a_profile_faster_than_peak_and_an_overloaded_pool() -> None:
    """A remote curve of 1 µs per prompt beats the H200s' FLOP peak for Qwen3-Next (a prefill of 20K tokens needs
    ~2·3.9e9·2e4 FLOPs ≈ 1.6e14, tens of ms at TP4 peak): the TTFT floor breaks. 1,000 req/s on 1 local prefill
    instance breaks its compute ceiling."""
    from dataclasses import replace

    import numpy as np

    res = resolve(load_scenario(H100), open_catalog())
    setup = prfaas_setup(res)
    cap = setup.capacity
    fast = replace(cap.remote.curves, prefill_s=lambda x: np.full_like(np.asarray(x, float), 1e-6))
    broken = replace(setup, capacity=replace(cap, remote=replace(cap.remote, curves=fast)))
    names = {b.invariant for b in prfaas_breaches(res, broken, 20000.0, 1.0)}
    assert "remote prefill TTFT floor" in names
    names = {b.invariant for b in prfaas_breaches(res, setup, 20000.0, 1000.0)}
    assert "local prefill compute" in names
    assert prfaas_breaches(res, setup, 20000.0, 1.0) == []
