"""A chunked colocated model with a prefix cache prices no quadrature points and reuses its plain model's GEMM table
(pdplan/serving/colocated_cache.py, *Chunked models*): every field a chunked model reads is the doubles the full
pricing gives, bit for bit, and so are its snapshots; a prefill-first model still prices its points."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from support.chat_sessions import CHAT_SESSIONS

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.serving.build import build_model
from pdplan.serving.cells import tpot_defined
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.colocated_cache import CachedCells, cached_cells
from pdplan.serving.resolve import resolve
from pdplan.serving.roles import cached_chunk_price, chunk_price

CATALOG = open_catalog()
SESSIONS = CHAT_SESSIONS
DRAM = {"storage": "host-dram-pcie5", "capacity": "64 GiB"}
HARDWARE = {  # a dense model on one GPU, and an MoE with expert parallelism (a roofline of its own)
    "llama": {"model": "llama-3.1-8b", "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 2}},
    "deepseek": {
        "model": "deepseek-v3",
        "dtype": "fp8",
        "kv_dtype": "fp8",
        "colocated": {"gpu": "b200", "tp": 8, "ep": 8, "count": 1},
    },
}


def _model(tmp_path: Path, kind: str, scheduler: str) -> ColocatedModel:
    hw = HARDWARE[kind]
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "colocated-chunked-cache",
        "mode": "colocated",
        "workload": {"name": "chat", "sessions": SESSIONS},
        "slo": {"ttft": "1s", "tpot": "60ms"},
        "cache": {"routing": "affinity", "tiers": [DRAM]},
        **hw,
        "colocated": {**hw["colocated"], "scheduler": scheduler},
    }
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(doc))
    model = build_model(resolve(load_scenario(path), CATALOG))
    assert isinstance(model, ColocatedModel)
    return model


def _both(model: ColocatedModel, resident: float) -> tuple[CachedCells, CachedCells]:
    """The cells of ``model``'s deployment at ``resident`` KV priced in full, and as a chunked model prices them."""
    plain = model.plain
    assert plain is not None
    assert plain.gemm_width is not None
    assert model.res.cache is not None
    res, width = model.res, plain.gemm_width
    like = chunk_price(res.hardware.colocated, float(res.chunk_tokens), plain.cells.input_tokens)
    assert width.top == like.budget_tokens  # the table ends at the budget (what _with_cache passes)
    assert np.array_equal(width.gemm_s, like.width.gemm_s)
    assert like.s_per_token == plain.prefill_s_per_token
    defined = tpot_defined(res)
    full = cached_cells(res, res.cache, plain.cells, defined, resident)
    return full, cached_cells(res, res.cache, plain.cells, defined, resident, like)


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, tuple | list):
        return isinstance(b, tuple | list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("kind", ["llama", "deepseek"])
def test_chunked_cells_are_the_full_pricing_less_the_points(tmp_path: Path, kind: str) -> None:
    model = _model(tmp_path, kind, "chunked")
    assert model.prefill_point_s is None
    assert model.load_point_s is None
    assert model.cache is not None
    assert model.cache.spread is None
    capacity = model.decode.kv_capacity_tokens
    for resident in (0.0, 0.3 * capacity, 0.9 * capacity):
        full, skipped = _both(model, resident)
        assert full.prefill_point_s is not None
        assert full.load_point_s is not None
        assert full.classes.spread is not None
        assert skipped.prefill_point_s is None
        assert skipped.load_point_s is None
        for name in ("cells", "price", "load_cell_s", "tpot_defined", "input_bin"):
            assert _same(getattr(full, name), getattr(skipped, name)), name
        assert _same(dataclasses.replace(full.classes, spread=None), skipped.classes)


def test_cached_chunk_price_like_is_bit_for_bit() -> None:
    """The t_p and G(n) table taken from a price of the same hardware and budget: G(1) and G(m_L) priced alone are
    the doubles the one roofline call over the whole grid gives (the roofline prices each token count alone)."""
    for path in ("examples/chat-ppd.yaml", "examples/agent-dualpath.yaml"):
        res = resolve(load_scenario(Path(path)), CATALOG)
        for _, hw in res.roles:
            lens = np.array([100.0, 1500.0, 2048.0, 5000.0, 9000.0, 20000.0])
            cached = np.array([0.0, 1499.0, 1000.0, 4000.0, 2000.0, 19990.0])
            like = chunk_price(hw, 2048.0, lens)
            got = cached_chunk_price(hw, 2048.0, lens, cached, like=like)
            want = cached_chunk_price(hw, 2048.0, lens, cached)
            assert _same(got, want)
            other = cached_chunk_price(hw, 1024.0, lens, cached, like=like)  # another budget: priced in full
            assert _same(other, cached_chunk_price(hw, 1024.0, lens, cached))


def test_chunked_snapshots_are_unchanged(tmp_path: Path) -> None:
    """A chunked model reads no quadrature points: the model built without them and the same model given points
    (any: here 1 s each) have the same snapshots and limit, bit for bit."""
    model = _model(tmp_path, "llama", "chunked")
    points = np.ones((model.cells.prob.size, 3))
    full = dataclasses.replace(model, prefill_point_s=points, load_point_s=points)
    rates = np.array([0.5, 2.0, 4.0]) * model.z
    a, b = model.snapshot(rates), full.snapshot(rates)
    assert np.array_equal(a.ttft.quantile(0.9), b.ttft.quantile(0.9))
    assert np.array_equal(a.tpot.quantile(0.9), b.tpot.quantile(0.9))
    assert np.array_equal(a.attainment(1.0, 0.06), b.attainment(1.0, 0.06))
    assert model.limit() == full.limit()


def test_prefill_first_still_prices_its_points(tmp_path: Path) -> None:
    model = _model(tmp_path, "llama", "prefill-first")
    assert model.prefill_point_s is not None
    assert model.load_point_s is not None
    assert model.cache is not None
    assert model.cache.spread is not None
    chunked = _model(tmp_path, "llama", "chunked")
    with pytest.raises(ValueError, match="no quadrature points"):
        _ = chunked.prefill_cell_s
