"""The screen's price of a cache setting is its screen twin's (pdplan.search.cache_options.screen_twin): the read
paths and the PPD placement leave the screened prefill price unchanged, the tiers do not (the routing keeps its own
twin)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.cache_options import screen_twin, screened_prefill
from pdplan.search.space import build_space
from pdplan.serving.resolve import resolve
from pdplan.specs.cache import CacheSpec, TurnPlacementSpec

EXAMPLE = Path(__file__).parents[2] / "examples" / "agent-dualpath.yaml"


def test_twins_share_the_screen_price_and_others_do_not() -> None:
    sc = load_scenario(EXAMPLE)
    cat = open_catalog()
    res, hw = resolve(sc, cat), build_space(sc, cat).prefill[0]
    dual = sc.cache
    assert dual is not None
    assert dual.read_paths == "dual"
    placed = dual.model_copy(update={"turn_placement": TurnPlacementSpec(policy="threshold")})
    twin = screen_twin(dual)
    assert twin == screen_twin(placed) == CacheSpec(routing=dual.routing, tiers=dual.tiers)
    base = screened_prefill(res, hw, twin)
    assert base is not None
    for spec in (dual, placed):
        same = screened_prefill(res, hw, spec)
        assert same is not None
        assert np.array_equal(same.latency_s, base.latency_s)
        assert np.array_equal(same.service_s, base.service_s)
    assert screen_twin(dual.model_copy(update={"routing": "load-balance"})) != twin
    hbm_only = dual.model_copy(update={"tiers": ()})  # the agents' histories no longer fit: the price changes
    assert screen_twin(hbm_only) != twin
    priced = screened_prefill(res, hw, hbm_only)
    assert priced is not None
    assert not np.array_equal(priced.service_s, base.service_s)


@pytest.mark.parametrize("spec", [None, CacheSpec(prefix_caching=False, read_paths="dual")])
def test_no_caching_is_its_own_twin(spec: CacheSpec | None) -> None:
    assert screen_twin(spec) == spec
