"""Fit the MLA module entries (``mla:``) of the measured kernel tables and print their accuracy.

Usage: python benchmarks/mla_accuracy.py [--data DIR] [--write]

``mla_{context,generation}_module_vllm.csv`` time DeepSeek-V3's whole attention module of one layer (projections,
latent attention) on one GPU holding ``num_heads`` of the 128 heads. Each GPU × phase × GEMM dtype × KV dtype
cell is fitted (:func:`fitting.fit_mla.fit_mla`); ``--write`` puts the entries and their sources into
``pdplan/data/kernel_tables/<gpu>.yaml`` (the projections are priced by the shipped dense GEMM entry, so refit
after the GEMM family). :func:`accuracy_lines` is the MLA section of
``docs/kernel_accuracy.md``: the shipped entry against every row of the cell's kernel, the held-out-TP check
(fit without 16 and 64 heads per GPU, score them), and the generic composition the roofline falls back to
without an entry (dense GEMM and attention families).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))  # tools/fitting: the offline fitters

import numpy as np
from data_root import MOE_DATA, calibration_path
from fit_moe_tables import MOE_DERIVED, MOE_GPUS, gpu_spec, write_gpu
from fitting.fit_mla import GEMM_TYPES, KV_TYPES, MlaRows, fit_mla, held_out_heads, predict_mla_s, read_mla

from pdplan.calibrate.fit import error_stats
from pdplan.io.catalog import open_catalog
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.io.perf_data import perf_data
from pdplan.perf.mla import MlaPhase, mla_key
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.types import FloatArray

PHASES: tuple[MlaPhase, ...] = ("prefill", "decode")
MODEL = "deepseek-v3"


def _cells() -> list[tuple[MlaPhase, str, str]]:
    return [(ph, g, kv) for ph in PHASES for g in GEMM_TYPES for kv in KV_TYPES]


def fit_gpu(gpu_id: str, data: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """``mla`` entries and their source lines for one GPU."""
    model, gpu, base = open_catalog().model(MODEL), gpu_spec(gpu_id), load_kernel_table(gpu_id)
    entries: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for phase, gemm_type, kv_type in _cells():
        rows = read_mla(data / MOE_GPUS[gpu_id], phase, gemm_type, kv_type)
        gemm, kv = GEMM_TYPES[gemm_type], KV_TYPES[kv_type]
        params, stats = fit_mla(rows, phase, model, gemm, kv, gpu, base)
        key = mla_key(phase, gemm, kv)
        entries[key] = {k: float(f"{v:.4g}") for k, v in params.model_dump().items()}
        name = "context" if phase == "prefill" else "generation"
        sources[f"mla.{key}"] = (
            f"aiconfigurator-moe/{MOE_GPUS[gpu_id]}/mla_{name}_module_vllm.csv, gemm_type={gemm_type}, "
            f"kv_cache_dtype={kv_type}, kernel_source={rows.kernel} (DeepSeek-V3, 1-128 heads per GPU); "
            f"median / P90 |err| over all {stats.n} rows: {stats.cell()} %"
        )
    return entries, sources


def _composition_s(rows: MlaRows, phase: MlaPhase, gemm_type: str, kv_type: str, gpu_id: str) -> FloatArray:
    """The generic composition (no mla entry): the attn.* operators of a pass priced by the dense families."""
    cat = open_catalog()
    table = load_kernel_table(gpu_id).model_copy(update={"mla": {}})
    prec = Precision(weight_bytes=2.0 if gemm_type == "bfloat16" else 1.0, kv_bytes=KV_TYPES[kv_type])
    out = np.empty_like(rows.measured_s)
    model, gpu = cat.model(MODEL), gpu_spec(gpu_id)
    for heads in np.unique(rows.heads):
        m = rows.heads == heads
        pt = phase_time(
            model,
            gpu,
            table,
            phase=phase,
            batch=rows.batch[m],
            tokens=rows.tokens[m],
            tp=128.0 / heads,
            precision=prec,
            data=perf_data(model, gpu, table, tp=int(128 // heads)),
        )
        out[m] = sum((op.time_s / op.count for op in pt.ops if op.name.startswith("attn.")), np.zeros(int(m.sum())))
    return out


def accuracy_lines(data: Path) -> list[str]:
    """The MLA table of docs/kernel_accuracy.md (shipped entries, held-out TP, fallback composition)."""
    model = open_catalog().model(MODEL)
    lines = [
        "| GPU | phase | GEMM dtype | KV dtype | kernel | rows | fitted entry | held-out 16/64 heads | composition |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for gpu_id in MOE_GPUS:
        table, gpu = load_kernel_table(gpu_id), gpu_spec(gpu_id)
        for phase, gemm_type, kv_type in _cells():
            rows = read_mla(data / MOE_GPUS[gpu_id], phase, gemm_type, kv_type)
            gemm, kv = GEMM_TYPES[gemm_type], KV_TYPES[kv_type]
            s = error_stats(predict_mla_s(rows, phase, model, gemm, kv, gpu, table), rows.measured_s)
            held = held_out_heads(rows, phase, model, gemm, kv, gpu, table)
            comp = error_stats(_composition_s(rows, phase, gemm_type, kv_type, gpu_id), rows.measured_s)
            mark = " ✗" if s.median_abs_pct > 10.0 or s.p90_abs_pct > 25.0 else ""
            lines.append(
                f"| {gpu_id} | {phase} | {gemm_type} | {kv_type} | `{rows.kernel}` | {s.n} | {s.cell()}{mark} | "
                f"{held.cell()} | {comp.cell()} |"
            )
    return lines


def derive_mla() -> None:
    """Hopper parts without MLA rows take H100 SXM's entries (same kernels; peaks from their own datasheets),
    as the fused-MoE entries do (:data:`fit_moe_tables.MOE_DERIVED`)."""
    for gpu_id, base in MOE_DERIVED.items():
        table = load_kernel_table(base)
        entries = {k: v.model_dump() for k, v in table.mla.items()}
        sources = {f"mla.{k}": f"NOT MEASURED: copied from {base} ({table.sources[f'mla.{k}']})" for k in entries}
        write_gpu(gpu_id, "mla", entries, sources)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, help=f"default: {MOE_DATA} of the calibration data (benchmarks/data_root.py)"
    )
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--gpu", action="append", choices=sorted(MOE_GPUS))
    args = parser.parse_args()
    args.data = args.data or calibration_path(MOE_DATA)
    for gpu_id in args.gpu or list(MOE_GPUS):
        entries, sources = fit_gpu(gpu_id, args.data)
        for key, line in sources.items():
            print(f"{gpu_id} {key}: {entries[key.removeprefix('mla.')]}\n  {line}")
        if args.write:
            write_gpu(gpu_id, "mla", entries, sources)
    if args.write:
        derive_mla()


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
