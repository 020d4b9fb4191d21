"""The simulator's storage read paths (:mod:`pdplan.sim.storage_paths`): FCFS servers, cut-through, path choice and
the exposed move to the GPU, on hand-worked numbers (GB = 1e9 bytes)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.sim.storage_paths import ReadPathNodes, StorageReads

GB = 1e9
NODES = ReadPathNodes(
    tier="pool",
    prefill_nodes=1,
    decode_nodes=2,
    prefill_instances_per_node=2,
    gpus_per_prefill_instance=4,
    gpus_per_node=8,
    snic_bytes_per_s=10 * GB,
    dram_bytes_per_s=100 * GB,
    cnic_bytes_per_s=50 * GB,
    pcie_bytes_per_s=25 * GB,
    latency_s=0.0,
    layerwise=False,
    n_layers=10,
)


def _reads(**changes: object) -> StorageReads:
    return StorageReads(dataclasses.replace(NODES, **changes), np.random.default_rng(0))  # type: ignore[arg-type]


def test_one_read_takes_its_bytes_over_the_snic_plus_the_latency() -> None:
    reads = _reads(latency_s=0.002)
    ready, held = reads.fetch(1, 1 * GB, 5.0)  # 1 GB / 10 GB/s; DRAM at 100 GB/s streams under it
    assert ready == pytest.approx(5.0 + 0.1 + 0.002)
    assert held.node == 0  # instance 1 of 2 per node: prefill node 0


def test_reads_on_one_snic_queue_fcfs() -> None:
    reads = _reads()
    first, _ = reads.fetch(0, 1 * GB, 0.0)
    second, _ = reads.fetch(1, 0.5 * GB, 0.05)  # same node: starts when the first leaves the SNIC at 0.1
    assert (first, second) == pytest.approx((0.1, 0.15))


def test_a_slower_downstream_server_sets_the_pace_and_holds_only_its_own_work() -> None:
    reads = _reads(dram_bytes_per_s=5 * GB)  # DRAM slower than the SNIC: 1 GB takes 0.2 s there
    ready, _ = reads.fetch(0, 1 * GB, 0.0)
    assert ready == pytest.approx(0.2)
    assert reads.snic_free[0] == pytest.approx(0.1)  # the SNIC is free for the next read after its own 0.1 s


def test_shorter_queue_sends_a_read_to_the_decode_node_with_the_shorter_backlog() -> None:
    reads = _reads(policy="shorter-queue")
    _, a = reads.fetch(0, 1 * GB, 0.0)  # every queue empty: a tie stays on the prefill node
    _, b = reads.fetch(0, 1 * GB, 0.0)  # PE backlog 0.1 s against 0: decode node 1 (nodes after the prefill ones)
    _, c = reads.fetch(0, 1 * GB, 0.0)  # PE 0.1, DE1 0.1, DE2 0: decode node 2
    ready, d = reads.fetch(0, 1 * GB, 0.0)  # all at 0.1: a tie, the prefill node, done at 0.2
    assert [h.node for h in (a, b, c, d)] == [0, 1, 2, 0]
    assert ready == pytest.approx(0.2)


@pytest.mark.parametrize(("share", "decode"), [(0.0, False), (1.0, True)])
def test_a_fixed_split_of_zero_or_one_takes_one_path(share: float, decode: bool) -> None:
    reads = _reads(policy="split", de_fraction=share)
    assert {reads.fetch(0, 1 * GB, float(t))[1].over_decode(1) for t in range(20)} == {decode}


def test_a_split_draws_its_share() -> None:
    reads = _reads(policy="split", de_fraction=0.25)
    decode = [reads.fetch(0, 1e3, float(t))[1].node >= 1 for t in range(4000)]
    assert np.mean(decode) == pytest.approx(0.25, abs=0.02)  # binomial sd 0.007


def test_the_move_to_the_gpu_whole_or_layer_by_layer() -> None:
    # PE path: DRAM 100 GB/s then the instance's 4 GPUs x min(50, 25) = 100 GB/s: 1 GB moves in 0.01 s
    reads = _reads()
    _, held = reads.fetch(0, 1 * GB, 0.0)
    assert reads.to_gpu(0, held, 1.0, compute_s=0.05) == pytest.approx(0.01)
    # layer-wise, 10 layers: a = 0.001 s a layer, under a compute of 0.005 s a layer: only the first layer waits
    layered = _reads(layerwise=True)
    _, held = layered.fetch(0, 1 * GB, 0.0)
    assert layered.to_gpu(0, held, 1.0, compute_s=0.05) == pytest.approx(0.001)
    # compute 0.0005 s a layer: a + 9 (a - c) = 0.001 + 9 x 0.0005
    _, held = layered.fetch(0, 1 * GB, 2.0)
    assert layered.to_gpu(0, held, 3.0, compute_s=0.005) == pytest.approx(0.0055)


def test_the_decode_path_crosses_the_decode_nodes_cnics() -> None:
    # CNICs of 5 GB/s: the decode node's out 8 x 5 = 40 GB/s, the instance's host-to-device 4 x min(5, 25) = 20 GB/s
    reads = _reads(policy="split", de_fraction=1.0, cnic_bytes_per_s=5 * GB)
    _, held = reads.fetch(0, 1 * GB, 0.0)
    assert reads.to_gpu(0, held, 1.0, compute_s=0.0) == pytest.approx(1 / 20)
    assert reads.cnic_out_free[held.node] == pytest.approx(1.0 + 1 / 40)


def test_summary_counts_the_window_s_work_and_the_decode_share() -> None:
    reads = _reads(policy="split", de_fraction=1.0)
    reads.fetch(0, 1 * GB, 1.0)  # DE node 1: 0.1 s
    reads.fetch(0, 1 * GB, 1.0)  # DE node 2 (shorter queue of the two): 0.1 s
    reads.fetch(0, 1 * GB, 9.0)  # outside the window
    stats = reads.summary((0.0, 2.0))
    assert stats.utilisation["DE SNIC"] == pytest.approx(0.05)
    assert stats.utilisation["PE SNIC"] == 0.0
    assert stats.de_share == 1.0
    assert stats.busiest == "DE SNIC"
    assert stats.read_limit_rps(1.0) == pytest.approx(20.0)  # 1 req/s at 5 % busiest: 20 req/s


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"snic_bytes_per_s": 0.0}, "bandwidth"),
        ({"latency_s": -1.0}, "latency"),
        ({"de_fraction": 1.5}, "share"),
        ({"policy": "shorter-queue", "decode_nodes": 0}, "decode node"),
        ({"policy": "round-robin"}, "read policy"),
        ({"prefill_nodes": 0}, "counts"),
    ],
)
def test_bad_nodes_are_refused(change: dict[str, object], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        dataclasses.replace(NODES, **change)  # type: ignore[arg-type]


def test_an_instance_outside_the_prefill_nodes_is_refused() -> None:
    with pytest.raises(SpecError, match="outside"):
        _reads().fetch(2, 1 * GB, 0.0)
