"""Fit TensorRT-LLM's CUTLASS FP8 MoE entries (``pdplan/data/moe_cutlass/<gpu>.yaml``) and record their accuracy.

Usage: python benchmarks/fit_moe_cutlass.py [--data DIR] [--write]

For H100 and H200 (the Hopper GPUs whose ``moe_vllm.csv`` measures the FlashInfer CUTLASS path, i.e.
TensorRT-LLM's CUTLASS MoE GEMMs: :mod:`pdplan.perf.moe_cutlass`) :func:`fitting.fit_moe.fit_moe` fits
the ``fp8_block`` rows of ``vllm_fp8moe_flashinfer_cutlass_flashinferexperts`` (EP 2-256, moe_tp 1, every model
shape; DeepSeek-V3's rows as :func:`fitting.fit_moe.rerouted` keeps them). Printed and written to
``docs/fit_moe_cutlass.md``: the fit's median / P90 |error| over all rows and per EP, a held-out check (fit on 3/4
of the model shapes, score the rest) and, at Qwen3-235B-A22B's shape (the TensorRT-LLM silicon rows' model), the
signed median error of this entry and of the kernel table's Triton ``moe.fp8`` entry (what TensorRT-LLM's experts
were priced with before). ``--write`` writes each entry with its source.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))  # tools/fitting: the offline fitters

import numpy as np
import yaml
from data_root import MOE_DATA, calibration_path
from fit_kernel_tables import REPO, gpu_spec
from fitting.fit_families import stub_table
from fitting.fit_moe import MAX_MOE_FIT_ROWS, MoeRows, fit_moe, held_out, predict_moe_s, read_moe

from pdplan.calibrate.fit import error_stats
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.io.perf_data import CUTLASS_DIR
from pdplan.perf.moe_cutlass import CUTLASS_DTYPE, CUTLASS_KERNEL
from pdplan.specs.kernel_table import MoeParams

GPUS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm"}
QWEN3 = (4096.0, 1536.0, 8.0, 128.0)  # hidden, expert intermediate, top-k, experts (Qwen3-235B-A22B)
DOC = REPO / "docs" / "fit_moe_cutlass.md"


def _signed(pred: np.ndarray, meas: np.ndarray) -> str:
    return f"{100.0 * float(np.median(pred / meas - 1.0)):+.1f}" if meas.size else "-"


def qwen3_lines(rows: MoeRows, mine: np.ndarray, triton: np.ndarray) -> list[str]:
    """Signed median error at Qwen3-235B's shape, 1-256 tokens, per EP and routing law: this entry, the Triton one."""
    c = rows.cols
    cols = ("hidden_size", "inter_size", "topk", "num_experts")
    shape = np.all([c[k] == v for k, v in zip(cols, QWEN3, strict=True)], axis=0)
    out = []
    for ep in (2.0, 4.0, 8.0, 16.0):
        cells = []
        for kind in ("balanced", "power_law"):
            law = np.array([law.kind == kind for law in rows.laws])
            m = shape & law & (c["moe_ep_size"] == ep) & (c["num_tokens"] <= 256.0)
            cells.append(f"{_signed(mine[m], rows.measured_s[m])} / {_signed(triton[m], rows.measured_s[m])}")
        out.append(f"| EP {int(ep)} | {cells[0]} | {cells[1]} |")
    return out


def fit_gpu(gpu_id: str, data: Path) -> tuple[MoeParams, list[str], str]:
    """The entry for one GPU, its doc lines and its source line."""
    folder = GPUS[gpu_id]
    rows = read_moe(data / folder / "moe_vllm.csv", CUTLASS_DTYPE, CUTLASS_KERNEL)
    gpu, stub = gpu_spec(gpu_id), stub_table(gpu_id)
    params, stats = fit_moe(rows, "fp8", gpu, stub)
    shapes, held, held_stats = held_out(rows, "fp8", gpu, stub)
    mine = predict_moe_s(rows, params, "fp8", gpu, stub)
    shipped = load_kernel_table(gpu_id)
    triton = predict_moe_s(rows, shipped.moe["fp8"], "fp8", gpu, shipped)
    per_ep = []
    for ep in sorted(set(rows.cols["moe_ep_size"].tolist())):
        m = rows.cols["moe_ep_size"] == ep
        per_ep.append(
            f"EP {int(ep)} {error_stats(mine[m], rows.measured_s[m]).cell()} "
            f"(Triton entry {error_stats(triton[m], rows.measured_s[m]).cell()})"
        )
    lines = [
        f"### {gpu_id}",
        "",
        f"{stats.n} rows, median / P90 |err| {stats.cell()} % (the Triton `moe.fp8` entry on the same rows: "
        f"{error_stats(triton, rows.measured_s).cell()} %); held out ({held} of {shapes} model shapes unseen): "
        f"{held_stats.cell()} %.",
        "",
        "Per EP, this entry (Triton entry): " + "; ".join(per_ep) + ".",
        "",
        "Qwen3-235B-A22B shape, 1-256 tokens, signed median error %, this entry / Triton entry:",
        "",
        "| EP | balanced | power-law 1.01 and 1.2 |",
        "|---|---|---|",
        *qwen3_lines(rows, mine, triton),
        "",
    ]
    source = (
        f"aiconfigurator-moe/{folder}/moe_vllm.csv, moe_dtype={CUTLASS_DTYPE}, kernel_source={CUTLASS_KERNEL} "
        f"(FlashInfer's vendored TensorRT-LLM CUTLASS MoE GEMMs; EP 2-256, moe_tp 1, every model shape, balanced and "
        f"power-law routing, DeepSeek-V3's rows as fit_moe.rerouted keeps them); fitted on <= {MAX_MOE_FIT_ROWS} rows "
        f"by benchmarks/fit_moe_cutlass.py, median / P90 |err| over all {stats.n} rows: {stats.cell()} % (the Triton "
        f"moe.fp8 entry: {error_stats(triton, rows.measured_s).cell()} %); held-out shapes {held_stats.cell()} %"
    )
    return params, lines, source


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help=f"default: {MOE_DATA} of the calibration data (benchmarks/data_root.py)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    args.data = args.data or calibration_path(MOE_DATA)
    doc = [
        "# TensorRT-LLM's CUTLASS FP8 MoE entry (pdplan/data/moe_cutlass)",
        "",
        "Written by `benchmarks/fit_moe_cutlass.py`; what the kernel is and why it has its own entry: "
        "`pdplan/perf/moe_cutlass.py`.",
        "",
    ]
    for gpu_id in GPUS:
        params, lines, source = fit_gpu(gpu_id, args.data)
        print("\n".join(lines))
        doc += lines
        if args.write:
            entry = {k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in params.model_dump().items()}
            text = yaml.safe_dump({"gpu": gpu_id, "moe_cutlass": entry, "source": source}, sort_keys=False, width=100)
            CUTLASS_DIR.mkdir(exist_ok=True)
            (CUTLASS_DIR / f"{gpu_id}.yaml").write_text(text, encoding="utf-8")
    if args.write:
        DOC.write_text("\n".join(doc), encoding="utf-8")


if __name__ == "__main__":
    main()
