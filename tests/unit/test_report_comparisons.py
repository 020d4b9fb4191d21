"""The reports' comparisons (the same plan without its prefix cache, with ``pd`` turn placement) are solved once per
search (pdplan.search.exact.Comparisons): plans that differ only in the setting a comparison takes away share one
solve, and each comparison is the goodput a fresh search of its model finds, bit for bit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import pdplan.search.exact as exact_module
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.exact import Comparisons, Exact, evaluate_exact, with_cache_report
from pdplan.serving import ResolvedScenario, build_model, find_goodput, resolve
from pdplan.serving.deployment import Disaggregated, deployment_of
from pdplan.serving.ppd_report import without_ppd
from pdplan.specs.cache import TurnPlacementSpec

ROOT = Path(__file__).parents[2]
CATALOG = open_catalog()
RATE_RPS = 4.0
"""The target rate both plans are evaluated at (their hit rates, and so their comparisons' models, are read there)."""


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The goodput searches pdplan.search.exact runs from now on, by the rate each found."""
    found: list[float] = []
    inner: Callable[..., Any] = exact_module.find_goodput

    def counting(*args: Any, **kwargs: Any) -> Any:
        good = inner(*args, **kwargs)
        found.append(good.rate_rps)
        return good

    monkeypatch.setattr(exact_module, "find_goodput", counting)
    return found


@pytest.fixture(scope="module")
def ppd_and_score(tmp_path_factory: pytest.TempPathFactory) -> tuple[ResolvedScenario[Any], Exact, Exact]:
    """examples/chat-ppd.yaml over InfiniBand (the 25 GbE link's chain is slow to price), 1P1D, with ``ppd`` and
    with ``score``: two plans that differ only in their turn placement, evaluated exactly at the same target rate."""
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "chat-ppd.yaml").read_text())
    doc |= {"link": "ib-ndr", "prefill": {"gpu": "h100-sxm", "tp": 1}, "decode": {"gpu": "h100-sxm", "tp": 1}}
    path = tmp_path_factory.mktemp("ppd") / "chat-ppd-ib.yaml"
    path.write_text(yaml.safe_dump(doc))
    sc = load_scenario(path)
    res = resolve(sc, CATALOG)
    ppd = deployment_of(sc)
    assert isinstance(ppd, Disaggregated)
    assert ppd.cache is not None
    score = dataclasses.replace(
        ppd, cache=ppd.cache.model_copy(update={"turn_placement": TurnPlacementSpec(policy="score")})
    )
    plans = [evaluate_exact(res, d, target_rps=RATE_RPS) for d in (ppd, score)]
    assert plans[0] is not None
    assert plans[1] is not None
    return res, plans[0], plans[1]


def test_plans_differing_in_the_setting_compared_share_its_solve(
    ppd_and_score: tuple[ResolvedScenario[Any], Exact, Exact], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the cache and with ``pd``, the ``ppd`` and ``score`` plans are the same model: two goodput searches
    for the two plans' four comparisons (four before Comparisons)."""
    _, ppd, score = ppd_and_score
    found = _counted(monkeypatch)
    known = Comparisons.of([ppd, score])
    reports = [with_cache_report(e, known).plan.cache for e in (ppd, score)]
    assert len(found) == 2
    first, second = reports
    assert first is not None
    assert second is not None
    assert first.goodput_without_cache_rps == second.goodput_without_cache_rps
    assert first.turn_placement is not None
    assert second.turn_placement is not None
    assert first.turn_placement.goodput_pd_rps == second.turn_placement.goodput_pd_rps


def test_each_comparison_is_a_fresh_search_of_its_model(
    ppd_and_score: tuple[ResolvedScenario[Any], Exact, Exact],
) -> None:
    """The comparisons start near the plans' goodput (find_goodput's ``near_rps``) and find, bit for bit, what a
    search of the same model from scratch finds."""
    _, ppd, _ = ppd_and_score
    report = with_cache_report(ppd, Comparisons.of([ppd])).plan.cache
    assert report is not None
    assert report.turn_placement is not None
    slo = ppd.res.scenario.slo
    uncached = find_goodput(build_model(dataclasses.replace(ppd.res, cache=None)), slo).rate_rps
    with_pd = find_goodput(build_model(without_ppd(ppd.res)), slo).rate_rps
    assert (report.goodput_without_cache_rps, report.turn_placement.goodput_pd_rps) == (uncached, with_pd)
    assert uncached != with_pd  # two different models
