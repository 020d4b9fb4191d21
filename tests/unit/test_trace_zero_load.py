"""The cells of ``benchmarks/trace_zero_load_attainment.py`` (docs/prefix_cache.md §9, The Mooncake trace), by hand:
each (bin, class) cell at its own counted requests ordered by their price, and a bin's lengths at the trace's own
quantiles."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # it imports its sibling reuse_closed_form_vs_sim
    monkeypatch.delitem(sys.modules, "trace_zero_load_attainment", raising=False)
    import trace_zero_load_attainment

    return trace_zero_load_attainment


def _requests(reps: list[float]) -> SimpleNamespace:
    """Eight requests in two bins, classes miss (0) and HBM (1); request 0 warms the cache. The price is the missed
    tokens (prompt − hit), so the order within a cell is read off by hand."""
    prompt = np.array([9000, 1000, 1200, 5000, 6000, 7000, 8000, 5500], dtype=float)
    hit = np.array([0, 0, 0, 0, 4000, 1000, 1000, 3000], dtype=float)
    classes = SimpleNamespace(
        weights=np.ones((2, 2)) / 2,
        hit_tokens=np.array([[0.0, 700.0], [0.0, 2250.0]]),
        tier_share=np.broadcast_to(np.diag([0.0, 1.0]), (2, 2, 2)),
    )
    return SimpleNamespace(
        prompt=prompt,
        parts=np.stack([np.zeros_like(hit), hit], axis=1),
        bin=np.array([1, 0, 0, 1, 1, 1, 1, 1]),
        cls=(hit > 0).astype(int),
        start=1,
        classes=classes,
        res=SimpleNamespace(lengths=SimpleNamespace(input_tokens=np.array(reps))),
        time_s=lambda p, parts: p - parts.sum(axis=-1),
    )


def test_each_cell_at_its_own_requests_by_price(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench(monkeypatch)
    lengths, parts = bench.own_cells(_requests([1100.0, 6750.0]), 2)
    # bin 1, HBM: requests 4-7 cost 2000, 6000, 7000, 2500; by price 4, 7, 5, 6; levels 1/4 and 3/4 of four
    # requests take positions 1 and 3: requests 7 (5,500 tokens, 3,000 hit) and 6 (8,000, 1,000 hit)
    np.testing.assert_array_equal(lengths[1, 1], [5500.0, 8000.0])
    np.testing.assert_array_equal(parts[1, 1], [[0.0, 3000.0], [0.0, 1000.0]])
    # bin 0, miss: requests 1 and 2 (1,000 and 1,200 tokens); bin 1, miss: request 3 alone (request 0 warms up)
    np.testing.assert_array_equal(lengths[0, 0], [1000.0, 1200.0])
    np.testing.assert_array_equal(lengths[1, 0], [5000.0, 5000.0])
    # bin 0, HBM: no request; the bin's mean length and the class's mean hit (700 tokens, all in HBM)
    np.testing.assert_array_equal(lengths[0, 1], [1100.0, 1100.0])
    np.testing.assert_array_equal(parts[0, 1], [[0.0, 700.0], [0.0, 700.0]])


def test_bin_lengths_at_the_trace_quantiles_keeping_the_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench(monkeypatch)
    # bin 1 holds 5000, 5500, 6000, 7000, 8000, 9000 (the warm-up request too: the prompt law is the whole trace's);
    # the inverted cdf reaches 1/4 at 5,500 (2 of 6) and 3/4 at 8,000 (5 of 6): mean 6,750, shifted to the bin's
    # mean, here given as 7,000: +250. Bin 0: 1,000 and 1,200, mean 1,100 as given.
    out = bench.trace_quadrature(_requests([1100.0, 7000.0]), 2)
    np.testing.assert_allclose(out, [[1000.0, 1200.0], [5750.0, 8250.0]])
