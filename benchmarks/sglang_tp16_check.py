"""SGLang DeepSeek-R1 1P1D at TP16 (two 8-GPU H100 nodes per role): which part of the priced prefill can be checked
against a measurement, and what the disaggregated rows say about the rest (issue #13).

Checks, each against stored measured data (the calibration data folder, ``benchmarks/data_root.py``):

1. **Fused MoE at the TP16 shard** (no EP: 2048/16 = 128-wide expert slices, one FP8 128-block per GPU): pdplan's
   fused-MoE entry against ``aiconfigurator-moe/h100_sxm/moe_vllm.csv``, which measures exactly this shape (hidden
   7,168, intermediate 2,048, 256 experts, top-8, ``moe_tp_size`` 16, FP8 block, Triton fused MoE, balanced routing).
2. **MLA prefill at 8 heads per GPU** (128/16): pdplan's MLA module entry against ``mla_context_module_vllm.csv``
   (``num_heads`` 8, one prompt, FP8-block GEMMs, FP8 KV).
3. **The two-node all-reduce**: pdplan's hierarchical price (NVLink all-reduce inside the node + a ring of each GPU's
   1/8 shard over its own NIC, :func:`pdplan.perf.expert_parallel.allreduce_s`) at prefill message sizes, with the
   bus bandwidth it implies; no H100 table measures more than one node. The one stored two-node all-reduce table
   (``vidur-profiling/network/a100_dgx/all_reduce.csv``, 16 workers, 8 per node; ``size`` in bytes: Vidur's
   predictor converts it with "each token is of size 2 * h bytes") is read for the ratio of two-node to one-node
   bus bandwidth.
4. **Diagnostic sweeps on the 46 rows (nothing shipped)**: the group's TTFT / TPOT medians with (a) the scale-out
   bandwidth per GPU of the two-node all-reduce lowered, (b) the whole prefill pass scaled. They test whether one
   physical knob reconciles the rows.

Writes ``docs/sglang_tp16_check.md``. Run: ``python benchmarks/sglang_tp16_check.py``.
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))  # tools/fitting: the offline fitters

import engine_accuracy as ea  # benchmarks/ is on sys.path when this script runs
import numpy as np
from data_root import SILICON_H100, calibration_path
from fit_kernel_tables import gpu_spec
from fitting.fit_mla import predict_mla_s, read_mla
from fitting.fit_moe import MoeRows, predict_moe_s, read_moe
from moe_rows import moe_rows

import pdplan.benchmark.disaggregated_loop as db_mod
import pdplan.io.perf_data as perf_data_io
from pdplan.io.catalog import open_catalog
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.io.perf_data import perf_data
from pdplan.perf.expert_parallel import allreduce_s
from pdplan.perf.kernels import allreduce_time_s
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time

ROOT = Path(__file__).resolve().parents[1]
GPU = "h100-sxm"
MOE_SHAPE = {"hidden_size": 7168.0, "inter_size": 2048.0, "topk": 8.0, "num_experts": 256.0, "moe_tp_size": 16.0}
PROMPTS = (1024, 8192)
MOE_ROUTING_NOTE = (
    "The DeepSeek rows do not measure 256 experts: AIConfigurator's synthetic logits are built for plain top-k (one "
    "hot expert per 32-expert group) and the collector routes them with DeepSeek's group-limited routing (8 groups, "
    "top-4), which keeps groups 0-3 and fills top-8 with tied cold experts, so only the 128 experts of groups 0-3 "
    "are read where serving spreads tokens over all 256. The DeepSeek table prices the rows with that routing "
    "(`tools/fitting/moe_grouped.py`, as the fit does; its 2-16-token rows are left out, "
    "`tools/fitting/fit_moe.py` `rerouted`); priced as 256 experts they were +36 % (median) before the refit. "
    "The Kimi K2 shape (same expert matrices, no groups) shows what the model does at a 128-wide FP8 slice when the "
    "routing is the labelled one. The 64-token rows show the count: 0.223 ms (DeepSeek) against 0.449 ms (Kimi K2): "
    "128 experts read against 384 (512 balanced pairs cover all of Kimi K2's), plus the fixed costs both pay."
)


def moe_lines(num_experts: float) -> list[str]:
    """Check 1: the fused-MoE entry against the measured TP16 rows of the 7,168 x 2,048 top-8 shape with
    ``num_experts`` experts (warm L2, as measured)."""
    table, gpu = load_kernel_table(GPU), gpu_spec(GPU)
    rows = read_moe(
        calibration_path("aiconfigurator-moe/h100_sxm/moe_vllm.csv"), "fp8_block", "vllm_fp8moe_triton_tritonexperts"
    )
    keep = np.ones(rows.measured_s.size, dtype=bool)
    for col, value in {**MOE_SHAPE, "num_experts": num_experts}.items():
        keep &= rows.cols[col] == value
    keep &= rows.cols["moe_ep_size"] == 1.0
    keep &= np.array([law.kind == "balanced" for law in rows.laws])
    idx = np.flatnonzero(keep)
    sub = MoeRows({k: v[idx] for k, v in rows.cols.items()}, tuple(rows.laws[i] for i in idx), rows.measured_s[idx])
    pred = predict_moe_s(sub, table.moe["fp8"], "fp8", gpu, table)
    lines = ["| tokens | measured ms | pdplan ms | error % |", "|---|---|---|---|"]
    errs = []
    for t, m, p in zip(sub.cols["num_tokens"], sub.measured_s, pred, strict=True):
        errs.append((p / m - 1.0) * 100.0)
        if t in (1, 8, 64, 256, 1024, 2048, 4096, 8192, 16384):
            lines.append(f"| {int(t)} | {m * 1e3:.3f} | {p * 1e3:.3f} | {errs[-1]:+.1f} |")
    lines.append(
        f"\n{len(errs)} rows, median signed / abs error {statistics.median(errs):+.1f} / "
        f"{statistics.median(abs(e) for e in errs):.1f} %."
    )
    return lines


def mla_lines() -> list[str]:
    """Check 2: the MLA prefill module at 8 heads per GPU, one prompt."""
    table, gpu, model = load_kernel_table(GPU), gpu_spec(GPU), open_catalog().model("deepseek-r1")
    rows = read_mla(calibration_path("aiconfigurator-moe/h100_sxm"), "prefill", "fp8_block", "fp8")
    rows = rows.take((rows.heads == 8.0) & (rows.batch == 1.0))
    pred = predict_mla_s(rows, "prefill", model, "fp8", 1.0, gpu, table)
    lines = [
        f"Kernel `{rows.kernel}`.",
        "",
        "| prompt tokens | measured ms | pdplan ms | error % |",
        "|---|---|---|---|",
    ]
    order = np.argsort(rows.tokens)
    errs = [(p / m - 1.0) * 100.0 for m, p in zip(rows.measured_s, pred, strict=True)]
    for i in order:
        if rows.tokens[i] >= 256:
            lines.append(
                f"| {int(rows.tokens[i])} | {rows.measured_s[i] * 1e3:.3f} | {pred[i] * 1e3:.3f} | {errs[i]:+.1f} |"
            )
    lines.append(
        f"\n{len(errs)} rows, median signed / abs error {statistics.median(errs):+.1f} / "
        f"{statistics.median(abs(e) for e in errs):.1f} %."
    )
    return lines


def pass_lines() -> list[str]:
    """The priced TP16 prefill pass of one prompt, by part, and the two-node all-reduce inside it."""
    cat, table, gpu = open_catalog(), load_kernel_table(GPU), gpu_spec(GPU)
    model = cat.model("deepseek-r1")
    lines = [
        "| prompt | pass ms | attention (MLA) ms | routed experts ms | all-reduce ms | rest ms | "
        "one all-reduce: message MB, 8-GPU part / cross-node part ms, bus GB/s |",
        "|---|---|---|---|---|---|---|",
    ]
    data = perf_data(model, gpu, table, tp=16)
    for tokens in PROMPTS:
        pt = phase_time(
            model,
            gpu,
            table,
            phase="prefill",
            batch=1,
            tokens=tokens,
            tp=16,
            precision=Precision(weight_bytes=1.0, kv_bytes=1.0),
            data=data,
        )
        by = {op.name: float(np.ravel(op.time_s)[0]) for op in pt.ops}
        attn = sum(v for k, v in by.items() if k.startswith("attn."))
        total = float(np.ravel(pt.time_s)[0])
        msg = tokens * model.hidden_size * 2.0
        whole = float(allreduce_s(msg, 16, gpu, table, data))
        intra = float(allreduce_time_s(msg, 8, gpu, table))
        bus = msg * 2.0 * 15.0 / 16.0 / whole / 1e9
        rest = total - attn - by["moe.experts"] - by["tp.allreduce"]
        lines.append(
            f"| {tokens} | {total * 1e3:.1f} | {attn * 1e3:.1f} | {by['moe.experts'] * 1e3:.1f} | "
            f"{by['tp.allreduce'] * 1e3:.1f} | {rest * 1e3:.1f} | {msg / 1e6:.1f}, {intra * 1e3:.3f} / "
            f"{(whole - intra) * 1e3:.3f}, {bus:.0f} |"
        )
    return lines


def vidur_lines() -> list[str]:
    """Check 3: the stored two-node all-reduce measurement (A100 DGX, Vidur), bus bandwidth at the largest sizes."""
    path = calibration_path("vidur-profiling/network/a100_dgx/all_reduce.csv")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    lines = ["| workers (per node) | message MB | median ms | bus GB/s |", "|---|---|---|---|"]
    for workers, per_node in ((8, 8), (16, 8)):
        pick = [r for r in rows if int(r["num_workers"]) == workers and int(r["devices_per_node"]) == per_node]
        for size in (16515072, 67108864):
            r = min(pick, key=lambda r: abs(int(r["size"]) - size))
            t = float(r["time_stats.all_reduce.median"]) * 1e-3
            bus = int(r["size"]) * 2.0 * (workers - 1) / workers / t / 1e9
            lines.append(f"| {workers} ({per_node}) | {int(r['size']) / 1e6:.1f} | {t * 1e3:.3f} | {bus:.1f} |")
    return lines


def _group(todo: list[dict[str, Any]]) -> tuple[float, float, float, float]:
    data, _ = ea.price([dict(r) for r in todo], open_catalog())
    tpot = [r["tpot_err"] for r in data]
    ttft = [r["ttft_err"] for r in data]
    med = statistics.median
    return med(tpot), med(abs(e) for e in tpot), med(ttft), med(abs(e) for e in ttft)


@contextmanager
def scale_out(bytes_per_s: float) -> Iterator[None]:
    """The two-node all-reduce with the scale-out bandwidth per GPU set to ``bytes_per_s`` (diagnostic only)."""
    real = perf_data_io.expert_parallel_defaults()
    changed = dataclasses.replace(real, inter_node_bytes_per_s_per_gpu=bytes_per_s)
    with mock.patch.object(perf_data_io, "expert_parallel_defaults", return_value=changed):
        yield


@contextmanager
def prefill_scaled(factor: float) -> Iterator[None]:
    """Every prefill pass of the disaggregated loop scaled by ``factor`` (diagnostic only)."""
    real: Callable[..., db_mod.DisaggLoopInputs] = db_mod.disagg_loop_inputs

    def scaled(model: Any) -> db_mod.DisaggLoopInputs:
        inp = real(model)
        return dataclasses.replace(
            inp, prefill_service_s=inp.prefill_service_s * factor, prefill_latency_s=inp.prefill_latency_s * factor
        )

    with mock.patch.object(db_mod, "disagg_loop_inputs", scaled), mock.patch.object(ea, "disagg_loop_inputs", scaled):
        yield


def sweep_lines() -> list[str]:
    """Check 4: the group's medians under each diagnostic knob."""
    todo = [
        r
        for r in moe_rows(calibration_path(SILICON_H100))[0]
        if r["engine"] == "sglang" and r["model"] == "deepseek-r1"
    ]
    lines = ["| knob | TPOT median signed / abs % | TTFT median signed / abs % |", "|---|---|---|"]
    cases: list[tuple[str, Any]] = [("shipped (scale-out 50 GB/s per GPU)", scale_out(50e9))]
    cases += [(f"scale-out {bw / 1e9:g} GB/s per GPU", scale_out(bw)) for bw in (10e9, 5e9, 4e9, 3e9)]
    cases += [(f"prefill x{a:g}", prefill_scaled(a)) for a in (1.5, 2.0, 2.2, 2.5)]
    for name, ctx in cases:
        with ctx:
            tpot_s, tpot_a, ttft_s, ttft_a = _group(todo)
        lines.append(f"| {name} | {tpot_s:+.1f} / {tpot_a:.1f} | {ttft_s:+.1f} / {ttft_a:.1f} |")
    return lines


def main() -> None:
    start = time.perf_counter()
    parts = [
        "# SGLang DeepSeek-R1 1P1D TP16 (two nodes per role): checks of the priced prefill",
        "",
        f"Written by `benchmarks/sglang_tp16_check.py` ({(__doc__ or '').splitlines()[0].strip()})",
        "",
        "## 1. Fused MoE, TP16 shard (moe_vllm.csv, FP8 block, Triton, balanced, moe_tp 16)",
        "",
        "DeepSeek-R1/V3 (256 experts in 8 groups, top-4 groups):",
        "",
        *moe_lines(256.0),
        "",
        "Kimi K2 (same 7,168 x 2,048 experts and top-8, 384 experts, no groups):",
        "",
        *moe_lines(384.0),
        "",
        MOE_ROUTING_NOTE,
        "",
        "## 2. MLA prefill module, 8 heads per GPU (mla_context_module_vllm.csv, FP8 block GEMMs, FP8 KV, 1 prompt)",
        "",
        *mla_lines(),
        "",
        "## 3. The priced TP16 prefill pass and its two-node all-reduce",
        "",
        *pass_lines(),
        "",
        "The one stored two-node all-reduce (A100 DGX, Vidur `a100_dgx/all_reduce.csv`; not the rows' cluster):",
        "",
        *vidur_lines(),
        "",
        "## 4. Diagnostic sweeps on the 46 rows (not shipped)",
        "",
        *sweep_lines(),
        "",
        f"{time.perf_counter() - start:.0f} s.",
    ]
    out = ROOT / "docs" / "sglang_tp16_check.md"
    out.write_text("\n".join(parts) + "\n", encoding="utf-8")
    print("\n".join(parts))


if __name__ == "__main__":
    sys.exit(main())
