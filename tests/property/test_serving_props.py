"""Serving invariants: monotone attainment and goodput, utilisation < 1 or infeasible."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.errors import NoFeasiblePlanError
from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving import build_model, resolve
from pdplan.serving.goodput import REL_TOL
from pdplan.specs.scenario import Scenario

CATALOG = open_catalog()


def scenario(**extra: Any) -> Scenario:
    data: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "prefill": {"gpu": "h100-sxm", "count": 2},
        "decode": {"gpu": "h100-sxm"},
        "granularity": "request",
        "workload": {
            "input_tokens": {"dist": "uniform", "min": 500, "max": 3000},
            "output_tokens": {"dist": "uniform", "min": 50, "max": 300},
        },
        "slo": {"ttft": "600ms", "tpot": "40ms"},
    }
    data.update(extra)
    return scenario_from_dict(data, source="prop", base_dir=Path.cwd())


MODEL = build_model(resolve(scenario(), CATALOG))
LIMIT = MODEL.limit().rate_rps


def test_attainment_falls_as_rate_rises() -> None:
    rates = LIMIT * np.linspace(0.02, 0.98, 12)
    att = MODEL.snapshot(rates).attainment(0.6, 0.04)
    assert np.all(np.diff(att) <= 1e-9)


@settings(deadline=None, max_examples=8)
@given(st.floats(min_value=0.01, max_value=0.99))
def test_utilisation_below_one_inside_the_limit(frac: float) -> None:
    util = MODEL.snapshot(np.array([frac * LIMIT])).utilisation
    assert all(float(v[0]) < 1.0 for v in util.values())


def test_beyond_the_limit_is_infeasible() -> None:
    with pytest.raises(NoFeasiblePlanError):
        evaluate(scenario(), catalog=CATALOG, rate=1.01 * LIMIT)


def _goodput(**extra: Any) -> float:
    """Goodput, 0 where no rate meets the SLO (NoFeasiblePlanError)."""
    try:
        return evaluate(scenario(**extra), catalog=CATALOG).goodput_rps
    except NoFeasiblePlanError:
        return 0.0


def test_goodput_never_rises_with_a_tighter_slo() -> None:
    g = [_goodput(slo={"ttft": t, "tpot": "40ms"}) for t in ("2s", "600ms", "300ms")]
    assert g[0] >= g[1] >= g[2] > 0
    h = [_goodput(slo={"ttft": "600ms", "tpot": t}) for t in ("60ms", "30ms", "20ms")]
    assert h[0] >= h[1] >= h[2]


def test_goodput_never_rises_with_a_slower_link() -> None:
    g = [_goodput(link=name) for name in ("ib-ndr", "roce-100g", "eth-25g", "eth-10g")]
    # brentq finds a goodput within REL_TOL of the stability limit: two links whose crossings coincide (a TPOT-bound
    # plan past its comfortable KV limit) may land that far apart either way
    assert all(a >= b - REL_TOL * LIMIT for a, b in itertools.pairwise(g))
    assert g[0] > g[-1]


def test_goodput_never_rises_with_fewer_instances() -> None:
    g = [_goodput(prefill={"gpu": "h100-sxm", "count": n}) for n in (3, 2, 1)]
    # as with the links above: 3P and 2P cross the SLO at the same point, the decode's comfortable KV limit (vLLM's
    # pinned queue starts its wait there at the P99 rule's P_w), and brentq lands within REL_TOL of it either way
    assert all(a >= b - REL_TOL * LIMIT for a, b in itertools.pairwise(g))
    assert g[0] > g[-1]
    d = [_goodput(decode={"gpu": "h100-sxm", "count": n}, prefill={"gpu": "h100-sxm", "count": 4}) for n in (2, 1)]
    assert d[0] >= d[1]
