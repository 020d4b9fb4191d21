"""MoE rows whose kernel re-routed the benchmark's logits (pdplan.calibrate.fit_moe.REROUTED_IN_KERNEL)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from pdplan.calibrate.fit import error_stats
from pdplan.calibrate.fit_moe import MOE_KERNELS, predict_moe_s, read_moe, rerouted
from pdplan.io.files import load_spec_file
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.specs.hardware import GpuSpec

REPO = Path(__file__).resolve().parents[2]
B200_MOE = REPO.parent / "shared" / "calibration" / "aiconfigurator-moe" / "b200_sxm" / "moe_vllm.csv"
MONO = "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic"
FIELDS = ("kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts")


def _row(kernel: str, experts: int, ep: int) -> dict[str, str]:
    values = (kernel, "fp8_block", "16384", "7168", "2048", "8", str(experts))
    tail = {"moe_tp_size": "1", "moe_ep_size": str(ep), "distribution": "balanced", "latency": "1.0"}
    return dict(zip(FIELDS, values, strict=True)) | tail


def test_only_group_routed_rows_at_ep_above_one_on_in_kernel_routing() -> None:
    # DeepSeek-V3's MoE (7168 x 2048, top-8 of 256) on the monolithic kernel at EP 8: re-routed; at EP 1 (all
    # experts on the GPU, all T·k pairs whatever the routing), Kimi K2's 384 experts, or a kernel routed outside: kept
    assert rerouted(_row(MONO, 256, 8))
    assert not rerouted(_row(MONO, 256, 1))
    assert not rerouted(_row(MONO, 384, 8))
    assert not rerouted(_row("vllm_fp8moe_triton_tritonexperts", 256, 8))


def test_reader_drops_them_unless_asked(tmp_path: Path) -> None:
    rows = [_row(MONO, 256, 8), _row(MONO, 256, 1), _row(MONO, 384, 8)]
    path = tmp_path / "moe_vllm.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert read_moe(path, "fp8_block").measured_s.size == 2
    assert read_moe(path, "fp8_block", keep_rerouted=True).measured_s.size == 3


@pytest.mark.skipif(not B200_MOE.is_file(), reason="needs ../shared/calibration/aiconfigurator-moe")
def test_b200_fp8_cell_meets_the_target() -> None:
    """docs/kernel_accuracy.md: median <= 10 %, P90 <= 25 % over the rows that measure their label (8.7 / 23.6 %)."""
    gpu = load_spec_file(GpuSpec, REPO / "hardware_db" / "gpus" / "b200.yaml")
    table = load_kernel_table("b200")
    rows = read_moe(B200_MOE, "fp8_block", MOE_KERNELS["b200_sxm"]["fp8"][1])
    stats = error_stats(predict_moe_s(rows, table.moe["fp8"], "fp8", gpu, table), rows.measured_s)
    assert stats.median_abs_pct <= 10.0
    assert stats.p90_abs_pct <= 25.0
    assert np.all(rows.measured_s > 0.0)
