"""Two-batch overlap (TBO): an expert-parallel step run as two micro-batches, each one's all-to-all hidden behind the
other's compute (SGLang ``--enable-two-batch-overlap``, LMSYS large-scale EP blog 2025-05-05; vLLM's dual-batch
overlap is the same idea).

**Derivation.** A pass of L layers, n of them MoE layers with a dispatch + combine all-to-all. Split the batch in two
halves A and B. Per layer a half needs compute c (every kernel of the layer, priced on half the batch: the weights
are still read once per half, so 2c exceeds the whole batch's compute when the step is memory-bound) and, on MoE
layers, communication a (the all-to-all of half the tokens). Compute (SMs) and communication (the NICs / NVLink
copy engines) are two resources; each half alternates compute and communication, layer after layer. Two chains on
two resources: the compute resource must do 2c per layer and the link 2a per MoE layer, and when A communicates B
computes. In steady state each MoE layer costs 2·max(c, a) (σ = 0 below), each dense layer 2c, and the pipeline
fills and drains once per pass: the first half's first compute (or the last half's last communication) has nothing to
overlap, min(c, a). So

    T_TBO = 2·[(L − n)·c + n·max(a, c + σ·a)] + min(c, a),      c = C_half / L,  a = A_half / n,

with C_half and A_half the half batch's whole-pass compute and all-to-all times. Without TBO the pass takes
C + A (whole batch). TBO wins when the all-to-all is large against the weight-bound part of compute (big batches),
and loses at small batches where 2·C_half ≈ 2·C (the blog: decode −27 % at 32 tokens per GPU, +25.5 % at 256).

**SM split (prefill).** DeepEP's normal-mode kernels are persistent kernels on ``s`` of the GPU's S SMs for as long
as a transfer runs (``Buffer.num_sms = 20`` by default; SGLang's normal dispatcher takes DeepEP's default config,
``pdplan/data/two_batch_overlap.yaml``), so the other half's compute runs on S − s SMs while the transfer is in
flight. With σ = s/S and compute work c (full-GPU seconds) overlapping a transfer of a, the compute progresses at
1 − σ for the first a seconds: a slot lasts a when c ≤ (1 − σ)·a, else a + c − (1 − σ)·a = c + σ·a, i.e.
``max(a, c + σ·a)`` per MoE layer and half (σ = 0: ``max(a, c)``). This takes compute as SM-throughput-bound
(prefill GEMMs and attention at thousands of tokens are).

Assumptions: the transfer runs at its own speed beside compute (no HBM or NVLink contention), and the per-layer work
is uniform over layers (c = C_half/L). This two-resource form is the prefill model (SGLang's prefill TBO runs
DeepEP normal mode on its own stream, so the two halves' transfers may share the links); it is the best case, where
a half's all-to-all may hide behind all of the other half's layer compute.

**Decode: the staged form** (:func:`staged_exposed_comm_s`). SGLang's decode TBO runs both micro-batches on one CUDA
stream, their stages interleaved two apart, with DeepEP's low-latency kernels in hook mode: a half's dispatch is
hidden only by the compute that runs between its send and its receive (its own shared experts and the other half's
attention preparation), its combine only by the other half's attention core, o_proj and router
(``pdplan/data/two_batch_overlap.yaml``, from SGLang's ``operations_strategy.py``). Per MoE layer and half the
stream stalls ``max(0, d − W_d) + max(0, k − W_k)`` (d, k: the half's dispatch and combine; W_d, W_k: the
windows), and the step is

    T_TBO = 2·C_half + 2·n·[max(0, d − W_d) + max(0, k − W_k)].

The transfers of the two halves never overlap in this schedule (each is in flight only inside its own window), so
the link is not shared. Not modelled: the GPU time of the send/receive kernels themselves, and that SGLang runs the
first dense layers on the whole batch outside TBO (pdplan runs every layer as two halves).

The SM count and the windows are data (``pdplan/data/two_batch_overlap.yaml``), passed to the roofline as a
:class:`~pdplan.specs.perf_data.TwoBatchOverlapSchedule`; this module reads no file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from pdplan.types import ArrayLike, FloatArray


def tbo_time_s(
    half_compute_s: ArrayLike,
    half_comm_s: ArrayLike,
    num_layers: float,
    moe_layers: float,
    comm_sm_share: float = 0.0,
) -> FloatArray:
    """T_TBO = 2·[(L − n)·c + n·max(a, c + σ·a)] + min(c, a), c = C_half/L, a = A_half/n, σ = ``comm_sm_share``
    (module docstring).

    Example: L = 61, n = 58, C_half = 30.5 ms, A_half = 29 ms, σ = 0: c = 0.5 ms, a = 0.5 ms, T = 2·(3·0.5 +
    58·0.5) + 0.5 = 61.5 ms against C + A = 2·30.5 + 2·29 = 119 ms without overlap (same per-half work); with
    σ = 20/132 each MoE slot is 0.5 + 0.0758 ms: T = 70.3 ms."""
    compute = np.asarray(half_compute_s, dtype=np.float64)
    comm = np.asarray(half_comm_s, dtype=np.float64)
    c = compute / num_layers
    a = comm / max(moe_layers, 1.0)
    slot = np.maximum(a, c + comm_sm_share * a)
    total = 2.0 * ((num_layers - moe_layers) * c + moe_layers * slot) + np.minimum(c, a)
    return np.asarray(np.where(comm > 0.0, total, 2.0 * compute), dtype=np.float64)


def exposed_comm_s(
    half_compute_s: ArrayLike,
    half_comm_s: ArrayLike,
    num_layers: float,
    moe_layers: float,
    comm_sm_share: float = 0.0,
) -> FloatArray:
    """The time TBO adds to the critical path over the two halves' compute, T_TBO − 2·C_half: the exposed all-to-all
    and, with ``comm_sm_share``, the compute slowed by the SMs the transfers hold."""
    total = tbo_time_s(half_compute_s, half_comm_s, num_layers, moe_layers, comm_sm_share)
    return np.asarray(total - 2.0 * np.asarray(half_compute_s, dtype=np.float64), dtype=np.float64)


def window_s(per_layer_s: Mapping[str, FloatArray], shares: Mapping[str, float]) -> FloatArray:
    """Compute time of one window: Σ share × the op's per-layer time (ops the pass lacks count nothing).

    Example: {attn.core: 160 µs, attn.o_proj: 90 µs, norm: 10 µs} with shares {attn.core: 1, attn.o_proj: 1,
    norm: 0.5} → 255 µs."""
    terms: Iterable[FloatArray] = (share * per_layer_s[name] for name, share in shares.items() if name in per_layer_s)
    return np.asarray(sum(terms, np.zeros(())), dtype=np.float64)


def staged_exposed_comm_s(
    dispatch_s: ArrayLike,
    combine_s: ArrayLike,
    dispatch_window_s: ArrayLike,
    combine_window_s: ArrayLike,
    moe_layers: float,
) -> FloatArray:
    """The all-to-all time left on the stream by decode TBO (module docstring, staged form):
    ``2·n·[max(0, d − W_d) + max(0, k − W_k)]``, all per MoE layer and half batch.

    Example: n = 58, d = 184 µs, W_d = 126 µs, k = 346 µs, W_k = 283 µs: 2·58·(58 + 63) µs = 14.0 ms."""
    d, k, wd, wk = (
        np.asarray(x, dtype=np.float64) for x in (dispatch_s, combine_s, dispatch_window_s, combine_window_s)
    )
    stall = np.maximum(d - wd, 0.0) + np.maximum(k - wk, 0.0)
    return np.asarray(2.0 * moe_layers * stall, dtype=np.float64)
