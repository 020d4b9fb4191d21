"""Data sanity of every packaged kernel table (issue 23 item 7): each fitted kernel prices between a physical floor
(the GPU's datasheet FLOPs and HBM bandwidth, its scale-up link) and a sanity ceiling, at shapes where the floor is
well defined.

Floors (no kernel beats its datasheet): a GEMM, attention pass or MoE layer takes at least max(FLOPs / peak,
bytes / HBM); an all-reduce moves 2(n−1)/n of its message over each GPU's link, so its bus bandwidth is at most the
link's per-direction rate (×1.1: NVLink SHARP reductions read slightly above it, 475 GB/s on 8×H200 against 450,
NVIDIA/nccl-tests issue #272).

Ceilings (what a healthy fit does not exceed; docs/hardware_facts.md "Kernel-table sanity bounds" gives the
measured spread they sit above): the largest square GEMM within 2.5× its compute floor (AIC's tables reach 0.79–0.96
of dense peak in bf16), an m = 1 GEMM within 2.5× its weight-streaming floor (68–80 % of HBM measured), a decode
attention step within 2.5× its KV-read floor, a causal 8K prefill within 3× its FLOP floor, an MoE decode layer
(T ≤ 64 tokens) within 3× its roofline and a 4K-token prefill layer within 12× (fine-grained experts split eight ways
run thin tiles), and an all-reduce at 256 MiB reaching 10 % of its link.

PCIe parts at 4 and 8 GPUs are held to the published band instead: their bus bandwidth at 256 MiB sits between the
lowest and the highest large-message share of the link that published nccl-tests servers reach at that GPU count
(tools/fitting/pcie_allreduce.py: 0.44-0.56 of the link at 8 GPUs, 0.56-0.82 at 4). AIConfigurator's L40S box
(1.45 GB/s at 8 GPUs, 0.046 of PCIe Gen4 x16) sits far below it; the packaged tables price those counts by that rule
(issue 23 item 7, docs/hardware_facts.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from fitting.pcie_allreduce import RULE_COUNTS, published_band, published_pcie_allreduce

from pdplan.io.catalog import open_catalog
from pdplan.perf.kernels import allreduce_time_s, decode_attention_time_s, gemm_time_s, prefill_attention_time_s
from pdplan.perf.moe import moe_shape, moe_time_s
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.kernel_table import AlphaBeta, KernelTable

CATALOG = open_catalog()
TABLES = [name for name in CATALOG.names("kernel table") if name in CATALOG.names("gpu")]
NVLS_SLACK = 1.1
ALLREDUCE_MIN_SHARE = 0.10
ALPHA_SLACK = 0.99
"""The published band is of large-message bus bandwidth; at 256 MiB the α term costs a PCIe table under 0.1 %."""


def _peak(gpu: GpuSpec, flavour: str) -> float:
    fp8 = gpu.fp8_flops_per_s if flavour == "fp8" else None
    return fp8 or gpu.bf16_flops_per_s


def _gemm(gpu: GpuSpec, table: KernelTable) -> list[str]:
    bad = []
    for flavour in table.gemm:
        w_bytes = 2.0 if flavour == "bf16" else 1.0
        big_s = float(gemm_time_s(8192, 8192, 8192, flavour, gpu, table))
        big_floor = 2.0 * 8192**3 / _peak(gpu, flavour)
        thin_s = float(gemm_time_s(1, 8192, 8192, flavour, gpu, table))
        thin_floor = 8192 * 8192 * w_bytes / gpu.memory_bytes_per_s
        for what, t, floor, ceiling in (("8K GEMM", big_s, big_floor, 2.5), ("m=1 GEMM", thin_s, thin_floor, 2.5)):
            if not floor <= t <= ceiling * floor:
                bad.append(f"{flavour} {what}: {t / floor:.2f}x its floor (allowed 1-{ceiling})")
    return bad


def _attention(gpu: GpuSpec, table: KernelTable) -> list[str]:
    decode_s = float(decode_attention_time_s(64, 4096, 32, 8, 128, 2.0, gpu, table))
    decode_floor = 64 * 4096 * 2 * 8 * 128 * 2.0 / gpu.memory_bytes_per_s  # K and V of every sequence, once
    prefill_s = float(prefill_attention_time_s(1, 8192, 32, 8, 128, gpu, table))
    prefill_floor = 2 * 2 * 8192 * 8192 * 32 * 128 / 2 / gpu.bf16_flops_per_s  # QK^T and PV, causal half
    bad = []
    for what, t, floor, ceiling in (
        ("decode attention", decode_s, decode_floor, 2.5),
        ("prefill", prefill_s, prefill_floor, 3.0),
    ):
        if not floor <= t <= ceiling * floor:
            bad.append(f"{what}: {t / floor:.2f}x its floor (allowed 1-{ceiling})")
    return bad


def _moe(gpu: GpuSpec, table: KernelTable) -> list[str]:
    """Qwen3-235B-A22B's expert shape (h 4096, I 1536, 128 experts, top-8) at TP8 and on one GPU."""
    h, inter, experts, k = 4096, 1536, 128, 8
    bad = []
    for flavour in table.gemm:
        w_bytes = 2.0 if flavour == "bf16" else 1.0
        for tokens, tp, ceiling in ((1, 1, 3.0), (64, 8, 3.0), (4096, 8, 12.0)):
            shape = moe_shape(tokens, h, inter, experts, k, moe_tp=tp, weight_bytes=w_bytes)
            t = float(moe_time_s(shape, flavour, gpu, table))
            hit = experts * (1.0 - (1.0 - k / experts) ** tokens)  # distinct experts a uniform router reaches
            memory = hit * 3 * h * inter / tp * w_bytes / gpu.memory_bytes_per_s
            compute = 2.0 * tokens * k * 3 * h * inter / tp / _peak(gpu, flavour)
            floor = max(memory, compute)
            if not floor <= t <= ceiling * floor:
                bad.append(f"{flavour} MoE T={tokens} TP{tp}: {t / floor:.2f}x its roofline (allowed 1-{ceiling})")
    return bad


def _allreduce(gpu: GpuSpec, table: KernelTable) -> list[str]:
    link = gpu.scale_up_bytes_per_s
    assert link is not None, gpu.name
    size = 256 * 2**20
    bad = []
    for n in sorted({2, 4, 8, *table.allreduce.custom, *table.allreduce.nccl}):
        bus = 2 * (n - 1) / n * size / float(allreduce_time_s(size, n, gpu, table))
        low, high = (ALLREDUCE_MIN_SHARE, NVLS_SLACK)
        if gpu.scale_up_fabric == "pcie" and n in RULE_COUNTS:
            band = published_band(n)
            low, high = ALPHA_SLACK * band[0], band[1]
        if not low * link <= bus <= high * link:
            bad.append(f"all-reduce {n} GPUs: bus {bus / 1e9:.1f} GB/s = {bus / link:.2f} of the link")
    return bad


def violations(gpu: GpuSpec, table: KernelTable) -> list[str]:
    """Every kernel of ``table`` that prices outside its floor and ceiling on ``gpu`` (module docstring)."""
    return _gemm(gpu, table) + _attention(gpu, table) + _moe(gpu, table) + _allreduce(gpu, table)


@pytest.mark.parametrize("name", TABLES)
def test_every_table_sits_between_floor_and_ceiling(name: str) -> None:
    assert violations(CATALOG.gpu(name), CATALOG.kernel_table(name)) == []


def test_a_broken_table_is_caught() -> None:
    gpu, table = CATALOG.gpu("h100-sxm"), CATALOG.kernel_table("h100-sxm")
    gemm = {k: v.model_copy(update={"peak_fraction": 0.1}) for k, v in table.gemm.items()}
    slow_link = table.allreduce.model_copy(
        update={"custom": {}, "nccl": {}, "bus_bytes_per_s": 1e9}  # 1 GB/s on NVLink: a unit slip
    )
    assert any("8K GEMM" in v for v in violations(gpu, table.model_copy(update={"gemm": gemm})))
    assert any("all-reduce" in v for v in violations(gpu, table.model_copy(update={"allreduce": slow_link})))
    fast = table.allreduce.model_copy(update={"custom": {}, "nccl": {}, "bus_bytes_per_s": 5e12})
    assert any("all-reduce" in v for v in violations(gpu, table.model_copy(update={"allreduce": fast})))
    assert np.isfinite(float(gemm_time_s(1, 8192, 8192, "bf16", gpu, table)))


def test_the_aic_pcie_box_sits_outside_the_published_band() -> None:
    # AIConfigurator's L40S box as fitted (nccl.csv: 1.455 GB/s bus at 8 GPUs, 5.125 at 4) fails; the rule passes.
    gpu, table = CATALOG.gpu("l40s"), CATALOG.kernel_table("l40s")
    box = {
        4: AlphaBeta(alpha_s=1.151e-05, bus_bytes_per_s=5.125e9),
        8: AlphaBeta(alpha_s=2.17e-05, bus_bytes_per_s=1.455e9),
    }
    boxed = table.allreduce.model_copy(
        update={"custom": {**table.allreduce.custom, **box}, "nccl": {**table.allreduce.nccl, **box}}
    )
    found = violations(gpu, table.model_copy(update={"allreduce": boxed}))
    assert [v.split(":")[0] for v in found] == ["all-reduce 4 GPUs", "all-reduce 8 GPUs"]
    assert _allreduce(gpu, table) == []


def test_the_pcie_rule_replaces_only_the_4_and_8_gpu_entries() -> None:
    fitted = {
        "alpha_s": 1e-5,
        "bus_bytes_per_s": 5e9,
        "custom": {n: {"alpha_s": 1e-6 * n, "bus_bytes_per_s": 1e9 * n} for n in (2, 4, 8)},
        "nccl": {n: {"alpha_s": 2e-6 * n, "bus_bytes_per_s": 2e9 * n} for n in (2, 4, 8)},
    }
    ruled = published_pcie_allreduce(fitted, 31.5e9)
    assert (ruled["alpha_s"], ruled["bus_bytes_per_s"]) == (1e-5, 5e9)
    assert ruled["custom"][2] == fitted["custom"][2]
    assert ruled["nccl"][2] == fitted["nccl"][2]
    for n, share in ((4, 35 / 63), (8, 28 / 63)):
        want = {"alpha_s": 2e-6 * n, "bus_bytes_per_s": pytest.approx(share * 31.5e9, rel=1e-3)}
        assert ruled["custom"][n] == want
        assert ruled["nccl"][n] == want
