"""DualPath's optimal split (pdplan/cache/dual_path.py) over random clusters: never a busier bottleneck than either
single path or any other split, and the read bound it gives is what saturates its busiest resource."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.cache.dual_path import DualPathCluster, max_read_bytes_per_s, optimal_split, read_path_load

bandwidth = st.floats(1e9, 1e12)


@st.composite
def clusters(draw: st.DrawFn) -> DualPathCluster:
    return DualPathCluster(
        prefill_nodes=draw(st.floats(0.125, 64)),
        decode_nodes=draw(st.floats(0.125, 64)),
        gpus_per_node=draw(st.integers(1, 16)),
        cnic_bytes_per_s=draw(bandwidth),
        snic_bytes_per_s=draw(bandwidth),
        dram_bytes_per_s=draw(bandwidth),
        pcie_bytes_per_s=draw(bandwidth),
    )


@settings(max_examples=300, deadline=None)
@given(cluster=clusters(), other=st.floats(0.0, 1.0), read=st.floats(1e6, 1e13))
def test_optimal_split_is_never_busier(cluster: DualPathCluster, other: float, read: float) -> None:
    best = optimal_split(cluster)
    assert 0.0 <= best <= 1.0
    peak = read_path_load(cluster, read, best).max_utilisation
    for f in (0.0, 1.0, other):
        assert peak <= read_path_load(cluster, read, f).max_utilisation * (1 + 1e-9)
    at_bound = read_path_load(cluster, max_read_bytes_per_s(cluster, best), best)
    assert at_bound.max_utilisation == pytest.approx(1.0, rel=1e-9)
