"""Hand-worked checks of the tiled attention terms (CTA counts, waves, critical path, split-KV)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from pydantic import ValidationError
from support.tables import ToyGpu

from pdplan.errors import SpecError
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.perf.kernels import decode_attention_time_s, gemm_time_s, prefill_attention_time_s, stream_s
from pdplan.perf.tiling import decode_cta_s, prefill_cta_s, sm_count
from pdplan.specs.kernel_attention import DecodeTiling, PrefillTiling
from pdplan.specs.kernel_table import KernelTable

Gpu = ToyGpu  # 1 PFLOP/s bf16, 2 PFLOP/s fp8, 1 TB/s HBM


@dataclass(frozen=True)
class GpuWithSms(ToyGpu):
    sm_count: int = 50


def _f(x: float) -> np.ndarray:
    return np.asarray(x, dtype=float)


PREFILL = PrefillTiling(tile_q=128, tile_kv=128, pack_gqa=True, cta_overhead_s=1e-6, span_exposed=0.5)
DECODE = DecodeTiling(
    tile_q=64, tile_kv=128, pack_gqa=True, cta_overhead_s=2e-6, cta_bytes_per_s=1e10, split_combine_s=1e-6
)


def test_prefill_cta_work_and_critical_path() -> None:
    # b=1, s=1024, 8 heads on 1 KV head (g=8, packed): rows 8192 -> 64 query tiles (CTAs),
    # 8 KV blocks; t_blk = 4·128·128·128 / 1e15 = 8.388608e-9 s.
    t_blk = 4 * 128 * 128 * 128 / 1e15
    work = 64 * (0.5 * (8 + 1) * t_blk + 1e-6 / 100)  # W/P on 100 SMs: 3.0559e-6 s
    span = 1e-6 + 8 * t_blk * 100  # last query tile walks all 8 blocks on one SM: 7.7109e-6 s
    expected = max(work, span) + 0.5 * min(work, span)
    got = prefill_cta_s(_f(1), _f(1024), _f(8), _f(1), _f(128), _f(1e15), PREFILL, 100.0)
    assert float(got) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(9.23885e-6, rel=1e-5)


def test_prefill_tile_padding_and_packing() -> None:
    # Unpacked, a 16-token prompt still costs one 128x128 tile per head: b·h = 4 CTAs of one
    # block each, so s = 16 and s = 128 cost the same; packed (g = 8) the 8 heads share a tile.
    unpacked = PREFILL.model_copy(update={"pack_gqa": False, "cta_overhead_s": 0.0})
    short = prefill_cta_s(_f(1), _f(16), _f(4), _f(4), _f(128), _f(1e15), unpacked, 100.0)
    full = prefill_cta_s(_f(1), _f(128), _f(4), _f(4), _f(128), _f(1e15), unpacked, 100.0)
    assert float(short) == pytest.approx(float(full))
    # one-token prompts are always packed: 8 heads of one KV head -> one CTA, not eight
    one = prefill_cta_s(_f(1), _f(1), _f(8), _f(1), _f(128), _f(1e15), unpacked, 100.0)
    eight = prefill_cta_s(_f(1), _f(2), _f(8), _f(1), _f(128), _f(1e15), unpacked, 100.0)
    t_blk = 4 * 128 * 128 * 128 / 1e15  # span 100·t_blk on one of 100 SMs, λ = 0.5 of the work
    assert float(one) == pytest.approx(100 * t_blk + 0.5 * 1 * t_blk)
    assert float(eight) == pytest.approx(100 * t_blk + 0.5 * 8 * t_blk)


def test_decode_split_kv_fills_the_machine() -> None:
    # b=1, 8 heads on 1 KV head, c=1024: one base CTA, 8 KV blocks of 128 tokens,
    # t_blk = 128·2·128·2 B / 1e10 B/s = 6.5536e-6 s. Unsplit: 2e-6 + 8·t_blk = 54.4288e-6;
    # split over min(floor(100/1), 8) = 8 CTAs: 2e-6 + t_blk + 1e-6 combine = 9.5536e-6.
    got = decode_cta_s(_f(1), _f(1024), _f(8), _f(1), _f(128), 2.0, DECODE, 100.0)
    assert float(got) == pytest.approx(9.5536e-6, rel=1e-12)
    mha = DECODE.model_copy(update={"split_mha": False})
    assert float(decode_cta_s(_f(1), _f(1024), _f(1), _f(1), _f(128), 2.0, mha, 100.0)) == (
        pytest.approx(54.4288e-6, rel=1e-12)
    )


def test_decode_waves_with_batch() -> None:
    # c=128 (one block, no split): 200 CTAs on 100 SMs are 2 waves, 250 are 2.5 (wave count
    # C/P, at least one), 50 still one whole wave.
    tau = 2e-6 + 6.5536e-6
    for b, waves in ((200, 2.0), (250, 2.5), (50, 1.0)):
        got = decode_cta_s(_f(b), _f(128), _f(8), _f(1), _f(128), 2.0, DECODE, 100.0)
        assert float(got) == pytest.approx(waves * tau)
    double = DECODE.model_copy(update={"ctas_per_sm": 2})  # 200 slots: one wave
    assert float(decode_cta_s(_f(200), _f(128), _f(8), _f(1), _f(128), 2.0, double, 100.0)) == (pytest.approx(tau))


def test_decode_cta_time_never_decreases_with_batch_or_context() -> None:
    b = np.arange(1, 600, dtype=float)
    t = decode_cta_s(b, _f(3000), _f(32), _f(8), _f(128), 2.0, DECODE, 132.0)
    assert np.all(np.diff(t) >= 0)
    c = np.arange(1, 20000, 7, dtype=float)
    t = decode_cta_s(_f(3), c, _f(32), _f(8), _f(128), 2.0, DECODE, 132.0)
    assert np.all(np.diff(t) >= 0)


def test_lru_warm_l2_ramp() -> None:
    bw, l2, sp = 1e12, 1e6, 4.0
    assert stream_s(_f(0.5e6), bw, l2, sp, True, "lru") == pytest.approx(0.5e-6 / 4)
    # half the 1.5 MB set hits: 1.5e-6·(1 − 0.5·(1 − 1/4)) = 0.9375e-6
    assert stream_s(_f(1.5e6), bw, l2, sp, True, "lru") == pytest.approx(0.9375e-6)
    assert stream_s(_f(2.5e6), bw, l2, sp, True, "lru") == pytest.approx(2.5e-6)
    assert stream_s(_f(2.5e6), bw, l2, sp, False, "lru") == pytest.approx(2.5e-6)
    x = np.linspace(1e3, 3e6, 5000)
    assert np.all(np.diff(stream_s(x, bw, l2, sp, True, "lru")) > 0)


def _table(**gemm: object) -> KernelTable:
    base = load_kernel_table("h100-sxm").model_dump()
    base["gemm"]["bf16"] = {
        "peak_fraction": 0.5,
        "m0_tokens": 0.0,
        "n0_elements": 0.0,
        "k0_elements": 0.0,
        "memory_fraction": 0.5,
        "overhead_s": 0.0,
        "smooth_q": 64.0,
        **gemm,
    }
    return KernelTable.model_validate(base)


def test_gemm_m_tile_pads_rows_above_one_tile() -> None:
    n = k = 8192.0
    t = _table(m_tile=128)
    fast_hbm = Gpu(memory_bytes_per_s=1e15)  # compute-bound: 1 PFLOP/s at half efficiency
    # m = 129 runs two 128-row tiles: compute as m = 256
    assert gemm_time_s(129, n, k, "bf16", fast_hbm, t) == pytest.approx(2 * 256 * n * k / 0.5e15, rel=1e-3)
    assert gemm_time_s(128, n, k, "bf16", fast_hbm, t) == pytest.approx(2 * 128 * n * k / 0.5e15, rel=1e-3)


def test_sm_count_comes_from_the_gpu_else_the_table() -> None:
    table = load_kernel_table("h100-sxm")
    assert table.sm_count == 132
    assert sm_count(Gpu(), table) == 132.0
    assert sm_count(GpuWithSms(), table) == 50.0
    # fewer SMs: fewer slots, so a many-CTA decode step gets slower
    many = 512
    assert decode_attention_time_s(many, 256, 32, 8, 128, 2.0, GpuWithSms(), table) > (
        decode_attention_time_s(many, 256, 32, 8, 128, 2.0, Gpu(), table)
    )
    assert prefill_attention_time_s(4, 4096, 32, 8, 128, GpuWithSms(), table) > (
        prefill_attention_time_s(4, 4096, 32, 8, 128, Gpu(), table)
    )


def test_tiled_table_needs_sm_count() -> None:
    data = load_kernel_table("h100-sxm").model_dump()
    data["sm_count"] = None
    with pytest.raises(ValidationError, match="sm_count"):
        KernelTable.model_validate(data)
    untiled = load_kernel_table("h100-sxm").model_dump()
    for group in ("prefill_attention", "decode_attention"):
        for entry in untiled[group].values():
            entry["tiling"] = None
    untiled["sm_count"] = None
    table = KernelTable.model_validate(untiled)  # untiled (schema-1 style) tables need none
    assert float(prefill_attention_time_s(1, 128, 8, 1, 128, Gpu(), table)) > 0
    with pytest.raises(SpecError, match="sm_count"):
        sm_count(Gpu(), table)


def test_packaged_head_dim_factors_keep_time_non_decreasing_in_head_dim() -> None:
    # time ∝ d / f(d): f may rise at most in proportion to d between knots (log-slope <= 1)
    import itertools
    import math

    from pdplan.io.kernel_tables import packaged_table_ids

    for gid in packaged_table_ids():
        t = load_kernel_table(gid)
        for entries in (t.prefill_attention, t.decode_attention):
            for p in entries.values():
                knots = sorted(p.head_dim_efficiency)
                for a, b in itertools.pairwise(knots):
                    fa, fb = p.head_dim_efficiency[a], p.head_dim_efficiency[b]
                    assert math.log(fb / fa) <= math.log(b / a) + 1e-3, (gid, a, b, fa, fb)
