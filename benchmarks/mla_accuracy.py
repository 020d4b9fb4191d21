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

GEMM = {"bfloat16": 1.0 * 2, "fp8_block": 1.0}
KV = {"bfloat16": 2.0, "fp8": 1.0}


def module_s(phase: str, batch: float, tokens: float, tp: float, prec: Precision, gpu_id: str) -> float:
    cat = open_catalog()
    model = cat.model("deepseek-v3")
    pt = phase_time(
        model,
        gpu_spec(gpu_id),
        cat.kernel_table(gpu_id),
        phase=phase,
        batch=batch,
        tokens=tokens,
        tp=tp,  # type: ignore[arg-type]
        precision=prec,
    )
    return sum(float(op.time_s) / op.count for op in pt.ops if op.name.startswith("attn."))


def cells(gpu_id: str, data: Path) -> dict[tuple[str, str, str], ErrorStats]:
    out: dict[tuple[str, str, str], ErrorStats] = {}
    for phase, name in (("prefill", "context"), ("decode", "generation")):
        with (data / MOE_GPUS[gpu_id] / f"mla_{name}_module_vllm.csv").open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        groups: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
        for r in rows:
            if r["gemm_type"] not in GEMM or r["kv_cache_dtype"] not in KV:
                continue
            prec = Precision(weight_bytes=GEMM[r["gemm_type"]], kv_bytes=KV[r["kv_cache_dtype"]])
            tp = 128.0 / float(r["num_heads"])
            tokens = float(r["isl"]) if phase == "prefill" else float(r["step"])
            pred = module_s(phase, float(r["batch_size"]), tokens, tp, prec, gpu_id)
            key = (phase, r["gemm_type"], r["kv_cache_dtype"])
            groups.setdefault(key, []).append((pred, float(r["latency"]) * 1e-3))
        for key, pairs in groups.items():
            arr = np.array(pairs)
            out[key] = error_stats(arr[:, 0], arr[:, 1])
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
