"""CTA (thread-block) work of tiled attention kernels: tile padding, per-CTA cost, critical path, split-KV.

A FlashAttention-style kernel launches one CTA per (sequence, head group, query tile) and each CTA walks
the KV blocks its queries attend to; the GPU runs sm_count·ctas_per_sm of them at once (slots P).
Decode CTAs are equally long, so their makespan is about C/P waves of one CTA time τ (at least one
wave; exact ceil(C/P) steps fit the kernels no better and would break the optimiser's interpolated
screen of decode steps over batch). Causal
prefill CTAs are not (a query tile walks the blocks up to its last token): their time lies between
Brent's bounds max(W/P, T∞) <= T <= W/P + T∞ (work W over P slots, T∞ the longest CTA), and the model
takes T = max(W/P, T∞) + λ·min(W/P, T∞) with the fitted λ = ``span_exposed`` in [0, 1]. Every count
is a ceil() of the problem size, so each term is non-decreasing in batch, length and heads. The
fields are documented on :class:`pdplan.specs.kernel_table.Tiling` and its subclasses.
"""

from __future__ import annotations

import numpy as np

from pdplan.errors import SpecError
from pdplan.specs.kernel_attention import DecodeTiling, PrefillTiling
from pdplan.specs.kernel_table import GpuPeaks, KernelTable
from pdplan.types import FloatArray


def sm_count(gpu: GpuPeaks, table: KernelTable) -> float:
    """SMs of the GPU: its own ``sm_count`` if it has one, else the table's (the GPU it describes)."""
    own = getattr(gpu, "sm_count", None)
    count = own if own else table.sm_count
    if not count:
        raise SpecError(
            f"kernel table for {table.gpu!r} is tiled but neither the GPU {gpu.name!r} nor the table gives sm_count",
            field="sm_count",
        )
    return float(count)


def prefill_cta_s(
    b: FloatArray,
    s: FloatArray,
    h: FloatArray,
    kv: FloatArray,
    d: FloatArray,
    rate: FloatArray,
    t: PrefillTiling,
    sms: float,
) -> FloatArray:
    """Seconds of causal prefill CTAs at ``rate`` FLOP/s (peak·efficiency): W/P and T∞ combined.

    Rows: a CTA holds tile_q rows of g' = h/kv packed heads (g' = 1 unpacked; a one-token prompt is
    always packed, it takes the decode-style path: FlashAttention-2 ``seqlenq_ngroups_swapped``).
    Units U = b·h/g', query tiles n_q = ceil(s·g'/tile_q), KV blocks n_kv = ceil(s/tile_kv),
    CTAs C = U·n_q. Causal: query tile i walks the KV blocks up to its last token, on average
    (n_kv + 1)/2, so the (tile, block) pairs are C·(n_kv + 1)/2, each 4·tile_q·tile_kv·d FLOPs
    (QKᵀ and PV over the padded tile; diagonal blocks are computed whole and masked):
    W/P = C·(n_kv + 1)/2 · t_blk + C·cta_overhead / slots, t_blk = 4·tile_q·tile_kv·d / rate.
    T∞ = cta_overhead + n_kv · t_blk · sm_count (the last query tile walks every block on one SM).
    For large s the pairs tend to b·h·s²/(2·tile_q·tile_kv): W/P → F/rate, the untiled FLOPs.
    """
    g = h / kv
    packed = g if t.pack_gqa else np.where(s <= 1.0, g, 1.0)
    ctas = b * h / packed * np.ceil(s * packed / t.tile_q)
    n_kv = np.ceil(s / t.tile_kv)
    t_blk = 4.0 * t.tile_q * t.tile_kv * d / rate
    work = ctas * (0.5 * (n_kv + 1.0) * t_blk + t.cta_overhead_s / (sms * t.ctas_per_sm))
    return brent(work, t.cta_overhead_s + n_kv * t_blk * sms, t.span_exposed)


def brent(work: FloatArray, span: FloatArray, exposed: float) -> FloatArray:
    """max(W/P, T∞) + λ·min(W/P, T∞): Brent's lower bound at λ = 0, upper bound W/P + T∞ at λ = 1."""
    result: FloatArray = np.maximum(work, span) + exposed * np.minimum(work, span)
    return result


def decode_cta_s(
    b: FloatArray,
    c: FloatArray,
    h: FloatArray,
    kv: FloatArray,
    d: FloatArray,
    kv_bytes: float,
    t: DecodeTiling,
    sms: float,
) -> FloatArray:
    """Seconds of the CTA waves of one split-KV decode step (joins compute; memory is separate).

    Base CTAs B = b·kv·ceil(g/tile_q) with packed GQA rows (b·h unpacked), n_kv = ceil(c/tile_kv),
    slots P = sm_count·ctas_per_sm, t_blk = tile_kv·2·d·kv_bytes / cta_bytes_per_s (one CTA
    streaming one K+V block; a partial block costs a whole one: the padding measured best on
    H100). All CTAs of a step are equally long, so their makespan is max(C/P, 1) waves of τ.
    Unsplit: C = B, τ = cta + n_kv·t_blk. Split over
    S = clip(floor(P/B), 1, min(n_kv, max_splits)) CTAs per sequence (one wave, C = B·S <= P):
    τ_S = cta + ceil(n_kv/S)·t_blk, plus split_combine (the reduction kernel). The kernel's heuristic
    aims at the faster, so the time is the minimum of the two (a minimum of non-decreasing terms
    stays non-decreasing); without ``split_mha`` plain MHA (g = 1) never splits.
    """
    g = h / kv
    base = b * kv * np.ceil(g / t.tile_q) if t.pack_gqa else b * h
    n_kv = np.ceil(c / t.tile_kv)
    slots = sms * t.ctas_per_sm
    t_blk = t.tile_kv * 2.0 * d * kv_bytes / t.cta_bytes_per_s
    unsplit = np.maximum(base / slots, 1.0) * (t.cta_overhead_s + n_kv * t_blk)
    splits = np.clip(np.floor(slots / base), 1.0, np.minimum(n_kv, t.max_splits))
    split = np.maximum(base * splits / slots, 1.0) * (t.cta_overhead_s + np.ceil(n_kv / splits) * t_blk)
    best = np.minimum(unsplit, split + t.split_combine_s)
    result: FloatArray = best if t.split_mha else np.where(g > 1.0, best, unsplit)
    return result
