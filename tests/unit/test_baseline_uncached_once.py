"""One ``optimize`` searches the goodput of the colocated baseline's instance without a prefix cache once: the screen
finds it (the cache setting that caches nothing, :attr:`pdplan.search.pool.Pool.uncached_rps`) and the baseline's
cache report reads it (:class:`pdplan.search.exact.Comparisons`) — the same model, so the same goodput, bit for bit,
as the report's own search of it finds."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import pdplan.search.exact as exact_module
import pdplan.search.optimize as optimize_module
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.exact import Comparisons, Exact
from pdplan.search.optimize import optimize
from pdplan.serving import build_model, find_goodput
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.deployment import Colocated

build_module = importlib.import_module("pdplan.serving.build")  # the package's ``build`` is a function
same_hits_module = importlib.import_module("pdplan.serving.same_hits")  # the screen's and probes' searches
ROOT = Path(__file__).parents[2]
CATALOG = open_catalog()


def _uncached_one(model: Any) -> bool:
    """A model of one colocated instance without a prefix cache."""
    if not isinstance(model, ColocatedModel) or model.res.cache is not None:
        return False
    d = model.res.hardware.deployment
    return isinstance(d, Colocated) and d.instance.count == 1


@pytest.fixture(scope="module")
def searched() -> tuple[list[str], list[Exact], Mapping[Colocated, float]]:
    """examples/chat-sessions.yaml optimised (no sensitivity): where each goodput search of one colocated instance
    without a cache ran, and the plans and known goodputs the reports' comparisons started from."""
    where: list[str] = []
    seen: list[tuple[list[Exact], Mapping[Colocated, float]]] = []
    mp = pytest.MonkeyPatch()
    for module in (build_module, same_hits_module, exact_module):
        inner: Callable[..., Any] = module.find_goodput

        def counting(model: Any, *args: Any, _inner: Callable[..., Any] = inner, _m: Any = module) -> Any:
            if _uncached_one(model):
                where.append(_m.__name__)
            return _inner(model, *args)

        mp.setattr(module, "find_goodput", counting)
    of = Comparisons.of

    def recording(plans: Any, uncached_rps: Mapping[Colocated, float] | None = None) -> Comparisons:
        seen.append((list(plans), dict(uncached_rps or {})))
        return of(seen[-1][0], uncached_rps)

    mp.setattr(optimize_module.Comparisons, "of", recording)
    try:
        result = optimize(load_scenario(ROOT / "examples" / "chat-sessions.yaml"), catalog=CATALOG, analyse=False)
    finally:
        mp.undo()
    assert result.baseline is not None
    assert result.baseline.cache is not None
    ((plans, known),) = seen
    return where, plans, known


@pytest.mark.slow
def test_the_baseline_instance_without_a_cache_is_searched_once(
    searched: tuple[list[str], list[Exact], Mapping[Colocated, float]],
) -> None:
    """The screen searches it (caching off); the baseline's report without the cache reads that (two searches
    before)."""
    where, _, known = searched
    assert where == ["pdplan.serving.build"]  # goodput_model, from the screen's screened_goodput
    assert len(known) == 1


@pytest.mark.slow
def test_the_known_goodput_is_the_one_the_report_would_search(
    searched: tuple[list[str], list[Exact], Mapping[Colocated, float]],
) -> None:
    """The report's model (the baseline's bound scenario, its cache taken away) has, bit for bit, the goodput the
    screen found for its deployment with caching off, from the search the report ran before (near the plans'
    lowest rate on that deployment)."""
    _, plans, known = searched
    near = Comparisons.of(plans).near_rps
    checked = 0
    for e in plans:
        variant = dataclasses.replace(e.res, cache=None)
        dep = dataclasses.replace(e.res.hardware.deployment, cache=None)
        if e.model.cache is None or dep not in known:
            continue
        assert find_goodput(build_model(variant), e.res.scenario.slo, near[dep]).rate_rps == known[dep]
        assert find_goodput(build_model(variant), e.res.scenario.slo).rate_rps == known[dep]
        checked += 1
    assert checked >= 1  # the baseline, and any best plan on its deployment
