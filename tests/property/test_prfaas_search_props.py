"""Property of the PrfaaS search (pdplan.search.prfaas): the searched plan is never worse than homogeneous PD on
the same local GPUs (issue #14), over random SLOs, remote cluster sizes and cross-DC links."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.optimize import optimize
from pdplan.serving import resolve
from pdplan.serving.prfaas.build import prfaas_setup
from pdplan.serving.prfaas.queue import RATE_XTOL, goodput
from pdplan.specs.scenario import Scenario

BASE = load_scenario(Path(__file__).resolve().parents[2] / "examples" / "prfaas-h200-h20.yaml")
CATALOG = open_catalog()
LOCAL_INSTANCES = 8


def _homogeneous(sc: Scenario) -> float:
    """Best goodput over every prefill/decode split of the 8 local instances with nothing offloaded, computed apart
    from the search (its own loop over splits, one goodput root each)."""
    setup = prfaas_setup(resolve(sc, CATALOG))
    cap = setup.capacity
    best = 0.0
    for n_p in range(1, LOCAL_INSTANCES):
        c = replace(
            cap,
            remote=replace(cap.remote, instances=0),
            local=replace(cap.local, instances=n_p),
            decode=replace(cap.decode, instances=LOCAL_INSTANCES - n_p),
        )
        best = max(best, goodput(replace(setup, capacity=c), cap.law.upper, sc.slo.ttft, sc.slo.attainment).goodput_rps)
    return best


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ttft_s=st.floats(6.0, 40.0),
    remote=st.integers(1, 4),
    link=st.sampled_from(["dci-100g", "dci-400g"]),
)
def test_searched_plan_is_never_worse_than_homogeneous_pd(ttft_s: float, remote: int, link: str) -> None:
    assert BASE.prfaas is not None
    sc = BASE.model_copy(
        update={
            "slo": BASE.slo.model_copy(update={"ttft": ttft_s}),
            "prfaas": BASE.prfaas.model_copy(update={"count": remote, "link": link}),
        }
    )
    homo = _homogeneous(sc)
    result = optimize(sc, catalog=CATALOG, analyse=False)
    assert result.best.goodput_rps >= homo * (1 - RATE_XTOL)
