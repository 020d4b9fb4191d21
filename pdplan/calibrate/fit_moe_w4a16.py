"""Fit the W4A16 MXFP4 MoE entry (:mod:`pdplan.perf.moe_w4a16`) to AIConfigurator's measured gpt-oss MoE layers.

Rows: ``moe_vllm.csv`` with ``moe_dtype`` ``w4a16_mxfp4`` and the OAI Triton kernel vLLM runs for gpt-oss on
Hopper (:data:`W4A16_KERNEL`); each row is one MoE layer for ``num_tokens`` tokens on one GPU holding its
``moe_tp_size``/``moe_ep_size`` shard, routing ``balanced`` or ``power_law_<alpha>``. The formula is the fused-MoE
one (:func:`pdplan.perf.moe.moe_time_s`) with the BF16 tensor peak and :data:`MXFP4_WEIGHT_BYTES` per weight;
each M tile of :data:`M_TILES` is tried and the lowest P90 on the fit subsample kept (as :mod:`fit_moe` does).
"""

from __future__ import annotations

import numpy as np

from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters, subsample_index
from pdplan.calibrate.fit_moe import MoeRows
from pdplan.perf.kernels import GpuPeaks, KernelTable
from pdplan.perf.moe import moe_shape, moe_time_s
from pdplan.specs.kernel_table import MoeParams
from pdplan.types import FloatArray

W4A16_DTYPE = "w4a16_mxfp4"
W4A16_KERNEL = "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic"
MXFP4_WEIGHT_BYTES = 0.53125
"""4-bit values plus one 8-bit E8M0 scale per 32 (OCP MX spec): (32·4 + 8) / (32·8) bytes per weight."""
M_TILES = (16, 32, 64, 128)
MAX_ROWS = 2500
_X0 = {"peak_fraction": 0.5, "m0_tokens": 8.0, "memory_fraction": 0.7, "overhead_s": 3e-5, "smooth_q": 4.0}
_BOUNDS = {
    "peak_fraction": (0.05, 1.0),
    "m0_tokens": (0.01, 512.0),
    "memory_fraction": (0.1, 1.0),
    "overhead_s": (1e-7, 1e-3),
    "smooth_q": (1.0, 16.0),
    "per_token_s": (1e-12, 1e-6),
    "per_expert_s": (1e-10, 1e-4),
}


def predict_w4a16_s(rows: MoeRows, params: MoeParams, gpu: GpuPeaks, table: KernelTable) -> FloatArray:
    """Model seconds of every row (gated SwiGLU experts, MXFP4 weights, BF16 compute)."""
    c = rows.cols
    out = np.empty_like(rows.measured_s)
    keys: dict[tuple[float, ...], list[int]] = {}
    for i, law in enumerate(rows.laws):
        key = (c["hidden_size"][i], c["inter_size"][i], c["topk"][i], c["num_experts"][i], hash(law))
        keys.setdefault(key, []).append(i)
    for (h, inter, k, e, _), members in keys.items():
        idx = np.array(members)
        shape = moe_shape(
            c["num_tokens"][idx],
            h,
            inter,
            int(e),
            int(k),
            ep=c["moe_ep_size"][idx],
            moe_tp=c["moe_tp_size"][idx],
            weight_bytes=MXFP4_WEIGHT_BYTES,
            law=rows.laws[members[0]],
        )
        out[idx] = moe_time_s(shape, "bf16", gpu, table, params)
    return out


def fit_w4a16(rows: MoeRows, gpu: GpuPeaks, table: KernelTable) -> tuple[MoeParams, ErrorStats]:
    """Least-squares fit of the W4A16 entry (each M tile tried; lowest fit-subsample P90 kept); errors on all rows."""
    idx = subsample_index(rows.measured_s.size, MAX_ROWS)
    sub = MoeRows({k: v[idx] for k, v in rows.cols.items()}, tuple(rows.laws[i] for i in idx), rows.measured_s[idx])
    best: tuple[float, MoeParams] | None = None
    for tile in M_TILES:

        def predict(p: dict[str, float], tile: int = tile) -> FloatArray:
            return predict_w4a16_s(sub, MoeParams(**p, m_tile=tile), gpu, table)

        res = fit_parameters(predict, {**_X0, "per_token_s": 1e-9, "per_expert_s": 1e-7}, _BOUNDS, sub.measured_s)
        if best is None or res.stats.p90_abs_pct < best[0]:
            best = (res.stats.p90_abs_pct, MoeParams(**res.params, m_tile=tile))
    assert best is not None
    return best[1], error_stats(predict_w4a16_s(rows, best[1], gpu, table), rows.measured_s)
