"""TensorRT-LLM's CUTLASS MoE entry (pdplan.perf.moe_cutlass): the rule that selects it, its hook in the roofline, its
files, and the shipped entry against its measured rows (hand-worked)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io import perf_data as perf_data_files
from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import cutlass_params, moe_kernel_entries, perf_data
from pdplan.perf import moe_cutlass
from pdplan.perf.moe import moe_shape, moe_time_s
from pdplan.perf.moe_wideep import moe_kernel_for
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.serving.engine_bind import with_engine
from pdplan.serving.role_hardware import RoleHardware
from pdplan.specs.kernel_table import KernelTable
from pdplan.specs.moe_wideep import MoeRuntime
from pdplan.specs.perf_data import PerfData
from pdplan.specs.routing_law import RoutingLaw

CAT = open_catalog()
FP8_BLOCK_BYTES = 1.0 + 4.0 / (128.0 * 128.0)  # one fp32 scale per 128x128 block


def _data(table: KernelTable) -> PerfData:
    """The GPU's shipped MoE entries, as serving passes them to the rule."""
    return PerfData(moe_kernels=moe_kernel_entries(table.gpu))


def test_rule_trtllm_ep_fp8_runs_cutlass() -> None:
    trt = CAT.engine("trtllm").moe
    h100, h200, b200 = CAT.kernel_table("h100-sxm"), CAT.kernel_table("h200-sxm"), CAT.kernel_table("b200")
    assert trt is not None
    assert trt.ep_kernel == "cutlass"
    assert moe_kernel_for(trt, 4, 1.0, h100, _data(h100)) == "cutlass"
    assert moe_kernel_for(trt, 8, 1.0, h200, _data(h200)) == "cutlass"
    assert moe_kernel_for(trt, 1, 1.0, h100, _data(h100)) == "fused"  # no CUTLASS rows at EP 1: the fused entry
    assert moe_kernel_for(trt, 4, 2.0, h100, _data(h100)) == "fused"  # BF16 experts: the entry is FP8 block-scaled
    assert moe_kernel_for(trt, 4, 1.0, b200, _data(b200)) == "fused"  # no entry (SM100 runs DeepGEMM)
    assert moe_kernel_for(CAT.engine("vllm").moe, 4, 1.0, h100, _data(h100)) == "fused"  # vLLM's Triton default
    assert moe_kernel_for(CAT.engine("sglang").moe, 4, 1.0, h100, _data(h100)) == "deepgemm_wideep"  # unchanged
    assert "CUTLASS" in trt.source


def test_entry_files_name_their_kernel() -> None:
    for gpu in ("h100-sxm", "h200-sxm"):
        assert cutlass_params(gpu) is not None
        text = (perf_data_files.CUTLASS_DIR / f"{gpu}.yaml").read_text(encoding="utf-8")
        assert moe_cutlass.CUTLASS_KERNEL in text
    assert cutlass_params("l40s") is None  # no file: the caller keeps the fused entry


def test_bad_entry_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "toy.yaml").write_text("gpu: toy\nmoe_cutlass: {peak_fraction: 2.0}\n", encoding="utf-8")
    monkeypatch.setattr(perf_data_files, "CUTLASS_DIR", tmp_path)
    cutlass_params.cache_clear()
    try:
        with pytest.raises(SpecError, match="moe_cutlass"):
            cutlass_params("toy")
    finally:
        cutlass_params.cache_clear()


def test_memory_bound_layer_by_hand() -> None:
    # Qwen3-235B-A22B at EP 8, 64 tokens, balanced routing: GPU 0 holds experts 0-15, every one hit (64·8 = 512
    # pairs over 128 experts, 4 each). The layer is the weight read: 16 experts × 3 × 4096 × 1536 × 1.000244 B
    # = 302.06 MB at 3.35 TB/s × memory_fraction, plus the fixed cost; the smooth max only adds to the largest term.
    p, gpu, table = cutlass_params("h100-sxm"), CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    assert p is not None
    s = moe_shape(64, 4096, 1536, 128, 8, ep=8, weight_bytes=FP8_BLOCK_BYTES, law=RoutingLaw("balanced"))
    weights_b = 16 * 3 * 4096 * 1536 * FP8_BLOCK_BYTES
    assert weights_b == pytest.approx(302.06e6, rel=1e-4)
    floor_s = p.overhead_s + weights_b / (3.35e12 * p.memory_fraction)
    t = float(moe_time_s(s, "fp8", gpu, table, p, warm_l2=True))
    assert floor_s <= t <= 1.05 * floor_s
    # moe_vllm.csv (H100, fp8_block, vllm_fp8moe_flashinfer_cutlass_flashinferexperts, 4096/1536/top-8/128, EP 8,
    # 64 tokens, balanced): 133.2 µs measured; the Triton fused entry prices 162 µs, this one within 12 %
    assert t == pytest.approx(133.2e-6, rel=0.12)
    assert t < float(moe_time_s(s, "fp8", gpu, table, warm_l2=True))


def _decode_moe_s(kernel: str, model: str = "qwen3-235b-a22b", weight_bytes: float = 1.0) -> float:
    prec = Precision(weight_bytes=weight_bytes, kv_bytes=1.0)
    spec, gpu, table = CAT.model(model), CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    pt = phase_time(
        spec, gpu, table, phase="decode", batch=16, tokens=1024, tp=8, precision=prec, ep=8,
        moe_kernel=kernel, data=perf_data(spec, gpu, table, tp=8, ep=8),  # type: ignore[arg-type]
    )  # fmt: skip
    return float(next(op for op in pt.ops if op.name == "moe.experts").time_s)


def test_roofline_hook_prices_with_the_entry() -> None:
    # 94 MoE layers of the uniform-routed TP8 EP8 batch-16 step, each the entry's layer time
    expert_bytes = CAT.model("qwen3-235b-a22b").expert_bytes(1.0)  # FP8 plus the checkpoint's block scales
    s = moe_shape(16, 4096, 1536, 128, 8, ep=8, moe_tp=1, weight_bytes=expert_bytes, dispatched=1.0)
    layer_s = float(moe_time_s(s, "fp8", CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm"), cutlass_params("h100-sxm")))
    assert _decode_moe_s("cutlass") == pytest.approx(94 * layer_s)
    assert _decode_moe_s("cutlass") < _decode_moe_s("fused")  # CUTLASS rows at EP 8 lie below the Triton entry


def test_four_bit_experts_keep_the_w4a16_path() -> None:
    # gpt-oss's MXFP4 experts under a CUTLASS-kernel engine: the W4A16 entry still prices them
    assert _decode_moe_s("cutlass", "gpt-oss-120b") == pytest.approx(_decode_moe_s("fused", "gpt-oss-120b"))


def test_with_engine_binds_cutlass_for_trtllm() -> None:
    prec = Precision(weight_bytes=1.0, act_bytes=2.0, kv_bytes=1.0)
    model, gpu, table = CAT.model("qwen3-235b-a22b"), CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
    hw = RoleHardware(model, gpu, table, 4, 1, prec, ep=4)
    assert with_engine(hw, CAT.engine("trtllm")).moe_kernel == "cutlass"
    assert with_engine(hw, CAT.engine("vllm")).moe_kernel == "fused"
    fused = CAT.engine("trtllm").model_copy(update={"moe": MoeRuntime(ep_kernel="fused", source="x")})
    assert with_engine(hw, fused).moe_kernel == "fused"
    assert np.isfinite(_decode_moe_s("cutlass"))
