"""The MLA attention module as pdplan prices it, against AIConfigurator's measured MLA modules.

Usage: python benchmarks/mla_accuracy.py [--data ../shared/calibration/aiconfigurator-moe]

``mla_{context,generation}_module_vllm.csv`` time DeepSeek-V3's whole attention module of one layer (q_a/q_b,
kv_a/kv_b projections, latent attention, o_proj) on one GPU holding ``num_heads`` of the 128 heads, i.e. TP =
128/num_heads; context rows prefill ``batch_size`` prompts of ``isl`` tokens, generation rows decode one token
for ``batch_size`` sequences at context ``step``. pdplan's module is the sum of its ``attn.*`` operators per
layer (:func:`pdplan.perf.ops.forward_ops`, priced by the shipped kernel table with ``warm_l2`` off). Printed:
median / P90 absolute % error per GPU, phase, GEMM dtype and KV dtype (the MLA section of
``docs/kernel_accuracy.md``).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from fit_moe_tables import DEFAULT_MOE_DATA, MOE_GPUS, gpu_spec

from pdplan.calibrate.fit import ErrorStats, error_stats
from pdplan.io.catalog import open_catalog
from pdplan.perf.roofline import Precision, phase_time
from pdplan.types import FloatArray

GEMM = {"bfloat16": 2.0, "fp8_block": 1.0}
KV = {"bfloat16": 2.0, "fp8": 1.0}


def module_s(phase: str, batch: FloatArray, tokens: FloatArray, tp: float, prec: Precision, gpu_id: str) -> FloatArray:
    """pdplan's attention module of one layer: the attn.* operators of a pass, per layer (vectorised)."""
    cat = open_catalog()
    pt = phase_time(
        cat.model("deepseek-v3"),
        gpu_spec(gpu_id),
        cat.kernel_table(gpu_id),
        phase=phase,  # type: ignore[arg-type]
        batch=batch,
        tokens=tokens,
        tp=tp,
        precision=prec,
    )
    total = np.zeros(np.broadcast_shapes(batch.shape, tokens.shape))
    for op in pt.ops:
        if op.name.startswith("attn."):
            total = total + op.time_s / op.count
    return total


def cells(gpu_id: str, data: Path) -> dict[tuple[str, str, str], ErrorStats]:
    out: dict[tuple[str, str, str], ErrorStats] = {}
    for phase, name in (("prefill", "context"), ("decode", "generation")):
        with (data / MOE_GPUS[gpu_id] / f"mla_{name}_module_vllm.csv").open(newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["gemm_type"] in GEMM and r["kv_cache_dtype"] in KV]
        groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
        for r in rows:
            groups.setdefault((r["gemm_type"], r["kv_cache_dtype"], r["num_heads"]), []).append(r)
        pairs: dict[tuple[str, str, str], list[FloatArray]] = {}
        for (gemm, kv, heads), rs in groups.items():
            prec = Precision(weight_bytes=GEMM[gemm], kv_bytes=KV[kv])
            batch = np.array([float(r["batch_size"]) for r in rs])
            tokens = np.array([float(r["isl"] if phase == "prefill" else r["step"]) for r in rs])
            pred = module_s(phase, batch, tokens, 128.0 / float(heads), prec, gpu_id)
            meas = np.array([float(r["latency"]) * 1e-3 for r in rs])
            pairs.setdefault((phase, gemm, kv), []).append(np.stack([pred, meas]))
        for key, chunks in pairs.items():
            arr = np.concatenate(chunks, axis=1)
            out[key] = error_stats(arr[0], arr[1])
    return out


def accuracy_lines(data: Path) -> list[str]:
    lines = ["| GPU | phase | GEMM dtype | KV dtype | rows | median / P90 % |", "|---|---|---|---|---|---|"]
    for gpu_id in MOE_GPUS:
        for (phase, gemm, kv), s in sorted(cells(gpu_id, data).items()):
            mark = " ✗" if s.median_abs_pct > 10.0 or s.p90_abs_pct > 25.0 else ""
            lines.append(
                f"| {gpu_id} | {phase} | {gemm} | {kv} | {s.n} | {s.median_abs_pct:.1f} / {s.p90_abs_pct:.1f}{mark} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_MOE_DATA)
    args = parser.parse_args()
    print("\n".join(accuracy_lines(args.data)))


if __name__ == "__main__":
    main()
