"""Fit the fused-MoE entries (``moe:``) of the measured kernel tables and print their accuracy.

Usage: python benchmarks/fit_moe_tables.py [--data DIR] [--write]

For each GPU with AIConfigurator MoE measurements (H100, H200, B200) and dtype (bf16, fp8) the engine's
default fused-MoE kernel (:data:`fitting.fit_moe.MOE_KERNELS`) is fitted on ``moe_vllm.csv``
(:func:`fitting.fit_moe.fit_moe`); ``--write`` puts the entries and their sources into
``pdplan/data/kernel_tables/<gpu>.yaml`` (the other groups are kept as they are;
``benchmarks/fit_kernel_tables.py`` keeps an existing ``moe`` block when it rewrites a table).
:func:`accuracy_lines` is the MoE section of ``docs/kernel_accuracy.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))  # tools/fitting: the offline fitters

import numpy as np
import yaml
from data_root import MOE_DATA, calibration_path
from fit_kernel_tables import gpu_spec
from fitting.fit_a2a import fit_a2a, predict_s, read_deepep, read_vllm_a2a
from fitting.fit_families import stub_table
from fitting.fit_moe import MAX_MOE_FIT_ROWS, MOE_KERNELS, fit_moe, held_out, predict_moe_s, read_moe

from pdplan.calibrate.fit import ErrorStats, error_stats
from pdplan.io.kernel_tables import TABLE_DIR, load_kernel_table
from pdplan.perf.moe_a2a import A2aPhase
from pdplan.specs.kernel_table import A2aMode, GemmFlavour

MOE_GPUS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm", "b200": "b200_sxm"}
FLAVOURS: tuple[GemmFlavour, ...] = ("bf16", "fp8")
A2A_MODES: tuple[A2aMode, ...] = ("normal", "low_latency")
A2A_PHASES: tuple[A2aPhase, ...] = ("dispatch", "combine")


def fit_gpu(gpu_id: str, data: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """``moe`` entries and their source lines for one GPU."""
    gpu, stub = gpu_spec(gpu_id), stub_table(gpu_id)
    entries: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for flavour in FLAVOURS:
        moe_dtype, kernel = MOE_KERNELS[MOE_GPUS[gpu_id]][flavour]
        rows = read_moe(data / MOE_GPUS[gpu_id] / "moe_vllm.csv", moe_dtype, kernel)
        params, stats = fit_moe(rows, flavour, gpu, stub)
        entries[flavour] = {
            k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in params.model_dump().items()
        }
        sources[f"moe.{flavour}"] = (
            f"aiconfigurator-moe/{MOE_GPUS[gpu_id]}/moe_vllm.csv, moe_dtype={moe_dtype}, kernel_source={kernel} "
            "(balanced and power-law routing; DeepSeek-V3's balanced rows with the group-limited routing they "
            "measure, tools/fitting/moe_grouped.py, its power-law rows left out, fit_moe.rerouted); "
            f"fitted on <= {MAX_MOE_FIT_ROWS} rows, median / P90 |err| over "
            f"all {stats.n} rows: {stats.cell()} %"
        )
    return entries, sources


def fit_a2a_gpu(gpu_id: str, data: Path) -> tuple[dict[str, Any], dict[str, str], dict[str, ErrorStats]]:
    """``ep_a2a`` entries (normal, low_latency) with sources, and the vLLM cross-check errors."""
    entries: dict[str, Any] = {}
    sources: dict[str, str] = {}
    checks: dict[str, ErrorStats] = {}
    for mode in A2A_MODES:
        entries[mode] = {}
        fits = []
        for phase in A2A_PHASES:
            ab, stats = fit_a2a(data / MOE_GPUS[gpu_id], mode, phase)
            entries[mode][phase] = {
                "alpha_s": float(f"{ab.alpha_s:.4g}"),
                "bus_bytes_per_s": float(f"{ab.bus_bytes_per_s:.4g}"),
            }
            t, h, k, measured = read_vllm_a2a(data / MOE_GPUS[gpu_id], mode, phase)
            checks[f"{mode}.{phase}"] = error_stats(predict_s(ab, t, h, k, mode, phase), measured)
            fits.append(f"{phase} {stats.cell()} % ({stats.n} rows)")
        name = "deepep_normal_sglang.csv (20 SMs)" if mode == "normal" else "deepep_ll_sglang.csv"
        sources[f"ep_a2a.{mode}"] = (
            f"aiconfigurator-moe/{MOE_GPUS[gpu_id]}/{name}, one node of 8 GPUs (EP 8), FP8 dispatch and BF16 combine; "
            f"alpha-beta per phase, median / P90 |err|: " + "; ".join(fits)
        )
    return entries, sources, checks


def write_gpu(gpu_id: str, group: str, entries: dict[str, Any], sources: dict[str, str]) -> None:
    path = TABLE_DIR / f"{gpu_id}.yaml"
    text = path.read_text(encoding="utf-8")
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    table = yaml.safe_load(text)
    table[group] = entries
    kept = {k: v for k, v in table["sources"].items() if not k.startswith(f"{group}.")}
    table["sources"] = {**kept, **sources}
    path.write_text(header + yaml.safe_dump(table, sort_keys=False, width=100, allow_unicode=True), encoding="utf-8")
    load_kernel_table(gpu_id)  # never ship a table the loader would refuse


def cell_stats(gpu_id: str, flavour: GemmFlavour, data: Path) -> dict[str, ErrorStats]:
    """Errors of the shipped table's MoE entry: all rows, and per routing law."""
    table = load_kernel_table(gpu_id)
    moe_dtype, kernel = MOE_KERNELS[MOE_GPUS[gpu_id]][flavour]
    rows = read_moe(data / MOE_GPUS[gpu_id] / "moe_vllm.csv", moe_dtype, kernel)
    pred = predict_moe_s(rows, table.moe[flavour], flavour, gpu_spec(gpu_id), table)
    out = {"all": error_stats(pred, rows.measured_s)}
    for kind in ("balanced", "power_law"):
        m = np.array([law.kind == kind for law in rows.laws])
        out[kind] = error_stats(pred[m], rows.measured_s[m])
    return out


def rerouted_stats(gpu_id: str, flavour: GemmFlavour, data: Path) -> tuple[int, ErrorStats]:
    """Rows the reader leaves out (:func:`fitting.fit_moe.rerouted`: DeepSeek-V3 power-law rows, and 2-31
    token balanced rows where vLLM's router selects), and the shipped entry's errors over every row, those included."""
    table = load_kernel_table(gpu_id)
    moe_dtype, kernel = MOE_KERNELS[MOE_GPUS[gpu_id]][flavour]
    path = data / MOE_GPUS[gpu_id] / "moe_vllm.csv"
    every = read_moe(path, moe_dtype, kernel, keep_rerouted=True)
    kept = read_moe(path, moe_dtype, kernel).measured_s.size
    pred = predict_moe_s(every, table.moe[flavour], flavour, gpu_spec(gpu_id), table)
    return every.measured_s.size - kept, error_stats(pred, every.measured_s)


BEFORE_REFIT: dict[tuple[str, str], tuple[int, str, str, str]] = {
    # docs/kernel_accuracy.md before the 2026-12-02 refit (rows, all, balanced, power-law): the entries fitted with
    # the former power-law busiest rank and DeepSeek-V3's rows at their labelled routing (B200 FP8: EP > 1 left out)
    ("h100-sxm", "bf16"): (16253, "7.4 / 23.3", "7.9 / 20.7", "7.1 / 24.7"),
    ("h100-sxm", "fp8"): (5988, "5.0 / 19.2", "5.2 / 21.6", "4.8 / 18.6"),
    ("h200-sxm", "bf16"): (16281, "8.7 / 24.2", "9.6 / 23.7", "8.2 / 24.5"),
    ("h200-sxm", "fp8"): (5994, "6.6 / 19.2", "7.6 / 21.4", "6.3 / 18.3"),
    ("b200", "bf16"): (12424, "8.1 / 23.0", "9.1 / 19.0", "7.4 / 25.5"),
    ("b200", "fp8"): (10773, "9.1 / 23.6", "10.2 / 22.1", "8.5 / 24.4"),
}


def refit_lines(data: Path) -> list[str]:
    """Before/after table of the 2026-12-02 refit (current routing, DeepSeek-V3 rows priced as they measure)."""
    lines = [
        "| GPU | dtype | before: rows, all, balanced, power-law | after: rows, all, balanced, power-law "
        "| rows left out | after, over every row |",
        "|---|---|---|---|---|---|",
    ]
    for gpu_id in MOE_GPUS:
        for flavour in FLAVOURS:
            n0, a0, b0, p0 = BEFORE_REFIT[(gpu_id, flavour)]
            s = cell_stats(gpu_id, flavour, data)
            dropped, every = rerouted_stats(gpu_id, flavour, data)
            lines.append(
                f"| {gpu_id} | {flavour} | {n0}: {a0}; {b0}; {p0} | {s['all'].n}: {s['all'].cell()}; "
                f"{s['balanced'].cell()}; {s['power_law'].cell()} | {dropped} | {every.cell()} |"
            )
    return lines


def accuracy_lines(data: Path) -> list[str]:
    """The "Fused MoE" table of docs/kernel_accuracy.md: shipped entries against every measured row, and the
    held-out check (:func:`fitting.fit_moe.held_out`: fit on 3/4 of the model shapes, score the rest)."""
    lines = [
        "| GPU | dtype | kernel | rows | all | balanced | power-law | held-out shapes (rows) | all-pairs traffic |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for gpu_id in MOE_GPUS:
        for flavour in FLAVOURS:
            s = cell_stats(gpu_id, flavour, data)
            moe_dtype, kernel = MOE_KERNELS[MOE_GPUS[gpu_id]][flavour]
            rows = read_moe(data / MOE_GPUS[gpu_id] / "moe_vllm.csv", moe_dtype, kernel)
            shapes, held, h = held_out(rows, flavour, gpu_spec(gpu_id), stub_table(gpu_id))
            mark = " ✗" if s["all"].median_abs_pct > 10.0 or s["all"].p90_abs_pct > 25.0 else ""
            pairs = "T·k" if load_kernel_table(gpu_id).moe[flavour].all_pairs else "local"
            lines.append(
                f"| {gpu_id} | {flavour} ({moe_dtype}) | `{kernel}` | {s['all'].n} | {s['all'].cell()}{mark} | "
                f"{s['balanced'].cell()} | {s['power_law'].cell()} | {h.cell()}, {held} of {shapes} ({h.n}) | {pairs} |"
            )
    return lines


def a2a_accuracy_lines(data: Path) -> list[str]:
    """The "EP all-to-all" table of docs/kernel_accuracy.md: fit errors (SGLang DeepEP) and the vLLM check."""
    lines = [
        "| GPU | mode | dispatch α µs / β GB/s | combine α µs / β GB/s | fit err dispatch ; combine "
        "| vLLM check dispatch ; combine |",
        "|---|---|---|---|---|---|",
    ]
    for gpu_id in MOE_GPUS:
        table = load_kernel_table(gpu_id)
        _, _, checks = fit_a2a_gpu(gpu_id, data)
        for mode in A2A_MODES:
            p = table.ep_a2a[mode]
            fit_err = [cell_a2a(gpu_id, mode, ph, data) for ph in A2A_PHASES]
            lines.append(
                f"| {gpu_id} | {mode} | {p.dispatch.alpha_s * 1e6:.1f} / {p.dispatch.bus_bytes_per_s / 1e9:.0f} | "
                f"{p.combine.alpha_s * 1e6:.1f} / {p.combine.bus_bytes_per_s / 1e9:.0f} | "
                f"{fit_err[0].cell()} ; {fit_err[1].cell()} | "
                f"{checks[mode + '.dispatch'].cell()} ; {checks[mode + '.combine'].cell()} |"
            )
    return lines


def cell_a2a(gpu_id: str, mode: A2aMode, phase: A2aPhase, data: Path) -> ErrorStats:
    ab = getattr(load_kernel_table(gpu_id).ep_a2a[mode], phase)
    t, h, k, measured = read_deepep(data / MOE_GPUS[gpu_id], mode, phase)
    return error_stats(predict_s(ab, t, h, k, mode, phase), measured)


MOE_DERIVED = {"h100-pcie": "h100-sxm", "h800-sxm": "h100-sxm", "h20": "h100-sxm"}
"""Hopper parts without MoE rows: the fused-MoE efficiencies of H100 SXM (same kernels; peaks from their own
datasheets). Their ep_a2a stays absent: its β is a measured NVLink rate, which differs per part."""


def derive_moe() -> None:
    for gpu_id, base in MOE_DERIVED.items():
        table = load_kernel_table(base)
        entries = {k: v.model_dump() for k, v in table.moe.items()}
        sources = {f"moe.{k}": f"NOT MEASURED: copied from {base} ({table.sources[f'moe.{k}']})" for k in entries}
        write_gpu(gpu_id, "moe", entries, sources)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, help=f"default: {MOE_DATA} of the calibration data (benchmarks/data_root.py)"
    )
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--gpu", action="append", choices=sorted(MOE_GPUS))
    parser.add_argument("--only", choices=("moe", "ep_a2a"), help="fit one group only")
    args = parser.parse_args()
    args.data = args.data or calibration_path(MOE_DATA)
    for gpu_id in args.gpu or list(MOE_GPUS):
        if args.only != "ep_a2a":
            entries, sources = fit_gpu(gpu_id, args.data)
            for key, line in sources.items():
                print(f"{gpu_id} {key}: {entries[key.split('.')[1]]}\n  {line}")
            if args.write:
                write_gpu(gpu_id, "moe", entries, sources)
        if args.only != "moe":
            a2a, a2a_sources, _ = fit_a2a_gpu(gpu_id, args.data)
            for key, line in a2a_sources.items():
                print(f"{gpu_id} {key}: {a2a[key.split('.')[1]]}\n  {line}")
            if args.write:
                write_gpu(gpu_id, "ep_a2a", a2a, a2a_sources)
    if args.write and args.only != "ep_a2a":
        derive_moe()


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
