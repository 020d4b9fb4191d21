"""AIConfigurator's balanced logits under DeepSeek-V3's group-limited routing (fitting.moe_grouped)."""

from __future__ import annotations

import numpy as np
from fitting.fit_moe import MeasuredRoutingShape, _priced_as_measured
from fitting.moe_grouped import _selection_counts, grouped_balanced_routing

from pdplan.perf.moe import moe_shape
from pdplan.specs.routing_law import RoutingLaw

E, K, GROUPS, TOP_GROUPS = 256, 8, 8, 4


def _route(tokens: float, ep: float) -> tuple[float, float]:
    r = grouped_balanced_routing(tokens, E, K, ep, GROUPS, TOP_GROUPS)
    return float(r.pairs), float(r.hit)


def test_one_token_reads_its_four_hot_and_four_lowest_cold_experts() -> None:
    # token 0: hot 0, 32, 64, 96 (groups 0-3 kept of eight tied), cold fill 1, 2, 3, 4
    assert _route(1, 1) == (8.0, 8.0)
    counts = _selection_counts(1, E, K, GROUPS, TOP_GROUPS)
    assert set(np.flatnonzero(counts)) == {0, 1, 2, 3, 4, 32, 64, 96}


def test_two_tokens_share_the_cold_experts() -> None:
    # residues 0 and 16 (i·32/T): hot {0,32,64,96} and {16,48,80,112}; cold {1,2,3,4} and {0,1,2,3}: 12 distinct
    assert _route(2, 1) == (16.0, 12.0)


def test_at_ep_1_all_pairs_but_only_the_128_experts_of_groups_0_to_3() -> None:
    assert _route(64, 1) == (512.0, 128.0)
    assert _route(16384, 1) == (16384.0 * 8, 128.0)
    assert not np.any(_selection_counts(4096, E, K, GROUPS, TOP_GROUPS)[128:])


def test_rank_0_pairs_per_token_by_ep() -> None:
    # EP 8: experts 0-31 = one hot (32·0 + r) + four cold = 5 per token on all 32 experts; EP 16: hot only for
    # r < 16 (half the tokens) -> 4.5; EP 256: expert 0 is always a cold fill or the hot one -> 1
    assert _route(64, 8) == (320.0, 32.0)
    assert _route(64, 16) == (64 * 4.5, 16.0)
    assert _route(64, 256) == (64.0, 1.0)
    pairs = grouped_balanced_routing(np.full(8, 64.0), E, K, np.array([1, 2, 4, 8, 16, 32, 64, 256]), 8, 4).pairs
    np.testing.assert_allclose(pairs / 64.0, [8, 8, 6, 5, 4.5, 4.25, 4, 1])


def test_no_tokens_no_pairs() -> None:
    assert _route(0, 1) == (0.0, 0.0)


def test_fit_prices_deepseek_balanced_rows_as_measured_and_leaves_others() -> None:
    ds = moe_shape(np.array([64.0]), 7168, 2048, 256, 8, ep=np.array([1.0]), law=RoutingLaw("balanced"))
    priced = _priced_as_measured(ds)
    assert isinstance(priced, MeasuredRoutingShape)
    assert float(priced.routing().hit[0]) == 128.0
    assert float(ds.routing().hit[0]) == 256.0  # the labelled law: 512 picks over all 256 experts
    kimi = moe_shape(np.array([64.0]), 7168, 2048, 384, 8, law=RoutingLaw("balanced"))
    assert _priced_as_measured(kimi) is kimi
    power = moe_shape(np.array([64.0]), 7168, 2048, 256, 8, law=RoutingLaw("power_law", 1.2))
    assert _priced_as_measured(power) is power
