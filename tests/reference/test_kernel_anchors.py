"""Fitted kernel-table numbers against named public anchors, and a measured-data accuracy gate.

The gate reads the vendored AIConfigurator 0.12.0 kernel tables (``tests/data/calibration/aiconfigurator-kernels``:
at most 1000 rows per cell, every k-th in file order; its README.md), so it runs in every clone; the figures of
docs/kernel_accuracy.md are on all rows, and every cell keeps its verdict on the slice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fitting import accuracy
from support.calibration import calibration_file

from pdplan.calibrate import fit
from pdplan.io.files import load_spec_file
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.perf.kernels import allreduce_time_s, gemm_time_s, prefill_attention_time_s
from pdplan.specs.hardware import GpuSpec

REPO = Path(__file__).resolve().parents[2]
MEASURED = {
    "a100-sxm-80gb": "a100_sxm",
    "h100-sxm": "h100_sxm",
    "h200-sxm": "h200_sxm",
    "l40s": "l40s",
    "b200": "b200_sxm",
}
GPU_H100 = load_spec_file(GpuSpec, REPO / "hardware_db" / "gpus" / "h100-sxm.yaml")


def test_prefill_attention_efficiency_in_flashattention_band() -> None:
    # FlashAttention-3 paper: up to ~740 TFLOPS ≈ 75% of H100 dense BF16 (docs/hardware_facts.md §3);
    # FA2 on H100 ~35%. A vLLM FA3 fit should lie in a plausible 0.35–0.85 band.
    assert 0.35 <= load_kernel_table("h100-sxm").prefill_attention["bf16"].compute_fraction <= 0.85


def test_large_bf16_gemm_fraction_matches_readme_sanity_figure() -> None:
    # calibration README: largest bf16 GEMMs reach 0.95 of dense peak on H100; fit must be below.
    assert 0.6 <= load_kernel_table("h100-sxm").gemm["bf16"].peak_fraction <= 0.96


def test_allreduce_large_message_busbw_vs_nccl_tests_8xh100() -> None:
    # nccl-tests all_reduce busbw on 8×H100 SXM: 460–480 GB/s (alayanew guide, docs/hardware_facts.md §3).
    # Model busbw at 1 GiB = 2(n−1)/n · size / time; the α-β fit over all sizes sits a bit low.
    size = float(2**30)
    t = float(allreduce_time_s(size, 8, GPU_H100, load_kernel_table("h100-sxm")))
    busbw = 1.75 * size / t
    assert 0.7 * 460e9 <= busbw <= 480e9


FILES = {
    "gemm": "gemm.csv",
    "prefill_attention": "context_attention.csv",
    "decode_attention": "generation_attention.csv",
}


def _kernel_dir(folder: str, *files: str) -> Path:
    """The vendored kernel tables of one GPU, after checking that each file the test reads is there."""
    paths = [calibration_file(f"aiconfigurator-kernels/{folder}/{name}") for name in files]
    return paths[0].parent


def _h100_errors() -> tuple[fit.ErrorStats, fit.ErrorStats]:
    gpu = GPU_H100
    table = load_kernel_table("h100-sxm")
    data = _kernel_dir("h100_sxm", "gemm.csv", "context_attention.csv")
    g = fit.read_gemm(data, "bf16")
    idx = fit.subsample_index(g["m"].size, 5000)
    gemm = fit.error_stats(
        gemm_time_s(g["m"][idx], g["n"][idx], g["k"][idx], "bf16", gpu, table, warm_l2=True),
        g["latency_ms"][idx] * 1e-3,
    )
    a = fit.read_attention(data, "context", "bf16")
    j = fit.subsample_index(a["isl"].size, 5000)
    pred = prefill_attention_time_s(
        a["batch_size"][j], a["isl"][j], a["num_heads"][j], a["num_key_value_heads"][j], a["head_dim"][j], gpu, table
    )
    return gemm, fit.error_stats(pred, a["latency_ms"][j] * 1e-3)


def test_h100_accuracy_regression_gate() -> None:
    # Achieved today (docs/kernel_accuracy.md, all rows): GEMM 4.9/14.8, prefill 6.3/19.5; on the vendored rows
    # (all of them: under 5000 per cell) GEMM 4.8/14.9, prefill 6.2/18.7.
    gemm, attn = _h100_errors()
    assert gemm.median_abs_pct <= 7.0
    assert gemm.p90_abs_pct <= 18.0
    assert attn.median_abs_pct <= 8.0
    assert attn.p90_abs_pct <= 23.0
    assert np.isfinite([gemm.median_abs_pct, attn.median_abs_pct]).all()


# Cells (GPU, family, flavour) that miss the issue target with the shipped tables, and why
# (docs/kernel_accuracy.md "What remains"). Every other measured cell must meet it.
MISSES = {
    ("a100-sxm-80gb", "decode_attention", "bf16"): "FA2 decode 11.3 / 38 %: one CTA cost for a "
    "lone CTA and a full machine, MHA (unsplit, serial) and GQA (split-KV) rows",
    ("b200", "prefill_attention", "fp8"): "P90 31 %: head_dim 192 rows run a Triton fallback "
    "4x slower than the TRT-LLM kernel (23 % without them)",
    **{
        ("l40s", f, v): "L40S: kernel-choice jumps (FA2 4.3x time for 2x tokens at s 64->128) and "
        "run-to-run spread (large GEMMs scatter 160-280 TFLOPS; a constant-TFLOPS oracle scores "
        "median 12 %, P90 22 % on them)"
        for f, v in accuracy.FAMILIES
    },
}
CELLS = [(g, f, v) for g in MEASURED for f, v in accuracy.FAMILIES if not (g == "a100-sxm-80gb" and v == "fp8")]


@pytest.mark.parametrize(
    ("gpu_id", "family", "flavour"),
    [pytest.param(*c, marks=pytest.mark.xfail(strict=True, reason=MISSES[c])) if c in MISSES else c for c in CELLS],
)
def test_kernel_table_issue_target(gpu_id: str, family: str, flavour: str) -> None:
    # Issue target per kernel family and GPU, every measured row: median <= 10 %, P90 <= 25 %.
    gpu = load_spec_file(GpuSpec, REPO / "hardware_db" / "gpus" / f"{gpu_id}.yaml")
    data = _kernel_dir(MEASURED[gpu_id], FILES[family])
    cell = accuracy.cell(load_kernel_table(gpu_id), gpu, data, family, flavour)
    assert cell is not None
    stats = cell.stats()
    assert stats.median_abs_pct <= accuracy.TARGET_MEDIAN_PCT, stats
    assert stats.p90_abs_pct <= accuracy.TARGET_P90_PCT, stats
