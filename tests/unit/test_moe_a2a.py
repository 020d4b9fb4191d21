"""EP dispatch/combine (pdplan.perf.moe_a2a), hand-worked on the shipped H100 entries."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import rdma_fractions
from pdplan.perf.moe_a2a import FP8_DISPATCH_BYTES, a2a_time_s, copies_per_token, node_copies_per_token

TABLE = open_catalog().kernel_table("h100-sxm")
FRACTIONS = rdma_fractions()  # pdplan/data/ep_a2a.yaml


def test_copies_per_token() -> None:
    # normal mode: remote ranks hit, (ep-1)·(1-(1-1/ep)^k); low-latency: remote experts k·(ep-1)/ep
    assert float(copies_per_token(8, 8, "normal")) == pytest.approx(7 * (1 - (7 / 8) ** 8))
    assert float(copies_per_token(8, 8, "low_latency")) == pytest.approx(7.0)
    assert float(copies_per_token(8, 1, "normal")) == 0.0


def test_intra_node_is_alpha_plus_bytes_over_beta() -> None:
    ab = TABLE.ep_a2a["low_latency"].dispatch
    got = float(a2a_time_s(128, 7168, 8, 8, "low_latency", "dispatch", TABLE))
    assert got == pytest.approx(ab.alpha_s + 128 * 7168 * FP8_DISPATCH_BYTES * 7.0 / ab.bus_bytes_per_s)
    assert float(a2a_time_s(128, 7168, 8, 1, "normal", "combine", TABLE)) == 0.0


def test_across_nodes_needs_the_nic_rate_and_is_slower() -> None:
    with pytest.raises(SpecError, match="rdma_bytes_per_s"):
        a2a_time_s(128, 7168, 8, 32, "low_latency", "dispatch", TABLE)
    one = a2a_time_s(128, 7168, 8, 8, "low_latency", "dispatch", TABLE)
    kw = {"rdma_bytes_per_s": 50e9, "rdma_fraction": FRACTIONS["low_latency"]}
    four = a2a_time_s(128, 7168, 8, 32, "low_latency", "dispatch", TABLE, **kw)
    assert float(four) > float(one)
    # 24 of the 31 remote peers are off-node: that share at 0.78 of a 50 GB/s NIC
    cross = 128 * 7168 * FP8_DISPATCH_BYTES * float(copies_per_token(8, 32, "low_latency")) * 24 / 31
    ab = TABLE.ep_a2a["low_latency"].dispatch
    assert float(four) == pytest.approx(ab.alpha_s + cross / (50e9 * FRACTIONS["low_latency"]))


def test_time_grows_with_tokens() -> None:
    t = a2a_time_s(np.array([1.0, 64.0, 4096.0]), 7168, 8, 8, "normal", "combine", TABLE)
    assert np.all(np.diff(t) > 0.0)


def test_node_copies_per_token() -> None:
    # EP32 over 4 nodes of 8: NIC 3·(1 − (3/4)^8) = 2.700 distinct remote nodes; NVLink 32·(1 − (31/32)^8)·7/8
    nic, nvl = node_copies_per_token(8, 32, 8)
    assert float(nic) == pytest.approx(3 * (1 - 0.75**8))
    assert float(nic) == pytest.approx(2.6997, abs=1e-4)
    assert float(nvl) == pytest.approx(32 * (1 - (31 / 32) ** 8) * 7 / 8)


def test_normal_mode_across_nodes_counts_nodes_not_gpus() -> None:
    # 16,384 tokens, EP32: combine NIC bytes 16384·7168·2·2.700 at 0.855 of 50 GB/s vs NVLink 6.273 copies at β
    ab = TABLE.ep_a2a["normal"].combine
    nic, nvl = (float(x) for x in node_copies_per_token(8, 32, 8))
    row = 16384 * 7168 * 2.0
    want = max(ab.alpha_s + row * nvl / ab.bus_bytes_per_s, ab.alpha_s + row * nic / (50e9 * FRACTIONS["normal"]))
    kw = {"rdma_bytes_per_s": 50e9, "rdma_fraction": FRACTIONS["normal"]}
    got = float(a2a_time_s(16384, 7168, 8, 32, "normal", "combine", TABLE, **kw))
    assert got == pytest.approx(want)
    assert got == pytest.approx(ab.alpha_s + row * nic / (50e9 * 0.855))  # the NIC binds: 7.43 ms
    # a copy per remote GPU (5.38 per token) would be twice the NIC time
    per_gpu = float(copies_per_token(8, 32, "normal")) * 24 / 31
    assert per_gpu / nic == pytest.approx(1.99, abs=0.01)
