"""DualPath read paths (pdplan/cache/dual_path.py): every resource's traffic worked by hand, the splits, the read
bound, the bottleneck-free P/D range, the append FLOPs and the cache-compute ratio, and the bad inputs."""

from __future__ import annotations

import math

import pytest

from pdplan.cache.dual_path import (
    DualPathCluster,
    SparseAttention,
    append_prefill_flops,
    bottleneck_free_ratio_range,
    cache_compute_ratio_gb_per_pflop,
    max_read_bytes_per_s,
    optimal_split,
    read_path_load,
    snic_balanced_split,
)
from pdplan.errors import SpecError
from pdplan.io.catalog import builtin_models_dir, load_model_yaml

GB = 1e9


def _paper(prefill: float = 2, decode: float = 4, dram: float = 500 * GB) -> DualPathCluster:
    """The paper's node: g = 8, B = 50 GB/s per GPU, s = 1 (S = 50 GB/s), M = 500 GB/s; PCIe not a limit."""
    return DualPathCluster(prefill, decode, 8, 50 * GB, 50 * GB, dram)


def test_every_resource_by_hand_at_the_balanced_split() -> None:
    """2P4D reading R = 150 GB/s, two thirds over the DE path (f = 2/3): the module docstring's table."""
    load = read_path_load(_paper(), 150 * GB, 2 / 3)
    expected = {
        "PE SNIC": 50 / 100,  # (1 − f)R = 50 GB/s over 2 nodes x 50
        "DE SNIC": 100 / 200,  # fR = 100 over 4 x 50
        "PE DRAM": 100 / 1000,  # 2 x 50 over 2 x 500
        "DE DRAM": 400 / 2000,  # (2 + 2/3) x 150 = 400 over 4 x 500
        "PE CNIC out": 100 / 800,  # 2 x 50 over 16 GPUs x 50
        "PE CNIC in": 150 / 800,
        "DE CNIC out": 250 / 1600,  # (1 + 2/3) x 150 over 32 x 50
        "DE CNIC in": 200 / 1600,  # (2 − 2/3) x 150
        "PE PCIe": 0.0,
        "DE PCIe": 0.0,
    }
    assert load.utilisation == pytest.approx(expected, rel=1e-12)
    assert load.binding == "PE SNIC"  # tied with the DE SNIC: the first named
    assert load.max_utilisation == pytest.approx(0.5)


def test_splits_and_read_bounds_of_2p4d() -> None:
    """Both SNIC pools bind together at f = D/(P + D): three times the prefill-only bound (P·S = 100 GB/s)."""
    cluster = _paper()
    assert snic_balanced_split(cluster) == pytest.approx(2 / 3)
    assert optimal_split(cluster) == pytest.approx(2 / 3)
    assert max_read_bytes_per_s(cluster, 0.0) == pytest.approx(100 * GB)
    assert max_read_bytes_per_s(cluster, optimal_split(cluster)) == pytest.approx(300 * GB)


def test_a_dram_bound_decode_node_leaves_nothing_to_split() -> None:
    """2P1D, M = 80 GB/s: the DE DRAM carries 2R/M even at f = 0 (the decode loads everything, the PE path's KV is
    written there) and more with every byte moved to the DE path, so the optimum reads over the PE alone:
    R_max = M/2 = 40 GB/s, bound by the DE DRAM (the PE DRAM carries R/M, the PE SNICs R/100 GB/s)."""
    cluster = DualPathCluster(2, 1, 8, 50 * GB, 50 * GB, 80 * GB)
    assert optimal_split(cluster) == 0.0
    assert max_read_bytes_per_s(cluster, 0.0) == pytest.approx(40 * GB)
    assert read_path_load(cluster, 40 * GB, 0.0).binding == "DE DRAM"


def test_a_slow_pcie_binds_whatever_the_split() -> None:
    """PCIe of 1 GB/s per GPU, 1P1D: every hit lands in a PE GPU (R/(P·g·p)), R_max = 8 GB/s at any split."""
    cluster = DualPathCluster(1, 1, 8, 50 * GB, 50 * GB, 500 * GB, pcie_bytes_per_s=1 * GB)
    for f in (0.0, 0.5, 1.0):
        assert max_read_bytes_per_s(cluster, f) == pytest.approx(8 * GB)
        assert read_path_load(cluster, 8 * GB, f).binding == "PE PCIe"


def test_bottleneck_free_range_and_its_empty_cases() -> None:
    assert bottleneck_free_ratio_range(8, 1, 10) == (1 / 7, 3.5)
    assert bottleneck_free_ratio_range(8, 2, 10) == (2 / 6, 1.5)  # (7) (g − s)/(2s) = 6/4 binds
    assert bottleneck_free_ratio_range(8, 5, 10) is None  # (1): 2s > g
    assert bottleneck_free_ratio_range(8, 1, 1.5) is None  # PE DRAM: 2·s·B > M
    assert bottleneck_free_ratio_range(8, 1, 3.2) is None  # (8) gives 0.1 < 1/7


def test_append_flops_of_one_token_by_hand() -> None:
    """DeepSeek-V3, one token after none: 2·N_active + L·2·H·(d_c + d_r + d_c)·1 (absorbed MLA, one key)."""
    model = load_model_yaml(builtin_models_dir() / "deepseek-v3.yaml")
    expected = 2 * model.active_non_embedding_params() + 61 * 2 * 128 * (576 + 512) * 1
    assert append_prefill_flops(model, 1, 0) == pytest.approx(expected, rel=1e-12)
    sparse = SparseAttention(top_k=2048, indexer_heads=64, indexer_head_dim=128)
    dense_attn = append_prefill_flops(model, 10, 100_000) - append_prefill_flops(model, 10, 0, sparse)
    assert dense_attn > 0  # 100K keys cost more than 2,048 plus the indexer


def test_cache_compute_ratio_units() -> None:
    """1e6 tokens of 1,000 B over 1 PFLOP: 1 GB/PFLOP."""
    assert cache_compute_ratio_gb_per_pflop(1e6, 1000, 1e15) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"snic_bytes_per_s": 0.0},
        {"cnic_bytes_per_s": -1.0},
        {"dram_bytes_per_s": math.nan},
        {"pcie_bytes_per_s": 0.0},
        {"decode_nodes": 0.0},
    ],
)
def test_a_path_without_bandwidth_is_bad_input(kwargs: dict[str, float]) -> None:
    base = {
        "prefill_nodes": 1.0,
        "decode_nodes": 1.0,
        "gpus_per_node": 8,
        "cnic_bytes_per_s": 50 * GB,
        "snic_bytes_per_s": 50 * GB,
        "dram_bytes_per_s": 500 * GB,
    }
    with pytest.raises(SpecError, match="dual path"):
        DualPathCluster(**(base | kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize("f", [-0.1, 1.5, math.nan])
def test_a_split_outside_0_1_is_bad_input(f: float) -> None:
    with pytest.raises(SpecError, match=r"share must lie in \[0, 1\]"):
        read_path_load(_paper(), GB, f)
    with pytest.raises(SpecError):
        max_read_bytes_per_s(_paper(), f)
