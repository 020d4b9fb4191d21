"""The colocated HBM cache's resident-KV fixed point (pdplan.serving.colocated_build._resident_fixed_point): hand-worked
rounds on a stand-in g(r), the KV a model with (capacity − r) of cache holds."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from pdplan.errors import NoFeasiblePlanError
from pdplan.serving import colocated_build as colocated

CAPACITY = 1000.0


def _solve(monkeypatch: pytest.MonkeyPatch, g: Callable[[float], float], start: float) -> tuple[float, list[float]]:
    """The resident KV the returned model was built at, and every r a model was built at."""
    built: list[float] = []

    def with_cache(res: Any, plain: Any, resident: float) -> Any:
        built.append(resident)
        return SimpleNamespace(resident=resident)

    monkeypatch.setattr(colocated, "_with_cache", with_cache)
    monkeypatch.setattr(colocated, "resident_tokens", lambda model, rate: min(g(model.resident), CAPACITY))
    plain: Any = SimpleNamespace(decode=SimpleNamespace(kv_capacity_tokens=CAPACITY))
    res: Any = SimpleNamespace(hardware=SimpleNamespace(colocated=SimpleNamespace(label="h100-sxm TP1")))
    model: Any = colocated._resident_fixed_point(res, plain, 1.0, start)
    return float(model.resident), built


def test_a_contraction_is_extrapolated_to_its_fixed_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """g(r) = r/2 + 100 from 0: rounds 100, 150 (q = 1/2), Aitken 150 + 50·(1/2)/(1/2) = 200 = g(200): three builds."""
    got, built = _solve(monkeypatch, lambda r: 0.5 * r + 100.0, 0.0)
    assert got == pytest.approx(200.0, abs=1e-9)
    assert built == pytest.approx([0.0, 100.0, 200.0])


def test_settled_in_one_round_is_the_first_model(monkeypatch: pytest.MonkeyPatch) -> None:
    got, built = _solve(monkeypatch, lambda r: r + 5.0, 300.0)  # moves 5 < 1 % of 1000
    assert (got, built) == (300.0, [300.0])


def test_a_run_away_goes_to_the_pools_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    """g(r) = 1.2 r + 50 from 0: 50, 110 (q = 1.2, growing upwards): the edge, where g stops at the capacity."""
    got, built = _solve(monkeypatch, lambda r: 1.2 * r + 50.0, 0.0)
    assert got == CAPACITY
    assert built == pytest.approx([0.0, 50.0, CAPACITY])


def test_no_fixed_point_within_the_rounds_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(NoFeasiblePlanError, match="did not settle"):
        _solve(monkeypatch, lambda r: CAPACITY - r, 0.0)  # 0, 1000, 0, ...: q = −1, never settles
