"""Fit the W4A16 MXFP4 MoE entries (``pdplan/data/moe_w4a16/<gpu>.yaml``) and print their accuracy.

Usage: python benchmarks/fit_moe_w4a16.py [--data DIR] [--write]

For H100 and H200 (the Hopper GPUs with AIConfigurator gpt-oss MoE measurements; B200 runs MXFP4 on its FP4
tensor cores, another kernel) :func:`fitting.fit_moe_w4a16.fit_w4a16` fits the OAI Triton
``matmul_ogs`` rows of ``moe_vllm.csv`` with EP 1 (vLLM shards experts over TP unless ``--enable-expert-parallel``
is given, and every gpt-oss row of the silicon CSV runs EP 1; under EP the kernel pays a further ~30 µs per layer
for its expert map, which one fixed term cannot hold for both: the EP > 1 rows' errors are printed and recorded);
``--write`` writes each entry with its source and errors. The errors of the BF16 fused-MoE entry on the same rows
(what pdplan used before) are printed beside them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))  # tools/fitting: the offline fitters

import numpy as np
import yaml
from data_root import MOE_DATA, calibration_path
from fit_kernel_tables import gpu_spec
from fitting.fit_families import stub_table
from fitting.fit_moe import MoeRows, read_moe
from fitting.fit_moe_w4a16 import MAX_ROWS, W4A16_DTYPE, W4A16_KERNEL, fit_w4a16, predict_w4a16_s

from pdplan.calibrate.fit import error_stats
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.io.perf_data import W4A16_DIR

GPUS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm"}


def _split(rows: MoeRows, keep: np.ndarray) -> MoeRows:
    cols = {k: v[keep] for k, v in rows.cols.items()}
    return MoeRows(cols, tuple(law for law, k in zip(rows.laws, keep, strict=True) if k), rows.measured_s[keep])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help=f"default: {MOE_DATA} of the calibration data (benchmarks/data_root.py)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    args.data = args.data or calibration_path(MOE_DATA)
    for gpu_id, folder in GPUS.items():
        rows = read_moe(args.data / folder / "moe_vllm.csv", W4A16_DTYPE, W4A16_KERNEL)
        gpu, stub = gpu_spec(gpu_id), stub_table(gpu_id)
        ep1, epn = _split(rows, rows.cols["moe_ep_size"] == 1.0), _split(rows, rows.cols["moe_ep_size"] > 1.0)
        params, stats = fit_w4a16(ep1, gpu, stub)
        ep_stats = error_stats(predict_w4a16_s(epn, params, gpu, stub), epn.measured_s)
        shipped = load_kernel_table(gpu_id)
        before = error_stats(predict_w4a16_s(ep1, shipped.moe["bf16"], gpu, shipped), ep1.measured_s)
        print(
            f"{gpu_id}: {stats.n} EP 1 rows, W4A16 fit median/P90 |err| {stats.cell()} % "
            f"(EP > 1: {ep_stats.cell()} %); BF16 fused-MoE entry on the EP 1 rows {before.cell()} %; {params}"
        )
        if args.write:
            entry = {k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in params.model_dump().items()}
            source = (
                f"aiconfigurator-moe/{folder}/moe_vllm.csv, moe_dtype={W4A16_DTYPE}, kernel_source={W4A16_KERNEL} "
                f"(gpt-oss shapes: hidden 2880, inter 2880, top-4 of 32/128 experts, balanced and power-law "
                f"routing), the EP 1 rows (moe_tp 1-32); fitted on <= {MAX_ROWS} rows by "
                f"benchmarks/fit_moe_w4a16.py, median / P90 |err| over all {stats.n} EP 1 rows: {stats.cell()} % "
                f"(the BF16 fused-MoE entry with 0.53125-byte weights: {before.cell()} %); on the {ep_stats.n} "
                f"EP 2-128 rows {ep_stats.cell()} % (the EP expert map adds ~30 us per layer)"
            )
            W4A16_DIR.mkdir(exist_ok=True)
            text = yaml.safe_dump({"gpu": gpu_id, "moe_w4a16": entry, "source": source}, sort_keys=False, width=100)
            (W4A16_DIR / f"{gpu_id}.yaml").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
