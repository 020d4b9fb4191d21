"""MXFP4 experts on Hopper: the W4A16 fused-MoE entry, its hook in the roofline, and its fit (hand-worked)."""

from __future__ import annotations

import numpy as np
import pytest
from fitting.fit_moe import MoeRows
from fitting.fit_moe_w4a16 import MXFP4_WEIGHT_BYTES, predict_w4a16_s

from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import perf_data, w4a16_params
from pdplan.perf.moe import moe_shape, moe_time_s
from pdplan.perf.moe_w4a16 import uses_w4a16
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.specs.kernel_table import MoeParams
from pdplan.specs.routing_law import RoutingLaw

CAT = open_catalog()


def test_mxfp4_weight_bytes_are_four_bits_plus_a_scale_per_32() -> None:
    assert MXFP4_WEIGHT_BYTES == (32 * 4 + 8) / (32 * 8)


def test_only_sub_byte_experts_take_the_w4a16_path() -> None:
    assert uses_w4a16(0.53125)
    assert not uses_w4a16(1.0)  # FP8 experts
    assert not uses_w4a16(2.0)


def test_fp8_plan_of_an_mxfp4_model_is_priced_as_its_bf16_one() -> None:
    # the same 4-bit weights are read; FP8 activations (W4A8) have no table and could only compute faster
    model, gpu, table = CAT.model("gpt-oss-120b"), CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    for batch in (1, 64):
        t = {}
        for dtype, wb in (("bf16", 2.0), ("fp8", 1.0)):
            prec = Precision(weight_bytes=wb, act_bytes=wb, kv_bytes=2.0)
            data = perf_data(model, gpu, table, tp=2)
            pt = phase_time(
                model, gpu, table, phase="decode", batch=batch, tokens=2048, tp=2, precision=prec, data=data
            )
            t[dtype] = float(next(op for op in pt.ops if op.name == "moe.experts").time_s)
        assert t["fp8"] == pytest.approx(t["bf16"])


def test_shipped_entries_exist_for_hopper_only() -> None:
    for gpu in ("h100-sxm", "h200-sxm"):
        p = w4a16_params(gpu)
        assert p is not None
        assert 0.0 < p.memory_fraction <= 1.0
    assert w4a16_params("b200") is None  # native FP4 tensor cores: another kernel
    assert w4a16_params("a100-sxm-80gb") is None


def test_w4a16_time_is_the_grouped_gemm_formula_with_mxfp4_weights() -> None:
    """The fused-MoE formula (:class:`pdplan.specs.kernel_table.MoeParams`) with q = 1 (terms add), untiled N/K,
    no CTA limit and all-pairs off: gpt-oss-120b layer, one token, TP2, 4 experts hit, 4 pairs each padded to one
    16-row tile. Gate/up (N = 2·1440, K = 2880) and down (N = 2880, K = 1440) GEMMs: compute 2·64·N·K each, memory
    the MXFP4 weights plus the 4 pairs' input and output rows in bf16, P·(K + N)·2; around them the pairs' rows,
    P·2·((2g − 1)·I + 2h) bytes at the full HBM rate (pair_memory_fraction 1)."""
    gpu, table = CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    p = MoeParams(peak_fraction=0.5, m0_tokens=0.0, memory_fraction=0.8, overhead_s=4e-5, smooth_q=1.0, m_tile=16)
    s = moe_shape(1.0, 2880, 2880, 128, 4, moe_tp=2, weight_bytes=MXFP4_WEIGHT_BYTES, law=RoutingLaw("balanced"))
    w = 4 * 3 * 2880 * 1440 * 0.53125  # 26.44 MB of expert weights
    gemm_io = 4 * ((2880 + 2880) + (1440 + 2880)) * 2.0  # 80,640 B
    pairs = 4 * 2.0 * (5 * 1440 + 2 * 2880)  # 103,680 B
    compute = 2 * 64 * (2880 * 2880 + 2880 * 1440) / (gpu.bf16_flops_per_s * 0.5)
    memory = (w + gemm_io) / (gpu.memory_bytes_per_s * 0.8)
    want = 4e-5 + compute + memory + pairs / gpu.memory_bytes_per_s
    assert float(moe_time_s(s, "bf16", gpu, table, p)) == pytest.approx(want)
    assert w == pytest.approx(26_438_400.0)


def test_roofline_prices_gpt_oss_experts_with_the_w4a16_entry() -> None:
    model, gpu, table = CAT.model("gpt-oss-120b"), CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    pt = phase_time(
        model, gpu, table, phase="decode", batch=64, tokens=2048, tp=2, data=perf_data(model, gpu, table, tp=2)
    )
    experts = next(op for op in pt.ops if op.name == "moe.experts")
    s = moe_shape(64.0, 2880, 2880, 128, 4, moe_tp=2, weight_bytes=0.53125)
    want = moe_time_s(s, "bf16", gpu, table, w4a16_params("h100-sxm")) * model.num_layers
    assert float(experts.time_s) == pytest.approx(float(want))
    # aiconfigurator-moe/h100_sxm/moe_vllm.csv, w4a16_mxfp4, 64 tokens, TP2, EP1, balanced: 0.392 ms per layer
    assert float(experts.time_s) / model.num_layers == pytest.approx(0.392e-3, rel=0.25)
    # physics: never below the read of the hit experts' MXFP4 weights at full HBM bandwidth
    assert float(experts.time_s) >= float(experts.bytes) / gpu.memory_bytes_per_s


def test_w4a16_never_slower_than_the_same_experts_in_bf16() -> None:
    model, gpu, table = CAT.model("gpt-oss-120b"), CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    p = w4a16_params("h100-sxm")
    assert p is not None
    for tokens in (1.0, 16.0, 64.0, 256.0):
        four = moe_shape(tokens, 2880, 2880, 128, 4, moe_tp=2, weight_bytes=0.53125)
        two = moe_shape(tokens, 2880, 2880, 128, 4, moe_tp=2, weight_bytes=2.0)
        assert float(moe_time_s(four, "bf16", gpu, table, p)) <= float(moe_time_s(two, "bf16", gpu, table))
    assert model.num_layers == 36


def test_fit_prediction_groups_rows_by_shape_and_law() -> None:
    gpu, table = CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    p = MoeParams(peak_fraction=0.5, m0_tokens=0.0, memory_fraction=0.8, overhead_s=4e-5, smooth_q=1.0, m_tile=16)
    cols = {
        "num_tokens": np.array([1.0, 1.0]),
        "hidden_size": np.array([2880.0, 2880.0]),
        "inter_size": np.array([2880.0, 2880.0]),
        "topk": np.array([4.0, 4.0]),
        "num_experts": np.array([128.0, 128.0]),
        "moe_tp_size": np.array([2.0, 2.0]),
        "moe_ep_size": np.array([1.0, 1.0]),
        "latency": np.array([0.05, 0.05]),
    }
    rows = MoeRows(cols, (RoutingLaw("balanced"), RoutingLaw("power_law", 1.2)), cols["latency"] * 1e-3)
    got = predict_w4a16_s(rows, p, gpu, table)
    s = moe_shape(1.0, 2880, 2880, 128, 4, moe_tp=2, weight_bytes=0.53125, law=RoutingLaw("balanced"))
    assert got[0] == pytest.approx(float(moe_time_s(s, "bf16", gpu, table, p)))
    assert got.shape == (2,)
