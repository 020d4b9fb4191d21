"""Searches of one scenario sharing their rate-independent parts (pdplan.search.memo): every result as a fresh search
gives it, keys that tell scenarios, catalogues and margins apart, and memoised arrays that cannot be changed."""

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search import memo
from pdplan.search.optimize import optimize
from pdplan.search.plans import PlanResult
from pdplan.specs.scenario import Scenario

SMALL = Path(__file__).parents[1] / "data" / "small_scenario.yaml"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    memo.clear()
    yield
    memo.clear()


def _answer(result: PlanResult) -> dict[str, Any]:
    """The result less the search's own timing."""
    out = dataclasses.asdict(result)
    out["search"].pop("seconds")
    return out


def _slo(sc: Scenario, ttft_s: float) -> Scenario:
    return sc.model_copy(update={"slo": sc.slo.model_copy(update={"ttft": ttft_s})})


def test_a_search_after_others_of_its_scenario_reports_what_a_fresh_one_does() -> None:
    """Rates 4, 8, 16 and a GPU budget searched one after another (the later ones reading the first's tables, screen,
    baseline and exact goodputs), then each again with nothing memoised: the same plans, numbers and counts."""
    sc, cat = load_scenario(SMALL), open_catalog()
    asks: list[dict[str, Any]] = [{"rate_rps": 4.0}, {"rate_rps": 8.0}, {"rate_rps": 16.0}, {"budget_gpus": 6}]
    shared = [_answer(optimize(sc, catalog=cat, top=3, analyse=False, **ask)) for ask in asks]
    fresh = []
    for ask in asks:
        memo.clear()
        fresh.append(_answer(optimize(sc, catalog=cat, top=3, analyse=False, **ask)))
    assert shared == fresh
    assert [len(r["plans"]) for r in shared] == [3, 3, 3, 3]


def _unresolved() -> Any:
    """A stand-in for the resolved scenario (the keys are under test, not what they hold)."""
    return object()


def test_contexts_are_keyed_by_the_scenario_and_catalogue_values() -> None:
    sc, cat = load_scenario(SMALL), open_catalog()
    first = memo.context(sc, cat, _unresolved)
    again = memo.context(load_scenario(SMALL), open_catalog(), lambda: pytest.fail("resolved again"))
    assert again is first  # equal values, other objects: one context
    assert memo.context(_slo(sc, 0.6), cat, _unresolved) is not first
    priced = cat.with_prices({"h100-sxm": 1.0})
    assert memo.context(sc, priced, _unresolved) is not first


def test_contexts_are_bounded_least_recently_used_first() -> None:
    sc, cat = load_scenario(SMALL), open_catalog()
    made = [memo.context(_slo(sc, 0.5 + 0.1 * i), cat, _unresolved) for i in range(memo.CONTEXTS + 1)]
    assert memo.context(_slo(sc, 0.5 + 0.1 * memo.CONTEXTS), cat, _unresolved) is made[-1]
    assert memo.context(_slo(sc, 0.5), cat, _unresolved) is not made[0]  # the oldest was dropped


def test_memoised_arrays_are_read_only_and_computed_once() -> None:
    ctx = memo.Context(res=None)  # type: ignore[arg-type]
    calls = []

    def compute() -> tuple[np.ndarray, list[np.ndarray]]:
        calls.append(1)
        return np.arange(3.0), [np.ones(2)]

    first = ctx.get("part", compute)
    assert ctx.get("part", compute) is first
    assert len(calls) == 1
    with pytest.raises(ValueError, match="read-only"):
        first[0][0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        first[1][0][0] = 5.0


def test_a_large_screen_is_not_held() -> None:
    ctx = memo.Context(res=None)  # type: ignore[arg-type]
    screens = []

    def screen() -> Iterator[Any]:
        screens.append(1)
        yield from ()

    for _ in range(2):
        list(ctx.tiles("small", memo.TILE_CANDIDATES, screen))
    assert len(screens) == 1
    for _ in range(2):
        list(ctx.tiles("large", memo.TILE_CANDIDATES + 1, screen))
    assert len(screens) == 3


def test_recent_keeps_its_latest_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo, "RECENT_ENTRIES", 2)
    recent = memo.Recent()
    for key in "abc":
        recent[key] = key
    assert list(recent) == ["b", "c"]


def test_an_edited_trace_is_another_context(tmp_path: Path) -> None:
    """The scenario names the trace by path: its modification time and size are part of the key, as the trace
    reader's own cache has them."""
    trace = tmp_path / "trace.csv"
    trace.write_text("input_tokens,output_tokens\n100,10\n200,20\n")
    sc = load_scenario(SMALL)
    sc = sc.model_copy(update={"workload": sc.workload.model_validate({"trace": str(trace)})})
    cat = open_catalog()
    first = memo.context(sc, cat, _unresolved)
    assert memo.context(sc, cat, _unresolved) is first
    trace.write_text("input_tokens,output_tokens\n100,10\n300,30\n400,40\n")
    assert memo.context(sc, cat, _unresolved) is not first
