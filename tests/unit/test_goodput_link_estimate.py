"""The goodput search of a link-bound deployment without a usable estimate (pdplan/serving/goodput.py, **A link-bound
deployment without an estimate**; issue #24): examples/chat-ppd.yaml's 1P1D over 25 GbE with ``pd`` turn placement,
whose screen estimate (2.69 req/s) lies at its link limit, 3x its goodput. The chain-free twin's goodput brackets
the crossing, the search never solves the chain near saturation, and the goodput is the same, bit for bit."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.serving import goodput
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.deployment import Role
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.goodput import find_goodput
from pdplan.serving.resolve import bind, resolve
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.types import Binding

ROOT = Path(__file__).parents[2]
SCREEN_RPS = 2.6889972955824404
"""The screen's goodput of the plan (``optimize examples/chat-ppd.yaml``): the first cache rate and estimate."""


def _pd_plan() -> tuple[Any, Any]:
    sc = load_scenario(ROOT / "examples" / "chat-ppd.yaml")
    res = resolve(sc, open_catalog())
    d = res.hardware.deployment
    one = Role(gpu="h100-sxm", tp=1, pp=1, count=1)
    cache = d.cache.model_copy(update={"turn_placement": TurnPlacementSpec(policy="pd")})
    plan = dataclasses.replace(d, prefill=one, decode=one, max_num_seqs=256, cache=cache)
    return build_model(with_cache_rate(bind(res, plan), SCREEN_RPS)), sc.slo


@pytest.mark.slow
def test_link_bound_search_starts_near_the_chain_free_goodput(monkeypatch: pytest.MonkeyPatch) -> None:
    model, slo = _pd_plan()
    assert isinstance(model, DisaggregatedModel)
    assert model.tandem is not None
    limit = model.limit()
    assert limit.binding == Binding.LINK
    assert limit.rate_rps * 7 / 8 <= SCREEN_RPS  # the caller's estimate gives the search nothing
    rates: list[float] = []
    snapshot = DisaggregatedModel.snapshot

    def recorded(self: DisaggregatedModel, at: Any) -> Any:
        if self.tandem is not None:  # the chain's rates, not the twin's
            rates.extend(float(r) for r in np.ravel(at))
        return snapshot(self, at)

    monkeypatch.setattr(DisaggregatedModel, "snapshot", recorded)
    good = find_goodput(model, slo, SCREEN_RPS)
    estimate = goodput._chain_free_estimate(model, slo, limit)
    assert estimate is not None
    assert estimate == pytest.approx(good.rate_rps, rel=0.02)  # 0.885 against 0.892 req/s
    assert max(rates) < 0.4 * limit.rate_rps  # the grid's top rates (0.75-1.0 of the limit) are not solved
    monkeypatch.setattr(goodput, "_chain_free_estimate", lambda *_: None)
    whole = find_goodput(model, slo, SCREEN_RPS)  # the search from the top down, as before
    assert (whole.rate_rps, whole.binding) == (good.rate_rps, good.binding)
    assert max(rates) > 0.85 * limit.rate_rps


def test_no_estimate_where_the_link_does_not_bind() -> None:
    sc = load_scenario(ROOT / "examples" / "default.yaml")
    model = build_model(resolve(sc, open_catalog()))
    limit = model.limit()
    assert limit.binding != Binding.LINK
    assert goodput._chain_free_estimate(model, sc.slo, limit) is None
