"""Fit the W4A16 MXFP4 MoE entry (:mod:`pdplan.perf.moe_w4a16`) to AIConfigurator's measured gpt-oss MoE layers.

Rows: ``moe_vllm.csv`` with ``moe_dtype`` ``w4a16_mxfp4`` and the OAI Triton kernel vLLM runs for gpt-oss on
Hopper (:data:`W4A16_KERNEL`); each row is one MoE layer for ``num_tokens`` tokens on one GPU holding its
``moe_tp_size``/``moe_ep_size`` shard, routing ``balanced`` or ``power_law_<alpha>``. The formula is the fused-MoE
one (:func:`pdplan.perf.moe.moe_time_s`) with the BF16 tensor peak and :data:`MXFP4_WEIGHT_BYTES` per weight;
the parameters, bounds, tile set and pair rules are the fused-MoE fit's (:mod:`fitting.fit_moe`), so the
entry is the same model with its own numbers.
"""

from __future__ import annotations

import numpy as np

from fitting.fit_moe import BOUNDS as MOE_BOUNDS
from fitting.fit_moe import FIXED as MOE_FIXED
from fitting.fit_moe import TILES as MOE_TILES
from fitting.fit_moe import X0 as MOE_X0
from fitting.fit_moe import MoeRows, row_shapes
from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters, subsample_index
from pdplan.perf.moe import moe_time_s
from pdplan.specs.kernel_table import GpuPeaks, KernelTable, MoeParams
from pdplan.types import FloatArray

W4A16_DTYPE = "w4a16_mxfp4"
W4A16_KERNEL = "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic"
MXFP4_WEIGHT_BYTES = 0.53125
"""4-bit values plus one 8-bit E8M0 scale per 32 (OCP MX spec): (32·4 + 8) / (32·8) bytes per weight."""
MAX_ROWS = 2500


def predict_w4a16_s(rows: MoeRows, params: MoeParams, gpu: GpuPeaks, table: KernelTable) -> FloatArray:
    """Model seconds of every row (gated SwiGLU experts, MXFP4 weights, BF16 compute)."""
    out = np.empty_like(rows.measured_s)
    for idx, shape in row_shapes(rows, MXFP4_WEIGHT_BYTES):
        out[idx] = moe_time_s(shape, "bf16", gpu, table, params)
    return out


def fit_w4a16(rows: MoeRows, gpu: GpuPeaks, table: KernelTable) -> tuple[MoeParams, ErrorStats]:
    """Least-squares fit of the W4A16 entry with the fused-MoE fit's parameters, starting point, bounds, tile sets
    and pair rules (:func:`fitting.fit_moe.fit_moe`); lowest fit-subsample P90 kept; errors on all rows."""
    idx = subsample_index(rows.measured_s.size, MAX_ROWS)
    sub = MoeRows({k: v[idx] for k, v in rows.cols.items()}, tuple(rows.laws[i] for i in idx), rows.measured_s[idx])
    inter = np.ceil(rows.cols["inter_size"] / rows.cols["moe_tp_size"])
    fixed, x0 = dict(MOE_FIXED), dict(MOE_X0)
    if not np.any(np.mod(inter, 16.0) != 0.0):  # no misaligned shard measured
        fixed["unaligned_penalty"] = x0.pop("unaligned_penalty") * 0.0
    best: tuple[float, MoeParams] | None = None
    for tiles in MOE_TILES:
        for all_pairs in (True, False):

            def predict(p: dict[str, float], tiles: dict[str, int] = tiles, all_pairs: bool = all_pairs) -> FloatArray:
                return predict_w4a16_s(sub, MoeParams(**p, **fixed, **tiles, all_pairs=all_pairs), gpu, table)

            res = fit_parameters(predict, x0, MOE_BOUNDS, sub.measured_s, f_scale=0.05)
            if best is None or res.stats.p90_abs_pct < best[0]:
                best = (res.stats.p90_abs_pct, MoeParams(**res.params, **fixed, **tiles, all_pairs=all_pairs))
    assert best is not None
    return best[1], error_stats(predict_w4a16_s(rows, best[1], gpu, table), rows.measured_s)
