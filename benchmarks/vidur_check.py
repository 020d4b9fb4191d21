"""Generalisation check: the shipped kernel tables against Vidur's independent per-layer operator sums.

Vidur (Microsoft, MLSys'24) published per-operator timings of one transformer layer on one GPU for several models,
token counts and TP degrees (``vidur-profiling/compute/{a100,h100}/*/*/mlp.csv`` of the calibration data folder,
``benchmarks/data_root.py``; a sarathi-serve build, bf16). pdplan never saw these rows when its tables were fitted
(they were fitted on AIConfigurator's kernels), so this is an out-of-sample test of the roofline's non-attention
part of a layer:

    measured  = input_layernorm + attn_pre_proj + attn_rope + attn_post_proj + post_attention_layernorm
                + mlp_up_proj + mlp_act + mlp_down_proj + add            (medians, ms; collectives excluded)
    predicted = per-layer time of pdplan ops attn.qkv_proj + attn.o_proj + mlp.gate_up (or up) + mlp.down
                + norm (x2) + activation + rotary                          (prefill pass of num_tokens tokens)

Run: ``python benchmarks/vidur_check.py`` (prints a Markdown table; docs/accuracy.md records its output).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from data_root import KERNEL_DATA, calibration_path

from pdplan.calibrate.fit import error_stats
from pdplan.io.catalog import open_catalog
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.perf.op_pricing import Pricing, price_ops
from pdplan.perf.op_types import PassShape
from pdplan.perf.ops import forward_ops
from pdplan.perf.precision import Precision
from pdplan.specs.model import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
GPU_IDS = {"a100": "a100-sxm-80gb", "h100": "h100-sxm"}
OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
PRICED = ("attn.qkv_proj", "attn.o_proj", "mlp.gate_up", "mlp.up", "mlp.down", "norm", "activation", "rotary")


def spec_from_row(row: dict[str, str], name: str) -> ModelSpec:
    """A one-layer ModelSpec with the dimensions of a Vidur row (enough for the non-attention ops)."""
    heads, hidden = int(row["n_head"]), int(row["n_embd"])
    return ModelSpec.model_validate(
        {
            "name": name,
            "family": "vidur",
            "num_layers": 1,
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_kv_heads": int(row["n_kv_head"]),
            "head_dim": hidden // heads,
            "intermediate_size": int(row["n_expanded_embd"]),
            "gated_mlp": row["use_gated_mlp"].strip().lower() == "true",
            "vocab_size": int(row["vocab_size"]),
            "tie_word_embeddings": False,
            "max_position_embeddings": 4096,
            "position_embedding": "rope",
            "norm": "rmsnorm",
            "source": "vidur-profiling row",
        }
    )


def predict_rows(rows: list[dict[str, str]], gpu_key: str, name: str) -> np.ndarray:
    gpu = open_catalog().gpu(GPU_IDS[gpu_key])
    table = load_kernel_table(gpu.name)
    model = spec_from_row(rows[0], name)
    tokens = np.array([float(r["num_tokens"]) for r in rows])
    tp = np.array([float(r["num_tensor_parallel_workers"]) for r in rows])
    shape = PassShape("prefill", np.ones_like(tokens), tokens, tp)
    ops = [op for op in forward_ops(model, shape) if op.name in PRICED]
    priced = price_ops(ops, Pricing(gpu, table, Precision()))
    return sum((op.time_s for op in priced), np.zeros_like(tokens))


def gemm_shapes(row: dict[str, str]) -> dict[str, tuple[int, int, int]]:
    """(m, n, k) of the four GEMMs of a Vidur row, per GPU after TP (as AIConfigurator's gemm.csv names them)."""
    hidden, heads, kv = int(row["n_embd"]), int(row["n_head"]), int(row["n_kv_head"])
    head_dim, inter = hidden // heads, int(row["n_expanded_embd"])
    tp, m = int(row["num_tensor_parallel_workers"]), int(row["num_tokens"])
    up = (2 if row["use_gated_mlp"].strip().lower() == "true" else 1) * inter // tp
    return {
        "attn_pre_proj": (m, (heads + 2 * kv) * head_dim // tp, hidden),
        "attn_post_proj": (m, hidden, heads * head_dim // tp),
        "mlp_up_proj": (m, up, hidden),
        "mlp_down_proj": (m, hidden, inter // tp),
    }


def dataset_agreement(vidur: Path, aic_root: Path) -> None:
    """Vidur's GEMM time / AIConfigurator's at the very same (m, n, k): how far apart the two measurements are.

    No table fitted to one set can be closer to the other than this ratio allows.
    """
    print("\n| GPU | tokens m | same-shape GEMMs | Vidur / AIConfigurator median | P10 | P90 |")
    print("|---|---|---|---|---|---|")
    for gpu_key, aic_dir in (("a100", "a100_sxm"), ("h100", "h100_sxm")):
        with (aic_root / aic_dir / "gemm.csv").open() as f:
            aic = {
                (int(r["m"]), int(r["n"]), int(r["k"])): float(r["latency_ms"])
                for r in csv.DictReader(f)
                if r["gemm_dtype"] in ("bfloat16", "float16")
            }
        ms, ratios = [], []
        for path in sorted((vidur / gpu_key).glob("*/*/mlp.csv")):
            for row in csv.DictReader(path.open()):
                for op, shape in gemm_shapes(row).items():
                    if shape in aic:
                        ms.append(shape[0])
                        ratios.append(float(row[f"time_stats.{op}.median"]) / aic[shape])
        m_arr, r_arr = np.array(ms), np.array(ratios)
        for lo, hi in ((1, 64), (64, 512), (512, 4096), (4096, 1 << 30)):
            sel = (m_arr >= lo) & (m_arr < hi)
            if sel.any():
                p10, med, p90 = np.percentile(r_arr[sel], [10, 50, 90])
                band = f"{lo}-{hi - 1}" if hi < 1 << 30 else f">= {lo}"
                print(f"| {gpu_key} | {band} | {int(sel.sum())} | {med:.3f} | {p10:.3f} | {p90:.3f} |")


def main() -> int:
    vidur, aic = calibration_path("vidur-profiling/compute"), calibration_path(KERNEL_DATA)
    print("| GPU | model | rows | median abs % | P90 abs % | median signed % |\n|---|---|---|---|---|---|")
    all_pred, all_meas = [], []
    for gpu_key in ("a100", "h100"):
        for path in sorted((vidur / gpu_key).glob("*/*/mlp.csv")):
            rows = list(csv.DictReader(path.open()))
            # phi-2 (parallel attention/MLP) has no post_attention_layernorm column: that op is absent, not zero-cost
            meas = np.array([sum(float(r.get(f"time_stats.{op}.median") or 0.0) for op in OPS) for r in rows]) / 1e3
            pred = predict_rows(rows, gpu_key, path.parent.name.lower().replace("_", "-"))
            stats = error_stats(pred, meas)
            all_pred.append(pred)
            all_meas.append(meas)
            signed = float(np.median(pred / meas - 1.0) * 100)
            print(
                f"| {gpu_key} | {path.parent.name} | {stats.n} | {stats.median_abs_pct:.1f} | "
                f"{stats.p90_abs_pct:.1f} | {signed:+.1f} |"
            )
    total = error_stats(np.concatenate(all_pred), np.concatenate(all_meas))
    signed = float(np.median(np.concatenate(all_pred) / np.concatenate(all_meas) - 1.0) * 100)
    print(f"| all | all | {total.n} | {total.median_abs_pct:.1f} | {total.p90_abs_pct:.1f} | {signed:+.1f} |")
    dataset_agreement(vidur, aic)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
