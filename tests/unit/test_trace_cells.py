"""A trace's (bin, class) cells at their own requests (pdplan/serving/trace_cells.py; issue #22), by hand: the
requests picked per cell by price, the cache model's per-request keys, and the wiring into an xPyD prefill side."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.cache.trace import BlockTrace
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.exact import _scaled_lengths
from pdplan.serving.build import build_model
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.prefix_cache import CacheSetup, Domain, Reuse, TraceRequests, cache_classes
from pdplan.serving.resolve import resolve
from pdplan.serving.trace_cells import TRACE_CELL_POINTS, _length_factor, own_points
from pdplan.specs.cache import CacheSpec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mooncake-trace.yaml"


def _requests() -> tuple[TraceRequests, np.ndarray]:
    """Eight requests in two bins, classes miss (0) and HBM (1); request 0 warms the cache. The price is the missed
    tokens (prompt − hit), so the order within a cell is read off by hand."""
    prompt = np.array([9000, 1000, 1200, 5000, 6000, 7000, 8000, 5500], dtype=float)
    hit = np.array([0, 0, 0, 0, 4000, 1000, 1000, 3000], dtype=float)
    parts = np.stack([np.zeros_like(hit), hit], axis=1)
    bins = np.array([1, 0, 0, 1, 1, 1, 1, 1])
    return TraceRequests(prompt, parts, bins, (hit > 0).astype(np.int64), 1), prompt - hit


def test_each_cell_at_its_own_requests_by_price() -> None:
    req, price = _requests()
    fallback = np.array([[900.0, 1300.0], [900.0, 1300.0], [4000.0, 9500.0], [4000.0, 9500.0]])
    points, hits = own_points(req, req.prompt_tokens, price, fallback, np.array([0.0, 700.0, 0.0, 2250.0]),
                              np.ones(2), points=2)  # fmt: skip
    # bin 1, HBM (cell 3): requests 4-7 cost 2000, 6000, 7000, 2500; by price 4, 7, 5, 6; levels 1/4 and 3/4 of
    # four requests take positions 1 and 3: requests 7 (5,500 tokens, 3,000 hit) and 6 (8,000, 1,000 hit)
    np.testing.assert_array_equal(points[3], [5500.0, 8000.0])
    np.testing.assert_array_equal(hits[3], [3000.0, 1000.0])
    # bin 0, miss (cell 0): requests 1 and 2; bin 1, miss (cell 2): request 3 alone (request 0 warms the cache)
    np.testing.assert_array_equal(points[0], [1000.0, 1200.0])
    np.testing.assert_array_equal(points[2], [5000.0, 5000.0])
    np.testing.assert_array_equal(hits[2], [0.0, 0.0])
    # bin 0, HBM (cell 1): no counted request; its fallback lengths and the class's mean hit
    np.testing.assert_array_equal(points[1], [900.0, 1300.0])
    np.testing.assert_array_equal(hits[1], [700.0, 700.0])


def test_four_fallback_points_resampled_to_eight_and_lengths_scaled_by_bin() -> None:
    req, price = _requests()
    fallback = np.tile([[1.0, 2.0, 3.0, 4.0]], (4, 1))
    points, _ = own_points(req, req.prompt_tokens, price, fallback, np.zeros(4), np.array([1.0, 1.5]), points=8)
    np.testing.assert_array_equal(points[1], [1, 1, 2, 2, 3, 3, 4, 4])  # equal weights 1/8: the mean kept
    # cell 2 (bin 1, miss): request 3 alone, 5,000 tokens scaled by bin 1's factor 1.5
    np.testing.assert_array_equal(points[2], np.full(8, 7500.0))


def test_the_cache_model_keeps_each_requests_prompt_and_hit() -> None:
    """Twenty requests of the same two 16-token blocks on one instance (tests/unit/test_trace_warmup.py): the first
    misses, every later one hits both blocks, 31 tokens in HBM; the first two warm the cache."""
    trace = BlockTrace(np.arange(0, 41, 2, dtype=np.int64), np.tile([1, 2], 20).astype(np.int64), 16)
    setup = CacheSetup(CacheSpec(routing="load-balance"), None, (), (), Reuse(trace=trace))
    domain = Domain(hbm_tokens=6 * 16, kv_bytes_per_token=131_072.0, instances=1, instances_per_node=1, layers=32)
    req = cache_classes(setup, domain, np.array([32.0]), 1.0, 0.0).requests
    assert req is not None
    assert req.counted_from == 2
    np.testing.assert_array_equal(req.prompt_tokens, np.full(20, 32.0))
    np.testing.assert_array_equal(req.cls, np.r_[0, np.ones(19)])
    np.testing.assert_array_equal(req.parts, np.c_[np.zeros(20), np.r_[0.0, np.full(19, 31.0)]])
    np.testing.assert_array_equal(req.bin, np.zeros(20))


def test_an_xpyd_trace_prices_its_cells_at_their_own_requests() -> None:
    res = resolve(load_scenario(EXAMPLE), open_catalog())
    model = build_model(res)
    assert isinstance(model, DisaggregatedModel)
    assert model.cache is not None
    assert model.pool.point_service_s.shape == (model.cache.weights.size, TRACE_CELL_POINTS)
    assert np.all(_length_factor(res) == 1.0)
    assert _length_factor(_scaled_lengths(res, "input", 1.2)) == pytest.approx(np.full(res.lengths.input_tokens.size,
                                                                                       1.2))  # fmt: skip
