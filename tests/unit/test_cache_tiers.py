"""The tier hierarchy (pdplan/cache/tiers.py): band edges, per-tier hits against a simulated two-tier LRU, traffic,
utilisation and load time with and without layer-wise overlap."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.lru_oracle import exclusive_two_tier_hits, lru_prefix_hits

from pdplan.cache.lru_closed_form import SessionWorkload, ThinkTime, geometric_turns, session_cache
from pdplan.cache.stack_distance import hit_ratio_curve
from pdplan.cache.synthetic import session_traces
from pdplan.cache.tiers import CacheTier, ClosedFormCurve, PathElement, TierHierarchy, tier_from_storage
from pdplan.cache.trace import BlockTrace
from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog

PCIE = PathElement("pcie", 50e9)


def _tier(name: str, capacity: float, bandwidth: float, overlap: bool = False, latency: float = 1e-4) -> CacheTier:
    return CacheTier(name, capacity, (PathElement(f"{name} medium", bandwidth), PCIE), latency, overlap)


def _trace(requests: list[list[int]]) -> BlockTrace:
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in requests]))).astype(np.int64)
    return BlockTrace(offsets, np.array([b for r in requests for b in r], dtype=np.int64), 1)


def test_band_edges() -> None:
    tiers = (_tier("hbm", 10, 1e12), _tier("dram", 30, 5e11), _tier("ssd", 100, 5e10))
    assert TierHierarchy(tiers, "exclusive").band_edges_tokens.tolist() == [10, 40, 140]
    assert TierHierarchy(tiers, "inclusive").band_edges_tokens.tolist() == [10, 30, 100]
    with pytest.raises(SpecError, match="inclusive"):
        TierHierarchy((_tier("a", 30, 1e9), _tier("b", 10, 1e9)), "inclusive")


@pytest.mark.parametrize("seed", range(25))
def test_exclusive_hierarchy_is_one_lru_of_the_summed_capacity(seed: int) -> None:
    """Hit or miss is exact; the tier split by the curve's bands never gives the upper tier a hit it does not
    serve, and misses at most the blocks of the request itself (docs/prefix_cache.md §3)."""
    rng = np.random.default_rng(seed)
    requests = [rng.integers(0, 12, int(rng.integers(1, 6))).tolist() for _ in range(30)]
    curve = hit_ratio_curve(_trace(requests))
    for upper in range(0, 8):
        for lower in range(0, 8):
            top, bottom = exclusive_two_tier_hits(requests, upper, lower)
            total = lru_prefix_hits(requests, [len(r) for r in requests], upper + lower)
            assert [a + b for a, b in zip(top, bottom, strict=False)] == total
            hierarchy = TierHierarchy((_tier("hbm", upper, 1e12), _tier("dram", lower, 1e11)), "exclusive")
            split = hierarchy.token_hit_ratios(_BlockCurve(curve)) * curve.total_tokens
            assert split.sum() == pytest.approx(sum(total))
            assert split[0] <= sum(top) + 1e-9
            assert sum(top) - split[0] <= sum(len(r) for r in requests)


class _BlockCurve:
    """The exact curve with capacities in tokens of one-token blocks."""

    def __init__(self, curve: object) -> None:
        self.curve = curve

    def token_hit_ratio_at_tokens(self, capacity_tokens: object) -> np.ndarray:  # type: ignore[type-arg]
        return self.curve.token_hit_ratio_at_tokens(capacity_tokens)  # type: ignore[attr-defined, no-any-return]


def test_band_split_on_a_session_trace_is_close() -> None:
    workload = SessionWorkload(1.0, geometric_turns(4.0, 20), 64.0, 64.0, 32.0, ThinkTime("exponential", 60.0), 5.0)
    trace = session_traces(workload, 3000, 16, seed=1)[0]
    curve = hit_ratio_curve(trace)
    hierarchy = TierHierarchy((_tier("hbm", 800 * 16, 1e12), _tier("dram", 2000 * 16, 1e11)), "exclusive")
    ratios = hierarchy.token_hit_ratios(curve)
    assert ratios.sum() == pytest.approx(curve.token_hit_ratio(2800).item())
    assert ratios[0] == pytest.approx(curve.token_hit_ratio(800).item())


def test_traffic_and_utilisation() -> None:
    curve = ClosedFormCurve(lambda tokens: min(tokens / 1000.0, 0.8))
    tiers = (_tier("hbm", 100, 1e12), _tier("dram", 300, 2e11), _tier("ssd", 1000, 2e10))
    hierarchy = TierHierarchy(tiers, "exclusive")
    loads = hierarchy.loads(curve, request_rate_per_s=10.0, mean_prompt_tokens=5000.0, kv_bytes_per_token=1e5)
    ratios = [load.token_hit_ratio for load in loads]
    assert ratios == pytest.approx([0.1, 0.3, 0.4])
    bytes_per_s = [load.read_bytes_per_s for load in loads]
    assert bytes_per_s == pytest.approx([10.0 * 5000 * 1e5 * r for r in ratios])
    # the shared PCIe element carries the traffic of every tier
    assert loads[2].utilisation["pcie"] == pytest.approx(sum(bytes_per_s) / 50e9)
    assert loads[2].utilisation["ssd medium"] == pytest.approx(bytes_per_s[2] / 2e10)


def test_load_time_and_layerwise_overlap() -> None:
    tier = _tier("dram", 1e6, 1e12, overlap=True, latency=1e-3)  # bottleneck: PCIe 50 GB/s
    tokens, kvb, layers = 10_000, 1e5, 50
    load = tier.load_time_s(tokens, kvb).item()
    assert load == pytest.approx(1e-3 + tokens * kvb / 50e9)
    transfer = load - 1e-3
    # compute slower than the load: only the first layer's share and the latency are exposed
    assert tier.exposed_load_s(tokens, kvb, 10.0, layers).item() == pytest.approx(1e-3 + transfer / layers)
    # no compute at all: everything is exposed
    assert tier.exposed_load_s(tokens, kvb, 0.0, layers).item() == pytest.approx(load)
    # half as much compute as load: a + (L - 1)(a - c)
    a, c = transfer / layers, transfer / 2 / layers
    expected = 1e-3 + a + (layers - 1) * (a - c)
    assert tier.exposed_load_s(tokens, kvb, transfer / 2, layers).item() == pytest.approx(expected)
    no_overlap = _tier("dram", 1e6, 1e12, overlap=False, latency=1e-3)
    assert no_overlap.exposed_load_s(tokens, kvb, 10.0, layers).item() == pytest.approx(load)
    assert tier.load_time_s(0, kvb).item() == 0.0
    assert tier.exposed_load_s(0, kvb, 1.0, layers).item() == 0.0


def test_bad_tiers() -> None:
    with pytest.raises(SpecError, match="capacity"):
        CacheTier("x", -1, (PCIE,), 0.0, False)
    with pytest.raises(SpecError, match="read path"):
        CacheTier("x", 1, (PathElement("dead", 0.0),), 0.0, False)


def test_tier_from_the_catalogue() -> None:
    catalog = open_catalog()
    dram = tier_from_storage(catalog.storage("host-dram-pcie5"), capacity_tokens=1e6, sharing=8, layerwise_overlap=True)
    assert dram.bottleneck_bytes_per_s == pytest.approx(min(500e9 / 8, 50e9))
    assert dram.latency_s == pytest.approx(5e-6)
    pool = catalog.storage("mooncake-store-2x200g")
    with pytest.raises(SpecError, match="latency"):
        tier_from_storage(pool, capacity_tokens=1e6, sharing=1, layerwise_overlap=False)
    given = tier_from_storage(pool, capacity_tokens=1e6, sharing=1, layerwise_overlap=False, latency_s=1e-4)
    assert given.latency_s == 1e-4
    with pytest.raises(SpecError, match="sharing"):
        tier_from_storage(pool, capacity_tokens=1.0, sharing=0, layerwise_overlap=False, latency_s=1e-4)


def test_closed_form_curve_in_a_hierarchy() -> None:
    workload = SessionWorkload(1.0, geometric_turns(4.0, 20), 500.0, 500.0, 200.0, ThinkTime("exponential", 60.0), 5.0)
    curve = ClosedFormCurve(lambda c: session_cache(workload, c).token_hit_ratio)
    hierarchy = TierHierarchy((_tier("hbm", 1e5, 1e12), _tier("dram", 1e6, 1e11)), "exclusive")
    ratios = hierarchy.token_hit_ratios(curve)
    assert ratios.sum() == pytest.approx(session_cache(workload, 1.1e6).token_hit_ratio)
    assert math.isclose(ratios[0], session_cache(workload, 1e5).token_hit_ratio)
