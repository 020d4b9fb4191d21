"""A model rebuilt at another cache rate from an earlier one (pdplan.serving.build.build_model's ``like``, what
goodput_model's probes do) is the model built from scratch, bit for bit; cached_prefill_perf's one-stage shortcut."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.serving.build import LocalModel, build_model, goodput_model, with_cache_rate
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.goodput import find_goodput
from pdplan.serving.resolve import resolve
from pdplan.serving.roles import _one_prompt, cached_prefill_perf
from pdplan.specs.scenario import Scenario

ROOT = Path(__file__).parents[2]
CATALOG = open_catalog()
CHAT = load_scenario(ROOT / "examples" / "chat-sessions.yaml")


def _colocated(tmp_path: Path, scheduler: str) -> Scenario:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "chat-sessions.yaml").read_text())
    for key in ("prefill", "decode", "link", "granularity", "search"):
        doc.pop(key)
    doc |= {"mode": "colocated", "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 2, "scheduler": scheduler}}
    path = tmp_path / f"colocated-{scheduler}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_scenario(path)


def _same_snapshots(a: LocalModel, b: LocalModel, rates: np.ndarray) -> None:
    sa, sb = a.snapshot(rates), b.snapshot(rates)
    for q in (0.5, 0.9, 0.99):
        assert np.array_equal(sa.ttft.quantile(q), sb.ttft.quantile(q))
        assert np.array_equal(sa.tpot_reported.quantile(q), sb.tpot_reported.quantile(q))
    for key, value in sa.utilisation.items():
        assert np.array_equal(value, sb.utilisation[key]), key


def _check_rebuilt(sc: Scenario) -> LocalModel:
    res = resolve(sc, CATALOG)
    first = build_model(with_cache_rate(res, 2.0))
    at = with_cache_rate(res, 6.0)
    fresh, rebuilt = build_model(at), build_model(at, first)
    assert fresh.limit() == rebuilt.limit()
    assert find_goodput(fresh, sc.slo) == find_goodput(rebuilt, sc.slo)
    _same_snapshots(fresh, rebuilt, np.array([0.5, 3.0]) * fresh.limit().rate_rps / 4.0)
    assert fresh.cache is not None
    assert rebuilt.cache is not None
    assert np.array_equal(fresh.cache.weights, rebuilt.cache.weights)
    return rebuilt


def test_an_xpyd_model_at_another_cache_rate_reuses_its_decode_side() -> None:
    res = resolve(CHAT, CATALOG)
    first = build_model(with_cache_rate(res, 2.0))
    rebuilt = _check_rebuilt(CHAT)
    assert isinstance(first, DisaggregatedModel)
    assert isinstance(rebuilt, DisaggregatedModel)
    again = build_model(with_cache_rate(res, 6.0), first)
    assert isinstance(again, DisaggregatedModel)
    assert again.decode is first.decode
    assert again.capacity is first.capacity
    assert again.admission is first.admission
    assert not np.array_equal(again.pool.point_service_s, first.pool.point_service_s)  # the hit rates did change


@pytest.mark.parametrize("scheduler", ["chunked", "prefill-first"])
def test_a_colocated_model_at_another_cache_rate_reuses_the_uncached_one(tmp_path: Path, scheduler: str) -> None:
    sc = _colocated(tmp_path, scheduler)
    rebuilt = _check_rebuilt(sc)
    assert isinstance(rebuilt, ColocatedModel)
    assert rebuilt.plain is not None
    first = build_model(with_cache_rate(resolve(sc, CATALOG), 2.0))
    assert isinstance(first, ColocatedModel)
    again = build_model(with_cache_rate(resolve(sc, CATALOG), 6.0), first)
    assert isinstance(again, ColocatedModel)
    assert again.decode is first.decode
    plain = build_model(dataclasses.replace(first.res, cache=None), first)  # without the cache: the plain model
    assert isinstance(plain, ColocatedModel)
    assert plain.cache is None
    assert plain.res.cache is None


def test_goodput_model_is_the_bracket_of_fresh_builds() -> None:
    """goodput_model's probes rebuild from its first model; the goodput is the one fresh builds give at its rate."""
    res = resolve(CHAT, CATALOG)
    at, model, good = goodput_model(res, CHAT.slo)
    assert at.cache_rate_rps is not None
    assert find_goodput(build_model(with_cache_rate(res, at.cache_rate_rps)), CHAT.slo).rate_rps == pytest.approx(
        good.rate_rps, rel=0.01
    )
    _same_snapshots(model, build_model(at), np.array([0.5 * good.rate_rps]))


@pytest.mark.parametrize("pp", [1, 2])
def test_cached_prefill_service_is_the_stage_of_the_missed_tokens_pass(pp: int) -> None:
    """One stage: the service is the pass itself, bit for bit; with PP it keeps the m-token pass's stage/pass ratio."""
    hw = dataclasses.replace(resolve(CHAT, CATALOG).hardware.prefill, pp=pp)
    lens = np.array([100.0, 2000.0, 9000.0])
    cached = np.array([0.0, 1500.0, 8999.0])
    perf = cached_prefill_perf(hw, lens, cached)
    full = _one_prompt(hw, lens - np.clip(cached, 0.0, lens - 1.0), detail=False)
    ratio = np.asarray(full.stage_time_s / full.time_s)
    if pp == 1:
        assert np.array_equal(ratio, np.ones(3))
        assert np.array_equal(perf.service_s, perf.latency_s)
        assert perf.service_s is not perf.latency_s
    else:
        assert np.all(ratio < 1.0)
        assert np.array_equal(perf.service_s, perf.latency_s * ratio)
