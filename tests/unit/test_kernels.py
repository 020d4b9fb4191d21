"""Hand-worked checks of the primitive kernel cost functions."""

from __future__ import annotations

import numpy as np
import pytest
from support.tables import ToyGpu

from pdplan.errors import SpecError, UnknownNameError
from pdplan.io.kernel_tables import load_kernel_table, packaged_table_ids
from pdplan.perf.kernels import (
    allreduce_time_s,
    decode_attention_time_s,
    elementwise_time_s,
    gemm_time_s,
    head_dim_factor,
    prefill_attention_time_s,
    smooth_max,
)
from pdplan.specs.kernel_table import KernelTable

Gpu = ToyGpu  # 1 PFLOP/s bf16, 2 PFLOP/s fp8, 1 TB/s HBM


def table(**over: object) -> KernelTable:
    base = load_kernel_table("h100-sxm").model_dump()
    base["gemm"]["bf16"] = {
        "peak_fraction": 0.5,
        "m0_tokens": 0.0,
        "n0_elements": 0.0,
        "k0_elements": 0.0,
        "memory_fraction": 0.5,
        "overhead_s": 1e-6,
        "smooth_q": 64.0,
        "quant_bytes_per_element": 0.0,
    }
    base.update(over)
    return KernelTable.model_validate(base)


def test_large_gemm_is_compute_bound() -> None:
    m = n = k = 8192.0
    expected = 1e-6 + 2 * m * n * k / (1e15 * 0.5)
    assert gemm_time_s(m, n, k, "bf16", Gpu(), table()) == pytest.approx(expected, rel=1e-3)


def test_m1_gemm_is_weight_streaming() -> None:
    n = k = 8192.0
    expected = 1e-6 + (k + n * k + n) * 2 / (1e12 * 0.5)
    assert gemm_time_s(1, n, k, "bf16", Gpu(), table()) == pytest.approx(expected, rel=1e-3)


def test_fp8_on_gpu_without_fp8_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="fp8"):
        gemm_time_s(1, 1, 1, "fp8", Gpu(fp8_flops_per_s=None), load_kernel_table("h100-sxm"))


def test_smooth_max_bounds() -> None:
    a, b = np.array([1.0, 2.0, 0.0]), np.array([1.0, 0.5, 0.0])
    out = smooth_max(a, b, 2.0)
    assert np.allclose(out, [np.sqrt(2), np.sqrt(4.25), 0.0])


def test_prefill_flops_formula() -> None:
    t = load_kernel_table("h100-sxm")
    p = t.prefill_attention["bf16"]
    b, s, h, d = 4.0, 8192.0, 32.0, 128.0
    flops_padded = 2 * d * (s + 1) * (s + p.s0_tokens) * (b * h + p.w0_batch_heads)
    got = prefill_attention_time_s(b, s, h, 8, d, Gpu(), t)
    assert got >= p.overhead_s + flops_padded / (1e15 * p.compute_fraction)


def test_decode_reads_kv_at_least_once() -> None:
    t = load_kernel_table("h100-sxm")
    b, c, kv, d = 64.0, 4096.0, 8.0, 128.0
    kv_bytes = b * c * kv * d * 2 * 2
    assert decode_attention_time_s(b, c, 64, kv, d, 2.0, Gpu(), t) >= kv_bytes / 1e12


def test_allreduce_alpha_beta_and_single_gpu() -> None:
    t = table(allreduce={"alpha_s": 5e-6, "bus_bytes_per_s": 1e11})
    assert allreduce_time_s(1e8, 8, Gpu(), t) == pytest.approx(5e-6 + 1.75 * 1e8 / 1e11)
    assert allreduce_time_s(1e8, 1, Gpu(), t) == 0.0


def test_allreduce_takes_faster_implementation_per_gpu_count() -> None:
    t = table(
        allreduce={
            "alpha_s": 1e-5,
            "bus_bytes_per_s": 1e10,
            "custom": {8: {"alpha_s": 2e-6, "bus_bytes_per_s": 1e11}},
            "nccl": {8: {"alpha_s": 2e-5, "bus_bytes_per_s": 4e11}},
        }
    )
    small, large = 1e4, 1e9
    assert allreduce_time_s(small, 8, Gpu(), t) == pytest.approx(2e-6 + 1.75 * small / 1e11)
    assert allreduce_time_s(large, 8, Gpu(), t) == pytest.approx(2e-5 + 1.75 * large / 4e11)
    assert allreduce_time_s(small, 4, Gpu(), t) == pytest.approx(1e-5 + 1.5 * small / 1e10)


def test_gemm_warm_l2_and_k_latency() -> None:
    base = load_kernel_table("h100-sxm").model_dump()
    gemm = {
        "peak_fraction": 0.5,
        "m0_tokens": 0.0,
        "n0_elements": 0.0,
        "k0_elements": 0.0,
        "memory_fraction": 0.5,
        "overhead_s": 0.0,
        "smooth_q": 64.0,
        "l2_bytes": 1e6,
        "l2_speedup": 4.0,
    }
    base["gemm"]["bf16"] = gemm
    t = KernelTable.model_validate(base)
    # m=1, n=k=1000: 2 MB of weights at 5e11 B/s; warm: the first 1 MB from L2 at 4x
    act = 4000.0 / 5e11
    assert gemm_time_s(1, 1000, 1000, "bf16", Gpu(), t) == pytest.approx(act + 2e6 / 5e11, rel=1e-3)
    warm = act + 1e6 / 2e12 + 1e6 / 5e11
    assert gemm_time_s(1, 1000, 1000, "bf16", Gpu(), t, warm_l2=True) == pytest.approx(warm, rel=1e-3)
    base["gemm"]["bf16"] = {**gemm, "k_latency_s": 1e-5, "k_sat_elements": 1000.0}
    t = KernelTable.model_validate(base)
    # a 1x1 output with k=1000 is bound by the serial k loop: 1e-5 · k/(k + k_sat)
    assert gemm_time_s(1, 1, 1000, "bf16", Gpu(), t) == pytest.approx(5e-6, rel=1e-3)


def test_head_dim_factor_log_linear_and_clamped() -> None:
    knots = {64: 0.5, 256: 1.0}
    assert head_dim_factor(128, knots) == pytest.approx(np.sqrt(0.5))
    assert head_dim_factor(32, knots) == pytest.approx(0.5)
    assert head_dim_factor(1024, knots) == pytest.approx(1.0)
    assert head_dim_factor(77, {}) == 1.0


def test_elementwise() -> None:
    t = table(elementwise={"memory_fraction": 0.8, "overhead_s": 2e-6})
    assert elementwise_time_s(8e8, Gpu(), t) == pytest.approx(2e-6 + 1e-3)


def test_every_packaged_table_loads_and_unknown_is_named() -> None:
    ids = packaged_table_ids()
    assert {"h100-sxm", "a100-sxm-80gb", "l4", "mi300x"} <= set(ids)
    for gid in ids:
        tab = load_kernel_table(gid)
        assert tab.calibrated == (tab.derived_from is None)
        assert tab.sources
    with pytest.raises(UnknownNameError):
        load_kernel_table("h100-sxn")


def test_vectorised_100k_points_fast() -> None:
    import time

    rng = np.random.default_rng(0)
    m = rng.integers(1, 8192, 100_000)
    t = load_kernel_table("h100-sxm")
    start = time.perf_counter()
    gemm_time_s(m, 4096, 4096, "bf16", Gpu(), t)
    decode_attention_time_s(m, 2048, 32, 8, 128, 2.0, Gpu(), t)
    assert time.perf_counter() - start < 0.5
