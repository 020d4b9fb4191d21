"""The colocated model's riding prefill p(λ) kept per rate and the utilisation limit solved on rows of rates
(issue #24's "no slower default optimize"): the same doubles as solving each rate alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pdplan.serving.colocated as colocated
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.queueing.chunk_width import riding_mean_field
from pdplan.serving import build_model, resolve
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.limits import DECODE_U_MAX

CATALOG = open_catalog()


def _model(tp: int) -> ColocatedModel:
    data: dict[str, Any] = {
        "model": "llama-3.1-70b",
        "mode": "colocated",
        "colocated": {"gpu": "h100-sxm", "tp": tp, "count": 1, "scheduler": "chunked"},
        "workload": "chat",
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }
    model = build_model(resolve(scenario_from_dict(data, source="test", base_dir=Path.cwd()), CATALOG))
    assert isinstance(model, ColocatedModel)
    assert model.gemm_width is not None
    return model


def _alone(model: ColocatedModel, lam: float) -> float:
    """p(λ) solved for the one rate (the price before it was kept)."""
    step = riding_mean_field(
        np.array([lam]), model.cells, model.decode.step, float(model.res.chunk_tokens), model.gemm_width,
        model.attention_cell_s,
    )  # fmt: skip
    p, lin = model.cells.prob, model.cells.computed_tokens
    return float(step.s_per_token[0]) * float(p @ lin) + float(p @ model.attention_cell_s)


@pytest.mark.parametrize("tp", [2, 8])
def test_rows_and_kept_prices_are_the_prices_alone(tp: int) -> None:
    model = _model(tp)
    rates = np.concatenate((np.linspace(0.0, 30.0, 41), [1e-9, 1e3, 1e9]))
    rows = model._riding_rows(rates)
    assert [float(x) for x in rows] == [_alone(model, float(x)) for x in rates]
    assert [model.riding_s_per_request(float(x)) for x in rates] == list(rows)  # kept: the same doubles again


def _scalar_root(model: ColocatedModel) -> float:
    """The utilisation limit by the scalar bisection it was solved with before (80 halvings of (0, 1e9])."""

    def fn(lam: float) -> float:
        return model._decode_share(lam) + lam * _alone(model, lam) - DECODE_U_MAX

    lo, top = 0.0, 1e9
    for _ in range(80):
        mid = 0.5 * (lo + top)
        lo, top = (mid, top) if fn(mid) <= 0.0 else (lo, mid)
    return lo


@pytest.mark.parametrize("tp", [2, 8])
def test_utilisation_limit_is_the_scalar_bisections(tp: int, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model(tp)
    calls: list[int] = []

    def counted(rate: Any, *args: Any) -> Any:
        calls.append(np.atleast_1d(rate).size)
        return riding_mean_field(rate, *args)

    monkeypatch.setattr(colocated, "riding_mean_field", counted)
    lam_u = model.bound_rates().utilisation_rate_per_s
    monkeypatch.undo()
    assert lam_u == _scalar_root(model)
    # the limit: one mean-field call of 31 rates per 5 halvings near the root, the first ~25 halvings from 1e9 decided
    # by u_d alone (81 calls of one rate before); the KV and seat searches read p at λ_u kept
    assert sum(n > 1 for n in calls) <= 16
    assert len(calls) <= 30
