"""Expert parallelism and attention DP: hand-worked all-to-all, validation, memory and the DP/EP pass shapes."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.expert_parallel import expert_parallel_defaults
from pdplan.io.perf_data import perf_data
from pdplan.io.serving_defaults import serving_defaults
from pdplan.perf.expert_parallel import a2a_time_s, exposed_gather_s, moe_tp_size, parallelism_error
from pdplan.perf.memory import expert_weight_bytes, instance_memory
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time

CAT = open_catalog()


def test_a2a_hand_worked() -> None:
    """128 tokens/GPU, h 7168, top-8, EP72 over nodes (50 GB/s), low latency: 8·128·7168·3 B / 50 GB/s + 21 µs."""
    t = a2a_time_s(
        128,
        hidden=7168,
        top_k=8,
        num_experts=256,
        ep=72,
        group_gpus=72,
        gpus_per_node=8,
        scale_up_bytes_per_s=450e9,
        mode="low_latency",
        defaults=expert_parallel_defaults(),
    )
    assert float(t) == pytest.approx(8 * 128 * 7168 * 3 / 50e9 + 21e-6, rel=1e-12)


def test_a2a_inside_a_node_uses_nvlink_and_ep1_is_free() -> None:
    """EP8 on one node: 7 destinations (ep − 1 < top-8) over 450 GB/s, normal mode latency 55 µs; EP1: 0."""
    kw = {"hidden": 7168, "top_k": 8, "num_experts": 256, "gpus_per_node": 8, "scale_up_bytes_per_s": 450e9}
    kw["defaults"] = expert_parallel_defaults()
    t = a2a_time_s(1000, ep=8, group_gpus=8, mode="normal", **kw)
    assert float(t) == pytest.approx(7 * 1000 * 7168 * 3 / 450e9 + 55e-6, rel=1e-12)
    assert float(a2a_time_s(1000, ep=1, group_gpus=8, mode="normal", **kw)) == 0.0


def test_moe_tp_and_validation() -> None:
    ds, llama = CAT.model("deepseek-v3"), CAT.model("llama-3.1-8b")
    assert float(moe_tp_size(8, 4, 16)) == 2.0
    assert parallelism_error(ds, 1, 32, 32) is None
    assert "dense" in (parallelism_error(llama, 8, 1, 8) or "")
    assert "divide tp·dp" in (parallelism_error(ds, 1, 8, 16) or "")
    assert "expert slots" in (parallelism_error(ds, 1, 72, 72) or "")
    assert parallelism_error(ds, 1, 72, 72, redundant_experts=32) is None  # 288 slots, 4 per GPU


def test_weights_per_gpu_with_dp_ep() -> None:
    """DeepSeek-V3 FP8 on DP32/EP32 with 32 redundant experts: dense/1 + experts·288/256/32 bytes per GPU."""
    ds = CAT.model("deepseek-v3")
    experts = expert_weight_bytes(ds, 1.0)
    dense = ds.weight_bytes(1.0) - experts
    mem = instance_memory(
        ds,
        80 * 2**30,
        defaults=serving_defaults(),
        tp=1,
        dp=32,
        ep=32,
        redundant_experts=32,
        weight_dtype_bytes=1.0,
        kv_dtype_bytes=1.0,
    )
    assert float(mem.weight_bytes) == pytest.approx(dense + experts * 288 / 256 / 32, rel=1e-12)
    assert float(mem.gpus_per_instance) == 32.0
    # DP ranks each hold their own KV: 32 ranks × one TP1 rank's free bytes / the MLA latent (576 · 61 layers · 1 B)
    assert float(mem.kv_capacity_tokens) == pytest.approx(32 * float(mem.kv_free_bytes) / (576 * 61), rel=1e-12)


def test_dense_dp_ranks_are_independent_replicas() -> None:
    """A dense model on DP2 with batch 2B takes as long as one TP instance with batch B (no MoE layer couples them)."""
    model, gpu, table = CAT.model("llama-3.1-8b"), CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    two = phase_time(model, gpu, table, phase="decode", batch=64, tokens=1024, tp=2, dp=2, detail=False)
    one = phase_time(model, gpu, table, phase="decode", batch=32, tokens=1024, tp=2, detail=False)
    assert float(two.time_s) == pytest.approx(float(one.time_s), rel=1e-12)


def test_ep_moves_expert_work_and_adds_all_to_all() -> None:
    """DeepSeek-V3 decode, 8 GPUs: TP8 splits every expert 8 ways; TP8+EP8 runs whole experts, 1/8 of them per GPU,
    with the same expert bytes per GPU; its tokens are replicated over the TP group, so the TP all-reduce combines
    and there is no all-to-all; DP8+EP8 (each rank its own tokens) adds one per MoE layer (58 of 61 layers)."""
    ds, gpu, table = CAT.model("deepseek-v3"), CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    prec = Precision(1.0, 2.0, 1.0)
    tp = phase_time(ds, gpu, table, phase="decode", batch=64, tokens=2000, tp=8, precision=prec)
    data = perf_data(ds, gpu, table, tp=8, ep=8)
    ep = phase_time(ds, gpu, table, phase="decode", batch=64, tokens=2000, tp=8, ep=8, precision=prec, data=data)
    dp = phase_time(ds, gpu, table, phase="decode", batch=64, tokens=2000, tp=1, dp=8, ep=8, precision=prec, data=data)
    names = {op.name: op for op in dp.ops}
    assert "ep.all_to_all" in names
    assert names["ep.all_to_all"].count == 58.0
    assert "ep.all_to_all" not in {op.name for op in tp.ops}
    assert "ep.all_to_all" not in {op.name for op in ep.ops}

    def expert_bytes(pt: object) -> float:
        return sum(float(op.bytes) for op in pt.ops if op.name.startswith("moe.expert"))  # type: ignore[attr-defined]

    assert expert_bytes(ep) == pytest.approx(expert_bytes(tp), rel=0.02)  # activations differ slightly


def test_gather_hides_behind_compute_when_saturated() -> None:
    """ZeRO-Prefill: γ·t_gather ≤ t_layer hides the gather entirely; beyond, the excess shows."""
    gamma = expert_parallel_defaults().gather_overlap_jitter
    assert float(exposed_gather_s(np.array(1.0), np.array(2.0), gamma)) == 0.0
    assert float(exposed_gather_s(np.array(1.0), np.array(0.5), gamma)) == pytest.approx(1.1 - 0.5)
