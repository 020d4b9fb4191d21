"""Fitted kernel-table numbers against named public anchors, and a measured-data accuracy gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.perf import fit
from pdplan.perf.kernels import (
    allreduce_time_s,
    gemm_time_s,
    load_kernel_table,
    prefill_attention_time_s,
)
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.loading import load_spec_file

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "calibration" / "aiconfigurator-kernels" / "h100_sxm"
GPU_H100 = load_spec_file(GpuSpec, REPO / "hardware_db" / "gpus" / "h100-sxm.yaml")


def test_prefill_attention_efficiency_in_flashattention_band() -> None:
    # FlashAttention-3 paper: up to ~740 TFLOPS ≈ 75% of H100 dense BF16 (HARDWARE_FACTS §3);
    # FA2 on H100 ~35%. A vLLM FA3 fit should lie in a plausible 0.35–0.85 band.
    assert 0.35 <= load_kernel_table("h100-sxm").prefill_attention["bf16"].compute_fraction <= 0.85


def test_large_bf16_gemm_fraction_matches_readme_sanity_figure() -> None:
    # calibration README: largest bf16 GEMMs reach 0.95 of dense peak on H100; fit must be below.
    assert 0.6 <= load_kernel_table("h100-sxm").gemm["bf16"].peak_fraction <= 0.96


def test_allreduce_large_message_busbw_vs_nccl_tests_8xh100() -> None:
    # nccl-tests all_reduce busbw on 8×H100 SXM: 460–480 GB/s (alayanew guide, HARDWARE_FACTS §3).
    # Model busbw at 1 GiB = 2(n−1)/n · size / time; the α-β fit over all sizes sits a bit low.
    size = float(2**30)
    t = float(allreduce_time_s(size, 8, GPU_H100, load_kernel_table("h100-sxm")))
    busbw = 1.75 * size / t
    assert 0.7 * 460e9 <= busbw <= 480e9


needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/calibration not present")


def _h100_errors() -> tuple[fit.ErrorStats, fit.ErrorStats]:
    gpu = GPU_H100
    table = load_kernel_table("h100-sxm")
    g = fit.read_gemm(DATA, "bf16")
    idx = fit.subsample_index(g["m"].size, 5000)
    gemm = fit.error_stats(gemm_time_s(g["m"][idx], g["n"][idx], g["k"][idx], "bf16", gpu, table,
                                       warm_l2=True), g["latency_ms"][idx] * 1e-3)
    a = fit.read_attention(DATA, "context", "bf16")
    j = fit.subsample_index(a["isl"].size, 5000)
    pred = prefill_attention_time_s(a["batch_size"][j], a["isl"][j], a["num_heads"][j],
                                    a["num_key_value_heads"][j], a["head_dim"][j], gpu, table)
    return gemm, fit.error_stats(pred, a["latency_ms"][j] * 1e-3)


@needs_data
def test_h100_accuracy_regression_gate() -> None:
    # Achieved today (docs/kernel_accuracy.md): GEMM 5.0/14.8, prefill 8.0/27.3 (median/P90 %).
    gemm, attn = _h100_errors()
    assert gemm.median_abs_pct <= 7.0
    assert gemm.p90_abs_pct <= 18.0
    assert attn.median_abs_pct <= 10.0
    assert attn.p90_abs_pct <= 31.0
    assert np.isfinite([gemm.median_abs_pct, attn.median_abs_pct]).all()


@needs_data
@pytest.mark.xfail(strict=True, reason="issue target (median <= 10%, P90 <= 25%) not yet met "
                   "for H100 prefill attention P90 (GEMM bf16 now meets it)")
def test_h100_accuracy_issue_target() -> None:
    gemm, attn = _h100_errors()
    assert max(gemm.median_abs_pct, attn.median_abs_pct) <= 10.0
    assert max(gemm.p90_abs_pct, attn.p90_abs_pct) <= 25.0
