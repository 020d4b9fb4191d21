"""Two-batch overlap (TBO): an expert-parallel step run as two micro-batches, each one's all-to-all hidden behind the
other's compute (SGLang ``--enable-two-batch-overlap``, LMSYS large-scale EP blog 2025-05-05; vLLM's dual-batch
overlap is the same idea).

**Derivation.** A pass of L layers, n of them MoE layers with a dispatch + combine all-to-all. Split the batch in two
halves A and B. Per layer a half needs compute c (every kernel of the layer, priced on half the batch: the weights
are still read once per half, so 2c exceeds the whole batch's compute when the step is memory-bound) and, on MoE
layers, communication a (the all-to-all of half the tokens). Compute (SMs) and communication (the NICs / NVLink
copy engines) are two resources; each half alternates compute and communication, layer after layer. Two chains on
two resources: the compute resource must do 2c per layer and the link 2a per MoE layer, and when A communicates B
computes. In steady state each MoE layer costs 2·max(c, a), each dense layer 2c, and the pipeline fills and
drains once per pass: the first half's first compute (or the last half's last communication) has nothing to
overlap, min(c, a). So

    T_TBO = 2·[(L − n)·c + n·max(c, a)] + min(c, a),      c = C_half / L,  a = A_half / n,

with C_half and A_half the half batch's whole-pass compute and all-to-all times. Without TBO the pass takes
C + A (whole batch). TBO wins when the all-to-all is large against the weight-bound part of compute (big batches),
and loses at small batches where 2·C_half ≈ 2·C (the blog: decode −27 % at 32 tokens per GPU, +25.5 % at 256).

Assumptions: compute and communication do not slow each other (DeepEP's normal mode occupies 20 SMs while it runs,
not modelled), and the per-layer work is uniform over layers (c = C_half/L).
"""

from __future__ import annotations

import numpy as np

from pdplan.types import ArrayLike, FloatArray


def tbo_time_s(half_compute_s: ArrayLike, half_comm_s: ArrayLike, num_layers: float, moe_layers: float) -> FloatArray:
    """T_TBO = 2·[(L − n)·c + n·max(c, a)] + min(c, a), c = C_half/L, a = A_half/n (module docstring).

    Example: L = 61, n = 58, C_half = 30.5 ms, A_half = 29 ms: c = 0.5 ms, a = 0.5 ms, T = 2·(3·0.5 + 58·0.5) + 0.5
    = 61.5 ms against C + A = 2·30.5 + 2·29 = 119 ms without overlap (same per-half work)."""
    compute = np.asarray(half_compute_s, dtype=np.float64)
    comm = np.asarray(half_comm_s, dtype=np.float64)
    c = compute / num_layers
    a = comm / max(moe_layers, 1.0)
    total = 2.0 * ((num_layers - moe_layers) * c + moe_layers * np.maximum(c, a)) + np.minimum(c, a)
    return np.asarray(np.where(comm > 0.0, total, 2.0 * compute), dtype=np.float64)


def exposed_comm_s(
    half_compute_s: ArrayLike, half_comm_s: ArrayLike, num_layers: float, moe_layers: float
) -> FloatArray:
    """The all-to-all time TBO leaves on the critical path: T_TBO − 2·C_half."""
    total = tbo_time_s(half_compute_s, half_comm_s, num_layers, moe_layers)
    return np.asarray(total - 2.0 * np.asarray(half_compute_s, dtype=np.float64), dtype=np.float64)
