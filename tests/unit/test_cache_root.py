"""The prefix cache's self-consistent goodput as one root (pdplan/serving/cache_root.py), on toy models whose goodput
at the hit rates of rate r is a known g(r): a smooth g with a hand-solved fixed point, and an LRU collapse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pdplan.errors import NoFeasiblePlanError
from pdplan.serving.cache_root import CACHE_RATE_RTOL, probe, self_consistent
from pdplan.serving.goodput import Goodput
from pdplan.serving.limits import Limit
from pdplan.specs.scenario import SloSpec

SLO = SloSpec(ttft=1.0, tpot=0.05)
TOY_LIMIT_RPS = 20.0
"""Every toy model's stability limit unless a test sets its own."""


@dataclass
class _Law:
    value_s: float

    def quantile(self, q: float) -> Any:
        return np.array([self.value_s])


@dataclass
class _Snap:
    """A one-rate snapshot whose SLO margin is (g − λ)/g, clipped at 0.1 as an attainment margin is (1 − α*)."""

    margin: float
    ttft: _Law
    tpot_reported: _Law

    def slo_margin(self, *args: Any) -> Any:
        return np.array([self.margin])


@dataclass
class _Toy:
    """The model with the hit rates of one rate: its goodput ``good_rps`` (where the margin crosses 0), its hit
    ratio, and a stability limit."""

    good_rps: float
    hit_ratio: float
    limit_rps: float = TOY_LIMIT_RPS

    @property
    def cache(self) -> Any:
        return SimpleNamespace(tiers=[SimpleNamespace(name="hbm", token_hit_ratio=self.hit_ratio)])

    def limit(self) -> Limit:
        return Limit(self.limit_rps, "toy utilisation")

    def snapshot(self, rates: Any) -> _Snap:
        margin = min(0.1, (self.good_rps - float(rates[0])) / self.good_rps)
        return _Snap(margin, _Law(0.9), _Law(0.01))  # TTFT 0.9 of its threshold, TPOT 0.2: TTFT binds


def _solve(g: Callable[[float], float], hits: Callable[[float], float], first_rps: float) -> tuple[Any, list[float]]:
    built: list[float] = []

    def build(rate_rps: float) -> Any:
        built.append(rate_rps)
        return SimpleNamespace(cache_rate_rps=rate_rps), _Toy(g(rate_rps), hits(rate_rps))

    def search(res: Any, model: Any) -> Goodput:
        return Goodput(model.good_rps, model.limit(), "TTFT at P90")

    _, model, good = self_consistent(build, search, SLO, first_rps)
    return (model, good), built


def test_a_smooth_g_finds_its_fixed_point() -> None:
    # g(r) = 12 − r/2: r = g(r) at r* = 8. From r0 = 2 the search finds g = 11 (it holds); c(11) fails (g(11) = 6.5);
    # the root of c in [2, 11] within 1 % of the lower of 2 and 11 (0.02 req/s), on the side that holds
    (model, good), built = _solve(lambda r: 12.0 - 0.5 * r, lambda r: 0.5, 2.0)
    assert 8.0 - CACHE_RATE_RTOL * 2.0 <= good.rate_rps <= 8.0
    assert model.good_rps >= good.rate_rps  # the model at the answer's hit rates meets the SLO there
    assert good.binding == "TTFT at P90"
    assert good.limit == Limit(TOY_LIMIT_RPS, "toy utilisation")
    assert len(built) <= 2 + 9  # r0, g0 and no more than bisection's ⌈log2(9 / 0.02)⌉ = 9 steps


def test_a_start_within_tolerance_is_the_answer() -> None:
    # g(r0) = 7.995 within 1 % of r0 = 8.01: the first search is the answer, one build
    (_, good), built = _solve(lambda r: 12.0 - 0.5 * r, lambda r: 0.5, 8.01)
    assert good.rate_rps == pytest.approx(12.0 - 0.5 * 8.01)
    assert built == [8.01]


def test_a_holding_start_whose_goodput_holds_is_the_fixed_point() -> None:
    # g flat at 9 below 9.0, then 9 − (r − 9): from r0 = 5, g = 9, and c(9) holds (g(9) = 9): the answer is 9
    (_, good), built = _solve(lambda r: 9.0 if r <= 9.0 else 18.0 - r, lambda r: 0.5, 5.0)
    assert good.rate_rps == 9.0
    assert built == [5.0, 9.0]


def test_a_collapse_names_the_tier() -> None:
    # the HBM tier holds its working set below 6 req/s (g = 15) and none above (g = 4): r* = 6, found within 1 % of
    # g(10) = 4, where the model at the answer's hit rates meets the SLO well above it (15 > 1.01 · 6): the cache binds
    (model, good), _ = _solve(lambda r: 15.0 if r < 6.0 else 4.0, lambda r: 0.8 if r < 6.0 else 0.0, 10.0)
    assert 6.0 - CACHE_RATE_RTOL * 4.0 <= good.rate_rps < 6.0
    assert good.binding == "cache capacity (hbm)"
    assert model.hit_ratio == 0.8


def test_past_the_limit_fails_and_the_limit_binds() -> None:
    # g(r) = 30 everywhere (the SLO holds to the limit), the limit 10 − r/10: r* = L(r*) = 100/11, within 1 % of 2
    def build(rate_rps: float) -> Any:
        return SimpleNamespace(), _Toy(30.0, 0.5, 10.0 - 0.1 * rate_rps)

    def search(res: Any, model: Any) -> Goodput:
        return Goodput(model.limit_rps, model.limit(), "toy utilisation")

    _, _, good = self_consistent(build, search, SLO, 2.0)
    assert 100.0 / 11.0 - CACHE_RATE_RTOL * 2.0 <= good.rate_rps <= 100.0 / 11.0
    assert good.binding == "toy utilisation"


def test_no_rate_holds() -> None:
    # the first model meets the SLO below 1 req/s; every model at the hit rates of a rate below 2 req/s fails: the
    # halvings from g(r0) reach the tolerance and no rate holds
    def build(rate_rps: float) -> Any:
        return SimpleNamespace(), _Toy(1.0 if rate_rps >= 2.0 else 1e-9, 0.5)

    def search(res: Any, model: Any) -> Goodput:
        return Goodput(model.good_rps, model.limit(), "TTFT at P90")

    with pytest.raises(NoFeasiblePlanError, match="no rate holds the SLO"):
        self_consistent(build, search, SLO, 4.0)


def test_probe_past_the_limit_is_negative_in_proportion() -> None:
    toy = _Toy(30.0, 0.5, 10.0)
    past = probe(SimpleNamespace(), toy, 12.0, SLO)  # type: ignore[arg-type]
    assert past.margin == pytest.approx(-(12.0 - 10.0 * (1 - 1e-6)) / (10.0 * (1 - 1e-6)))
    assert not past.holds
    assert not past.stable
    assert past.snap is None
    assert probe(SimpleNamespace(), toy, 5.0, SLO).holds  # type: ignore[arg-type]
