"""Fit the fused-MoE kernel entry (:class:`pdplan.specs.kernel_table.MoeParams`) to AIConfigurator's MoE tables.

``moe_vllm.csv`` rows are one fused MoE layer for ``num_tokens`` tokens on one GPU holding its
``moe_tp_size``/``moe_ep_size`` shard; ``distribution`` names the routing the benchmark generated
(``balanced``, ``power_law_<alpha>``: AIConfigurator's ``balanced_logits`` / ``power_law_logits_v3``, with
the busiest EP rank on the measured GPU), which maps onto :class:`pdplan.perf.moe_routing.RoutingLaw`.
One kernel family per dtype is fitted (the engine's default kernel for that dtype, ``MOE_KERNELS``);
the discrete M tile is chosen by the lowest P90 on the fit subsample, as for GEMMs.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters, subsample_index
from pdplan.errors import SpecError
from pdplan.perf.kernels import GemmFlavour, GpuPeaks, KernelTable
from pdplan.perf.moe import moe_shape, moe_time_s
from pdplan.perf.moe_routing import RoutingLaw
from pdplan.specs.kernel_table import MoeParams
from pdplan.types import FloatArray

MOE_KERNELS: dict[str, dict[GemmFlavour, tuple[str, str]]] = {
    # (moe_dtype, kernel_source) fitted per GPU and pdplan dtype: vLLM 0.24's default path for BF16 and for
    # block-scaled FP8 checkpoints (DeepSeek-V3/R1, Qwen3-FP8, the form FP8 MoE models ship in): the Triton
    # fused MoE on Hopper (FlashInfer's CUTLASS path is opt-in there), TRT-LLM kernels via FlashInfer on B200
    "h100_sxm": {
        "bf16": ("bfloat16", "vllm_unquantizedfusedmoe_triton_tritonexperts"),
        "fp8": ("fp8_block", "vllm_fp8moe_triton_tritonexperts"),
    },
    "h200_sxm": {
        "bf16": ("bfloat16", "vllm_unquantizedfusedmoe_triton_tritonexperts"),
        "fp8": ("fp8_block", "vllm_fp8moe_triton_tritonexperts"),
    },
    "b200_sxm": {
        "bf16": ("bfloat16", "vllm_unquantizedfusedmoe_flashinfer_trtllm_trtllmbf16experts"),
        "fp8": ("fp8_block", "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic"),
    },
}

NON_GATED = {(2688.0, 1856.0, 6.0, 128.0), (2048.0, 5120.0, 22.0, 512.0), (1024.0, 2688.0, 22.0, 512.0)}
"""(hidden, inter, top-k, experts) priced as two-matrix (non-gated) experts: as three-matrix SwiGLU experts
their measured times fall below the HBM floor of their weights; NVIDIA Nemotron-3's MoE layers use
non-gated ReLU² experts (up, down), and these are Nemotron-3 shapes (Nano: hidden 2688, 128 experts, top-6)."""

M_TILES = (32, 64)
MAX_MOE_FIT_ROWS = 2500
_COLS = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "latency")


@dataclass(frozen=True)
class MoeRows:
    """Measured MoE layers: shape columns (arrays), routing law per row, latency in seconds."""

    cols: dict[str, FloatArray]
    laws: tuple[RoutingLaw, ...]
    measured_s: FloatArray


def law_of(distribution: str) -> RoutingLaw:
    """AIConfigurator's ``distribution`` label as a routing law (``uniform`` = SGLang's random routing)."""
    if distribution == "balanced":
        return RoutingLaw("balanced")
    if distribution == "uniform":
        return RoutingLaw("uniform")
    if distribution.startswith("power_law_"):
        return RoutingLaw("power_law", float(distribution.removeprefix("power_law_")))
    raise SpecError(f"unknown MoE distribution {distribution!r}", field="distribution")


def read_moe(path: Path, moe_dtype: str, kernel_source: str | None = None) -> MoeRows:
    """Rows of one dtype (and kernel) from a ``moe_vllm.csv``-style file."""
    if not path.is_file():
        raise SpecError("file not found", source=str(path))
    with path.open(newline="") as fh:
        rows = [
            r
            for r in csv.DictReader(fh)
            if r["moe_dtype"] == moe_dtype and (kernel_source is None or r["kernel_source"] == kernel_source)
        ]
    cols = {c: np.array([float(r[c]) for r in rows]) for c in _COLS}
    laws = tuple(law_of(r["distribution"]) for r in rows)
    return MoeRows(cols, laws, cols["latency"] * 1e-3)


def _groups(rows: MoeRows) -> dict[tuple[float, ...], np.ndarray]:
    """Row indices per (shape, routing law): each group shares scalars, so one vectorised call prices it."""
    keys: dict[tuple[float, ...], list[int]] = {}
    c = rows.cols
    for i, law in enumerate(rows.laws):
        kind = ("balanced", "uniform", "power_law", "eplb").index(law.kind)
        key = (c["hidden_size"][i], c["inter_size"][i], c["topk"][i], c["num_experts"][i], float(kind), law.alpha)
        keys.setdefault(key, []).append(i)
    return {k: np.array(v) for k, v in keys.items()}


def predict_moe_s(
    rows: MoeRows, params: MoeParams, flavour: GemmFlavour, gpu: GpuPeaks, table: KernelTable
) -> FloatArray:
    """Model seconds for every row (weights at 2 B for bf16, 1 B plus block scales for fp8)."""
    c = rows.cols
    out = np.empty_like(rows.measured_s)
    w_bytes = 2.0 if flavour == "bf16" else 1.0 + 4.0 / (128.0 * 128.0)
    for (h, inter, k, e, _, _), idx in _groups(rows).items():
        shape = moe_shape(
            c["num_tokens"][idx],
            h,
            inter,
            int(e),
            int(k),
            ep=c["moe_ep_size"][idx],
            moe_tp=c["moe_tp_size"][idx],
            weight_bytes=w_bytes,
            law=rows.laws[int(idx[0])],
            gated=(h, inter, k, e) not in NON_GATED,
        )
        out[idx] = moe_time_s(shape, flavour, gpu, table, params)
    return out


_X0 = {"peak_fraction": 0.6, "m0_tokens": 8.0, "memory_fraction": 0.8, "overhead_s": 3e-5, "smooth_q": 4.0}
_BOUNDS = {
    "peak_fraction": (0.05, 1.0),
    "m0_tokens": (0.01, 512.0),
    "memory_fraction": (0.1, 1.0),
    "overhead_s": (1e-7, 1e-3),
    "smooth_q": (1.0, 16.0),
    "per_token_s": (1e-12, 1e-6),
    "per_expert_s": (1e-10, 1e-4),
}


def fit_moe(rows: MoeRows, flavour: GemmFlavour, gpu: GpuPeaks, table: KernelTable) -> tuple[MoeParams, ErrorStats]:
    """Least-squares fit of one dtype's MoE entry (each M tile tried; lowest fit-subsample P90 kept)."""
    idx = subsample_index(rows.measured_s.size, MAX_MOE_FIT_ROWS)
    sub = MoeRows({k: v[idx] for k, v in rows.cols.items()}, tuple(rows.laws[i] for i in idx), rows.measured_s[idx])
    best: tuple[float, MoeParams] | None = None
    for tile in M_TILES:

        def predict(p: dict[str, float], tile: int = tile) -> FloatArray:
            return predict_moe_s(sub, MoeParams(**p, m_tile=tile), flavour, gpu, table)

        x0 = {**_X0, "per_token_s": 1e-9, "per_expert_s": 1e-7}
        res = fit_parameters(predict, x0, _BOUNDS, sub.measured_s, f_scale=0.05)
        if best is None or res.stats.p90_abs_pct < best[0]:
            best = (res.stats.p90_abs_pct, MoeParams(**res.params, m_tile=tile))
    assert best is not None
    params = best[1]
    return params, error_stats(predict_moe_s(rows, params, flavour, gpu, table), rows.measured_s)
