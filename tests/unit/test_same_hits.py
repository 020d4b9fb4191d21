"""A prefix cache's fixed point (its first search) and the screen skip the goodput search of a colocated model an
earlier search of the scenario built (pdplan.serving.same_hits): examples/chat-ppd.yaml's colocated pick empties its
HBM cache above ~14.5 req/s (9 req/s until 2026-12-07, when the HBM cache was what the uncached model's sequences left
free)."""

from __future__ import annotations

import dataclasses
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.cache_options import screened_goodput
from pdplan.serving.build import PpdProbes, build_model, goodput_model, with_cache_rate
from pdplan.serving.deployment import Colocated, Role
from pdplan.serving.goodput import find_goodput, start_interval
from pdplan.serving.limits import Limit
from pdplan.serving.prefix_cache import TierUse
from pdplan.serving.resolve import ResolvedScenario, bind, resolve
from pdplan.serving.same_hits import SameHits, fingerprint

EXAMPLE = Path(__file__).parents[2] / "examples" / "chat-ppd.yaml"
EMPTY_RPS = (16.5, 17.0)
"""Two rates where the pick's cache holds nothing (token hit ratio exactly 0: it empties between 14 and 15 req/s, where
the cached deployment's own decoding sequences fill the pool), both above 7/8 of the emptied model's limit (18.63
req/s): a search from either starts at the top."""
HITS_RPS = 12.0
"""A rate where it holds some (hit ratio 0.85)."""


@cache
def _bound() -> ResolvedScenario[Any]:
    """chat-ppd's colocated pick: one H100 TP1, chunked, its prefix cache."""
    sc = load_scenario(EXAMPLE)
    one = Colocated(Role("h100-sxm", 1, 1, 1), "chunked", cache=sc.cache)
    return bind(resolve(sc, open_catalog()), one)


def _at(rate_rps: float, like: Any = None) -> Any:
    return build_model(with_cache_rate(_bound(), rate_rps), like)


def test_start_interval_by_hand() -> None:
    # limit 8 req/s: grid 8(1 - 1e-6)·(1e-4, 1/8, ..., 8/8); 2.5 lies in (2, 3] (index 3), 7.5 at or above 7 (the
    # search from the top), 0 below the first rate
    limit = Limit(8.0, "link")
    assert start_interval(limit, 2.5) == 3
    assert start_interval(limit, 1.0) == 2  # just above grid[1] = 0.999999
    assert start_interval(limit, 7.5) is None
    assert start_interval(limit, None) is None
    assert start_interval(limit, 0.0) is None


def test_an_emptied_cache_builds_the_same_model_at_two_rates() -> None:
    first = _at(EMPTY_RPS[0])
    again, other = _at(EMPTY_RPS[1], first), _at(HITS_RPS, first)
    assert first.cache.token_hit_ratio == 0.0
    assert again.cache.token_hit_ratio == 0.0
    assert other.cache.token_hit_ratio > 0.5
    assert fingerprint(first) is not None
    assert fingerprint(first) == fingerprint(again)
    assert fingerprint(first) != fingerprint(other)


def test_the_shared_search_is_the_search_bit_for_bit() -> None:
    slo = _bound().scenario.slo
    first = _at(EMPTY_RPS[0])
    again = _at(EMPTY_RPS[1], first)
    same = SameHits()
    found = same.goodput(first.res, first, slo, EMPTY_RPS[0])
    # another start in the same interval (the search from the top: both at or above the grid's 7/8)
    assert start_interval(found.limit, 17.5) == start_interval(found.limit, EMPTY_RPS[0]) is None
    shared = same.goodput(again.res, again, slo, 17.5)
    own = find_goodput(again, slo, 17.5)
    assert shared is found
    assert (shared.rate_rps, shared.limit, shared.binding) == (own.rate_rps, own.limit, own.binding)
    # a start in another interval searches again
    lower = 0.6 * found.limit.rate_rps
    assert start_interval(found.limit, lower) is not None
    assert same.goodput(again.res, again, slo, lower) is not found


def test_a_used_read_path_keeps_the_rate_in_the_fingerprint() -> None:
    first = _at(EMPTY_RPS[0])
    moved = dataclasses.replace(first, cache=dataclasses.replace(first.cache, rate_rps=1.0))
    assert fingerprint(moved) == fingerprint(first)  # no read path carries load: the rate is read by nothing
    busy = (TierUse("ssd", 1e9, 0.1, 1e9, {"SNIC": 0.5}),)
    loaded = dataclasses.replace(first, cache=dataclasses.replace(first.cache, tiers=busy))
    loaded_moved = dataclasses.replace(loaded, cache=dataclasses.replace(loaded.cache, rate_rps=1.0))
    assert fingerprint(loaded) != fingerprint(loaded_moved)  # the read limit is the rate over the utilisation


def test_an_unknown_field_type_gives_no_fingerprint() -> None:
    first = _at(EMPTY_RPS[0])
    assert fingerprint(dataclasses.replace(first, arrival_ca2=object())) is None
    assert fingerprint(dataclasses.replace(first, cache=None)) is None  # no cache: no fixed point to share


def test_a_changed_array_changes_the_fingerprint() -> None:
    first = _at(EMPTY_RPS[0])
    load = np.array(first.load_cell_s, dtype=np.float64)
    load[0] = np.nextafter(load[0], np.inf)
    assert fingerprint(dataclasses.replace(first, load_cell_s=load)) != fingerprint(first)


@pytest.mark.slow
def test_the_fixed_point_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    # from 16.5 req/s (cache empty) the pick's fixed point searches the first model alone (its other rates are c's
    # single snapshots, pdplan.serving.cache_root): one search through SameHits, and the same model and goodput as
    # with that search made afresh
    slo = _bound().scenario.slo
    searched: list[float | None] = []

    def counted(model: Any, slo: Any, near_rps: float | None = None) -> Any:
        searched.append(near_rps)
        return find_goodput(model, slo, near_rps)

    monkeypatch.setattr(sys.modules["pdplan.serving.same_hits"], "find_goodput", counted)
    res, model, good = goodput_model(_bound(), slo, EMPTY_RPS[0])
    probes: list[float | None] = []

    class Own(SameHits):
        def goodput(self, res: Any, model: Any, slo: Any, near_rps: float | None) -> Any:
            probes.append(near_rps)
            return find_goodput(model, slo, near_rps)

    monkeypatch.setattr(sys.modules["pdplan.serving.build"], "SameHits", Own)  # the package exports a build()
    own_res, own_model, own_good = goodput_model(_bound(), slo, EMPTY_RPS[0])
    assert len(searched) == len(probes) == 1
    assert (good.rate_rps, good.limit, good.binding) == (own_good.rate_rps, own_good.limit, own_good.binding)
    assert res.cache_rate_rps == own_res.cache_rate_rps
    assert fingerprint(model) == fingerprint(own_model)


@pytest.mark.slow
def test_the_exact_probes_read_the_screens_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    # the screen (from the default cache rate) builds models the exact fixed point probes again: with the search's
    # SameHits the exact stage searches fewer models than it would alone, with the same goodput
    slo = _bound().scenario.slo
    alone: list[float | None] = []

    def counted_into(into: list[float | None]) -> Any:
        def counted(model: Any, slo: Any, near_rps: float | None = None) -> Any:
            into.append(near_rps)
            return find_goodput(model, slo, near_rps)

        return counted

    monkeypatch.setattr(sys.modules["pdplan.serving.same_hits"], "find_goodput", counted_into(alone))
    _, _, good_alone = goodput_model(_bound(), slo, EMPTY_RPS[0], PpdProbes(same=SameHits()))
    same = SameHits()
    screened_goodput(_bound(), slo, None, same)
    searched: list[float | None] = []
    monkeypatch.setattr(sys.modules["pdplan.serving.same_hits"], "find_goodput", counted_into(searched))
    _, _, good = goodput_model(_bound(), slo, EMPTY_RPS[0], PpdProbes(same=same))
    assert len(searched) < len(alone)
    assert good.rate_rps == good_alone.rate_rps


def test_another_deployment_does_not_share() -> None:
    slo = _bound().scenario.slo
    first = _at(EMPTY_RPS[0])
    same = SameHits()
    found = same.goodput(first.res, first, slo, None)
    other = dataclasses.replace(_bound().hardware.deployment, max_num_seqs=128)
    res = dataclasses.replace(first.res, hardware=dataclasses.replace(first.res.hardware, deployment=other))
    assert same.goodput(res, first, slo, None) is not found  # the deployment is part of the key
    assert same.goodput(first.res, first, slo, None) is found


def test_the_model_without_the_cache_reuses_the_cached_models_plain() -> None:
    """The report's comparison without the cache (pdplan.search.exact.Comparisons) builds the deployment's model
    without the cache from the plan model's ``plain`` (priced from hardware, lengths and settings the cache does not
    change): the same model as one priced afresh, every field and its snapshots bit for bit."""
    from pdplan.search.exact import _built

    cached = _at(HITS_RPS)
    variant = dataclasses.replace(_bound(), cache=None)
    exact: Any = type("E", (), {"model": cached})()
    reused, fresh = _built(exact, variant), build_model(variant)
    assert reused.res is variant
    assert reused.cache is None
    assert fresh.cache is None
    assert reused.decode is cached.plain.decode  # reused, not priced again
    assert fresh.decode == cached.plain.decode  # (the decode law's fit is kept per instance type: decode_lines)
    printed = fingerprint(dataclasses.replace(reused, cache=cached.cache))
    assert printed is not None
    assert printed == fingerprint(dataclasses.replace(fresh, cache=cached.cache))  # every field but res and plain
    rates = np.array([1.0, 4.0, 7.5])
    a, b = reused.snapshot(rates), fresh.snapshot(rates)
    assert a.attainment(1.0, 0.05).tolist() == b.attainment(1.0, 0.05).tolist()
    assert a.ttft_at_percentile_s(90).tolist() == b.ttft_at_percentile_s(90).tolist()
    assert reused.limit() == fresh.limit()
