"""DualPath's optimal split (pdplan/cache/dual_path.py) over random clusters: never a busier bottleneck than either
single path or any other split, and the read bound it gives is what saturates its busiest resource. The storage read
stage's SNIC wait law (pdplan/serving/dual_path_setup.py) over random loads: a probability law whose mean is the
mean wait."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.cache.dual_path import DualPathCluster, max_read_bytes_per_s, optimal_split, read_path_load
from pdplan.serving.dual_path_setup import StorageReadStage

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


@settings(max_examples=200, deadline=None)
@given(
    residual_s=st.floats(1e-4, 1.0),
    rho=st.tuples(st.floats(0.0, 0.999), st.floats(0.0, 0.999)),
    f=st.floats(0.0, 1.0),
    decode_servers=st.integers(1, 16),
    pooled=st.sampled_from([0, 2, 7]),
)
def test_wait_law_keeps_the_mean_wait(
    residual_s: float, rho: tuple[float, float], f: float, decode_servers: int, pooled: int
) -> None:
    # at 1 req/s the SNICs sit at ρ; the pooled rule takes the busier one's ρ for every SNIC
    stage = StorageReadStage(np.array([[0.1]]), residual_s, rho, f, 1, 1.0, None, decode_servers, pooled)
    rates = np.array([1.0])
    law = stage.wait_law(rates, 1)
    assert np.all(law.weights >= -1e-15)
    assert float(law.weights.sum()) == pytest.approx(1.0, abs=1e-12)
    assert np.all(law.points_s >= 0.0)
    assert law.bin_mean_s[0, 0] == pytest.approx(stage.wait_s(rates)[0], rel=1e-9, abs=1e-15)
