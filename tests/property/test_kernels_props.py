"""Monotonicity properties of the kernel cost functions."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.io.kernel_tables import load_kernel_table, packaged_table_ids
from pdplan.perf.kernels import allreduce_time_s, decode_attention_time_s, gemm_time_s, prefill_attention_time_s


@dataclass(frozen=True)
class Gpu:
    name: str = "test"
    bf16_flops_per_s: float = 1e15
    fp8_flops_per_s: float | None = 2e15
    memory_bytes_per_s: float = 3e12


TABLES = {g: load_kernel_table(g) for g in packaged_table_ids()}
dims = st.integers(1, 65536)
gpus = st.sampled_from(sorted(TABLES))


@settings(max_examples=200, deadline=None)
@given(gpus, dims, dims, dims, st.integers(1, 4096), st.sampled_from(["m", "n", "k"]))
def test_gemm_non_decreasing(gid: str, m: int, n: int, k: int, extra: int, which: str) -> None:
    t = TABLES[gid]
    grown = {"m": m, "n": n, "k": k}
    grown[which] += extra
    assert gemm_time_s(grown["m"], grown["n"], grown["k"], "bf16", Gpu(), t) >= gemm_time_s(m, n, k, "bf16", Gpu(), t)


@settings(max_examples=200, deadline=None)
@given(gpus, st.integers(1, 256), st.integers(1, 32768), st.integers(1, 64), st.integers(1, 64))
def test_attention_non_decreasing(gid: str, b: int, s: int, h: int, extra: int) -> None:
    t = TABLES[gid]
    base_p = prefill_attention_time_s(b, s, h, 1, 128, Gpu(), t)
    assert prefill_attention_time_s(b + extra, s, h, 1, 128, Gpu(), t) >= base_p
    assert prefill_attention_time_s(b, s + extra, h, 1, 128, Gpu(), t) >= base_p
    base_d = decode_attention_time_s(b, s, h, 1, 128, 2.0, Gpu(), t)
    assert decode_attention_time_s(b + extra, s, h, 1, 128, 2.0, Gpu(), t) >= base_d
    assert decode_attention_time_s(b, s + extra, h, 1, 128, 2.0, Gpu(), t) >= base_d


@settings(max_examples=200, deadline=None)
@given(gpus, dims, dims, st.floats(1.0, 10.0), st.floats(1.0, 10.0))
def test_more_peak_never_slower(gid: str, m: int, c: int, fx: float, bx: float) -> None:
    t, slow = TABLES[gid], Gpu()
    fast = Gpu(bf16_flops_per_s=slow.bf16_flops_per_s * fx, memory_bytes_per_s=slow.memory_bytes_per_s * bx)
    assert gemm_time_s(m, 4096, 4096, "bf16", fast, t) <= gemm_time_s(m, 4096, 4096, "bf16", slow, t)
    assert decode_attention_time_s(m % 512 + 1, c, 32, 8, 128, 2.0, fast, t) <= (
        decode_attention_time_s(m % 512 + 1, c, 32, 8, 128, 2.0, slow, t)
    )


@settings(max_examples=200, deadline=None)
@given(gpus, st.integers(1, 2048), st.integers(1, 131072), st.integers(1, 8), st.sampled_from([1.0, 2.0]))
def test_decode_never_beats_one_kv_read_at_peak(gid: str, b: int, c: int, kv: int, kvb: float) -> None:
    kv_bytes = b * c * kv * 128 * 2 * kvb
    t = decode_attention_time_s(b, c, kv * 8, kv, 128, kvb, Gpu(), TABLES[gid])
    assert t >= kv_bytes / Gpu().memory_bytes_per_s


@settings(max_examples=200, deadline=None)
@given(gpus, dims, dims, dims, st.integers(1, 4096), st.sampled_from(["m", "n", "k"]), st.booleans())
def test_fp8_and_warm_l2_gemm_non_decreasing(
    gid: str, m: int, n: int, k: int, extra: int, which: str, warm: bool
) -> None:
    t = TABLES[gid]
    if "fp8" not in t.gemm:
        return
    grown = {"m": m, "n": n, "k": k}
    grown[which] += extra
    for flavour in ("bf16", "fp8"):
        big = gemm_time_s(grown["m"], grown["n"], grown["k"], flavour, Gpu(), t, warm_l2=warm)
        assert big >= gemm_time_s(m, n, k, flavour, Gpu(), t, warm_l2=warm)


@settings(max_examples=200, deadline=None)
@given(
    gpus,
    st.integers(1, 256),
    st.integers(1, 32768),
    st.integers(1, 64),
    st.sampled_from([32, 64, 96, 128, 160, 192, 256, 384, 512]),
    st.integers(1, 256),
    st.booleans(),
)
def test_attention_non_decreasing_in_head_dim(gid: str, b: int, s: int, h: int, d: int, extra: int, warm: bool) -> None:
    t = TABLES[gid]
    assert prefill_attention_time_s(b, s, h, 1, d + extra, Gpu(), t) >= (
        prefill_attention_time_s(b, s, h, 1, d, Gpu(), t)
    )
    assert decode_attention_time_s(b, s, h, 1, d + extra, 2.0, Gpu(), t, warm_l2=warm) >= (
        decode_attention_time_s(b, s, h, 1, d, 2.0, Gpu(), t, warm_l2=warm)
    )


@settings(max_examples=200, deadline=None)
@given(gpus, st.floats(1.0, 1e10), st.floats(1.0, 1e4), st.sampled_from([2, 3, 4, 8, 16]))
def test_allreduce_non_decreasing_in_size(gid: str, size: float, extra: float, n: int) -> None:
    t = TABLES[gid]
    assert allreduce_time_s(size + extra, n, Gpu(), t) >= allreduce_time_s(size, n, Gpu(), t)
