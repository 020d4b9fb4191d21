"""The grouped-GEMM MoE op: routing expectations and the kernel cost, hand-worked."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import routing_law
from pdplan.perf.moe import moe_flops_bytes, moe_params_from_gemm, moe_shape, moe_time_s
from pdplan.perf.moe_routing import route
from pdplan.perf.op_types import MoeOp, PassShape
from pdplan.perf.ops import forward_ops
from pdplan.specs.kernel_table import MoeParams
from pdplan.specs.routing_law import RoutingLaw

CAT = open_catalog()


def test_uniform_routing_hits_the_expected_distinct_experts() -> None:
    # E = 128, k = 8, T = 64: 128·(1 − (15/16)^64) = 124.68; pairs = 512
    r = route(64.0, 128, 8)
    assert float(r.hit) == pytest.approx(128 * (1 - (15 / 16) ** 64))
    assert float(r.pairs) == 512.0


def test_ep_divides_pairs_and_experts() -> None:
    one, eight = route(1024.0, 256, 8, 1), route(1024.0, 256, 8, 8)
    assert float(eight.pairs) == pytest.approx(float(one.pairs) / 8)
    assert float(eight.hit) == pytest.approx(float(one.hit) / 8)


def test_balanced_routing() -> None:
    # balanced_logits: T·k distinct experts until all E are hit
    assert float(route(4.0, 128, 8, law=RoutingLaw("balanced")).hit) == 32.0
    assert float(route(64.0, 128, 8, 4, law=RoutingLaw("balanced")).hit) == 32.0


def test_power_law_loads_the_hot_rank_more_and_touches_fewer_experts() -> None:
    law = RoutingLaw("power_law", 1.2)
    t = np.array([16.0, 4096.0])
    skew, flat = route(t, 128, 8, 8, law), route(t, 128, 8, 8)
    assert np.all(skew.pairs >= flat.pairs)  # the busiest of 8 ranks carries at least the mean
    assert float(skew.hit[0]) < float(flat.hit[0])  # a skewed router touches fewer experts at small T
    assert np.all(skew.pairs <= t * 8)


def test_moe_time_is_the_grouped_gemm_formula() -> None:
    gpu = CAT.gpu("h200-sxm")
    table = CAT.kernel_table("h200-sxm")
    p = MoeParams(peak_fraction=0.5, m0_tokens=0.0, memory_fraction=0.8, overhead_s=1e-5, smooth_q=1.0, m_tile=16)
    s = moe_shape(16.0, 4096, 1536, 128, 8, law=RoutingLaw("balanced"))
    # 128 experts hit, 128 pairs: one row per expert padded to a 16-row tile; gate/up (3072 x 4096) and down
    # (4096 x 1536) GEMMs, each compute + memory at q = 1; activation/un-permute traffic of the 128 local pairs
    bw = gpu.memory_bytes_per_s
    w = 128 * 3 * 4096 * 1536 * 2.0
    gathered = 128 * ((4096 + 3072) + (1536 + 4096)) * 2.0
    compute = 6 * 4096 * 1536 * (128 * 16) / (gpu.bf16_flops_per_s * 0.5)
    memory = (w + gathered) / (bw * 0.8)
    pairs = 128 * 2.0 * (5 * 1536 + 2 * 4096) / bw
    assert float(moe_time_s(s, "bf16", gpu, table, p)) == pytest.approx(1e-5 + compute + memory + pairs)
    flops, bytes_ = moe_flops_bytes(s)
    assert float(flops) == pytest.approx(6 * 4096 * 1536 * 128)
    assert float(bytes_) == pytest.approx(w + 128 * (2 * 4096 + 6 * 1536) * 2.0)


def test_tiles_pad_rows_columns_and_depth() -> None:
    gpu, table = CAT.gpu("h200-sxm"), CAT.kernel_table("h200-sxm")
    base = {"peak_fraction": 0.5, "m0_tokens": 0.0, "memory_fraction": 1.0, "overhead_s": 0.0, "smooth_q": 1.0}
    # 40 pairs on 8 experts: 5 rows each, M tile 2^ceil(log2 5) = 8 raised to the 16-row minimum (either way);
    # the tiles add only padding FLOPs: gate/up N = 200 -> 256, down K = 100 -> 128 (N tile 64, K tile 32)
    s = moe_shape(5.0, 256, 100, 8, 8, law=RoutingLaw("balanced"))
    plain = MoeParams(**base, m_tile=64)
    tiled = MoeParams(**base, m_tile=64, n_tile=64, n_tile_small=64, k_tile=32)
    dt = float(moe_time_s(s, "bf16", gpu, table, tiled) - moe_time_s(s, "bf16", gpu, table, plain))
    rate = gpu.bf16_flops_per_s * 0.5
    extra = 2.0 * 8 * 16 * ((256 - 200) * 256 + 256 * (128 - 100)) / rate  # 8 experts x 16 rows
    assert dt == pytest.approx(extra)


def test_misaligned_shard_pays_the_penalty_on_all_but_the_launch() -> None:
    gpu, table = CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    p = table.moe["bf16"].model_copy(update={"unaligned_penalty": 1.5})
    aligned = moe_time_s(moe_shape(64.0, 2048, 96 * 8, 128, 8, moe_tp=8), "bf16", gpu, table, p)
    misaligned = moe_time_s(moe_shape(64.0, 2048, 88 * 8, 128, 8, moe_tp=8), "bf16", gpu, table, p)
    clean = moe_time_s(
        moe_shape(64.0, 2048, 88 * 8, 128, 8, moe_tp=8),
        "bf16",
        gpu,
        table,
        p.model_copy(update={"unaligned_penalty": 0.0}),
    )
    assert float(misaligned - p.overhead_s) == pytest.approx(2.5 * float(clean - p.overhead_s))
    assert float(misaligned) > float(aligned)


def test_warm_l2_only_speeds_benchmark_repeats() -> None:
    gpu, table = CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    s = moe_shape(1.0, 2048, 768, 128, 8, moe_tp=8)  # 8 experts' shards: 9.4 MB, within the fitted L2 share
    cold = moe_time_s(s, "bf16", gpu, table)
    warm = moe_time_s(s, "bf16", gpu, table, warm_l2=True)
    assert float(warm) < float(cold)


def test_non_gated_experts_have_two_matrices() -> None:
    assert moe_shape(8.0, 2688, 1856, 128, 6, gated=False).matrices == 2.0
    assert moe_shape(8.0, 2688, 1856, 128, 6).matrices == 3.0


def test_busiest_gpu_holds_at_least_one_hit_expert() -> None:
    # balanced_logits, 1 token, k = 1: expert 0 on rank 0 of 64 (the measured GPU), hit = 1 not 1/64
    one = route(1.0, 128, 1, 64, RoutingLaw("balanced"))
    assert (float(one.hit), float(one.pairs)) == (1.0, 1.0)
    # power law at 4 tokens, k = 1: every load rounds to 0; the 4 picks go back one each to distinct experts
    assert float(route(4.0, 128, 1, 1, RoutingLaw("power_law", 1.01)).hit) == pytest.approx(4.0)
    assert float(route(0.0, 128, 8, 8).hit) == 0.0


def test_table_without_moe_entry_uses_its_gemm_efficiencies() -> None:
    table = CAT.kernel_table("a100-sxm-80gb")
    p = moe_params_from_gemm(table, "bf16")
    assert p.peak_fraction == table.gemm["bf16"].peak_fraction
    assert p.memory_fraction == table.gemm["bf16"].memory_fraction


def test_forward_ops_default_is_plain_tp() -> None:
    model = CAT.model("qwen3-235b-a22b")
    shape = PassShape("decode", np.array(64.0), np.array(2048.0), np.array(8.0))
    (op,) = [o for o in forward_ops(model, shape) if o.kind == "moe"]
    assert isinstance(op, MoeOp)
    assert float(op.layer.ep) == 1.0
    assert float(op.layer.inter_per_gpu) == 1536 / 8
    assert op.count == 94


def test_ep_lowers_moe_weight_bytes_per_gpu() -> None:
    model = CAT.model("deepseek-r1")
    tp8 = PassShape("decode", np.array(32.0), np.array(2048.0), np.array(8.0), weight_bytes=1.0)
    ep8 = PassShape("decode", np.array(32.0), np.array(2048.0), np.array(8.0), weight_bytes=1.0, ep=8.0, moe_tp=1.0)
    w = [next(o for o in forward_ops(model, s) if isinstance(o, MoeOp)).weight_bytes for s in (tp8, ep8)]
    # same GPUs: EP8 holds 32 whole experts per GPU, TP8 1/8 of all 256: equal bytes for a batch that hits all
    assert float(w[1]) <= float(w[0]) * (1 + 1e-9)


def test_named_routing_laws() -> None:
    assert routing_law("power-law-1.2") == RoutingLaw("power_law", 1.2)
    assert routing_law("eplb").kind == "eplb"
    # AIConfigurator's SGLang EPLB prefill rule: power law 0.6 evaluated at 0.8 of the tokens
    sglang = routing_law("sglang-eplb-prefill")
    assert sglang == RoutingLaw("power_law", 0.6, 0.8)
    got, ref = route(524288.0, 256, 8, 32, sglang), route(0.8 * 524288.0, 256, 8, 32, RoutingLaw("power_law", 0.6))
    assert float(got.pairs) == pytest.approx(float(ref.pairs))
    assert float(got.hit) == pytest.approx(float(ref.hit))
    with pytest.raises(Exception, match="unknown MoE routing law"):
        routing_law("zipf")


def test_dispatch_delivers_only_the_gpus_own_pairs() -> None:
    # EP 8 without a dispatch: every GPU holds all 1024·8 pairs (vLLM's Triton path, as measured); with the
    # all-to-all dispatch only its own 1024 (uniform routing: T·k/ep): the pair traffic falls by the difference
    gpu, table = CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    p = table.moe["bf16"]
    kw = {"ep": 8, "moe_tp": 1}
    held = moe_time_s(moe_shape(1024.0, 4096, 1536, 128, 8, **kw), "bf16", gpu, table, p)
    sent = moe_time_s(moe_shape(1024.0, 4096, 1536, 128, 8, dispatched=1.0, **kw), "bf16", gpu, table, p)
    per_pair = 2.0 * (5 * 1536 + 2 * 4096) / (gpu.memory_bytes_per_s * p.pair_memory_fraction) + p.per_token_s
    assert p.all_pairs
    assert float(held - sent) == pytest.approx((1024 * 8 - 1024) * per_pair)
