"""Attention entries of the kernel table: the FlashAttention-style prefill and decode cost parameters and their
CTA tiling (formulas in :mod:`pdplan.perf.kernels` and :mod:`pdplan.perf.tiling`).

Split out of :mod:`pdplan.specs.kernel_table`, whose :class:`~pdplan.specs.kernel_table.KernelTable` holds them.
"""

from typing import Annotated

from pydantic import Field

from pdplan.specs.base import FrozenModel
from pdplan.specs.kernel_fields import (
    Exponent,
    Fraction,
    HeadDimFactor,
    L2Mode,
    NonNegative,
    Positive,
    Speedup,
    TileSize,
)


class Tiling(FrozenModel):
    """How an attention kernel cuts its work into CTAs (thread blocks); null = untiled smooth model.

    FlashAttention-style kernels give each CTA ``tile_q`` query rows and loop over the keys in
    blocks of ``tile_kv``. With ``pack_gqa`` the query heads sharing one KV head are packed into the
    rows (FlashAttention-3 always does this for variable-length batches, hopper/heuristics.h;
    FlashInfer too), so a CTA holds tile_q/g tokens of all g = heads/kv_heads heads; without it a CTA
    holds tile_q tokens of one head. ``ctas_per_sm`` CTAs run at once on one SM (occupancy; the
    machine has sm_count·ctas_per_sm slots). ``cta_overhead_s`` is the fixed time a CTA holds a
    slot besides its tile work (launch, prologue, Q load, epilogue, O store).
    """

    tile_q: TileSize
    tile_kv: TileSize
    pack_gqa: bool
    ctas_per_sm: Annotated[int, Field(strict=True, ge=1, le=32)] = 1
    cta_overhead_s: NonNegative = 0.0


class PrefillTiling(Tiling):
    """Causal prefill tiling: query tiles walk different numbers of KV blocks.

    ``span_exposed`` λ places the time of the CTAs between Brent's bounds on the work W/P and the
    longest CTA T∞: max(W/P, T∞) + λ·min(W/P, T∞); λ = 1 is the greedy upper bound (the long CTAs
    start late), λ → 0 a scheduler that starts the longest first (FlashAttention-3's persistent
    LPT scheduler).
    """

    span_exposed: Annotated[float, Field(ge=0.0, le=1.0)] = 1.0


class DecodeTiling(Tiling):
    """Decode (split-KV) tiling: one CTA per (sequence, KV head, row tile, KV split).

    All CTAs of a step are equally long, so their makespan is a wave count, C/P waves (no λ as for
    prefill). The kernel may split a sequence's KV loop over ``splits`` CTAs to fill the machine, then runs a
    combine (reduction) kernel, ``split_combine_s``. ``cta_bytes_per_s``: how fast one CTA streams its
    KV share alone (the latency-bound critical path of a long, unsplit sequence).
    ``split_mha`` False: the kernel splits only when heads are grouped (FlashAttention-2 takes its
    split-KV decode path only for GQA, seqlen_q·g packed rows; plain MHA runs one CTA per head).
    """

    cta_bytes_per_s: Positive
    split_combine_s: NonNegative = 0.0
    split_mha: bool = True
    max_splits: Annotated[int, Field(strict=True, ge=1, le=1024)] = 128


class PrefillAttentionParams(FrozenModel):
    """Causal prefill attention (FlashAttention-style), per GPU after TP (heads = local heads).

    FLOPs: per head, QKᵀ and PV each cost 2·d per (query, key) pair, and a causal prompt of s tokens
    has s(s+1)/2 pairs, so F = 2·b·h·d·s·(s+1). Untiled (``tiling`` null): compute_s =
    2·d·(s+1)·(s+s0)·(b·h + w0) / (bf16_peak·compute_fraction), i.e. F with ramps (s+s0)/s and
    (b·h+w0)/(b·h). Tiled: F is replaced by the tile-padded work (tile-padded FLOPs, CTA overhead and
    the critical path, see :func:`pdplan.perf.kernels.prefill_attention_time_s`), with the same ramps.
    memory_s = b·s·(2h·2 + ``kv_reread``·2·kv·kv_bytes)·d / (HBM·memory_fraction)
    (Q and O in bf16; K and V in the cache dtype, fetched ``kv_reread`` times on average because CTAs
    of one KV head that do not run together miss in L2).
    ``head_dim_efficiency`` {head_dim: factor in [0.5, 1]} multiplies compute_fraction (kernels are
    tuned per head size), interpolated log-linearly in head_dim and clamped at the ends; a factor
    ratio <= 2 per octave keeps time non-decreasing in head_dim. Empty = 1 everywhere.
    ``per_sequence_s``·b is added to the overhead (per-prompt scheduling/varlen bookkeeping).
    """

    compute_fraction: Fraction
    s0_tokens: NonNegative
    w0_batch_heads: NonNegative
    memory_fraction: Fraction
    overhead_s: NonNegative
    smooth_q: Exponent
    head_dim_efficiency: dict[int, HeadDimFactor] = Field(default_factory=dict)
    per_sequence_s: NonNegative = 0.0
    kv_reread: Annotated[float, Field(ge=1.0, le=256.0)] = 1.0
    tiling: PrefillTiling | None = None


class DecodeAttentionParams(FrozenModel):
    """One decode step of attention over a KV cache of ``context_len`` tokens.

    KV bytes = b·c·kv·d·2·kv_bytes (K and V). memory_s = 2·d·kv_bytes·(c+c0)·(b·kv + w0) /
    (HBM·memory_fraction): reads ramp with context (c0) and with b·kv parallelism (w0).
    compute_s = 4·b·h·c·d / (bf16_peak·compute_fraction·f(head_dim)), f as in
    :class:`PrefillAttentionParams`. With ``tiling`` the CTA overheads, the critical path and the
    split-KV choice join compute (see :func:`pdplan.perf.kernels.decode_attention_time_s`), and f
    divides the whole kernel — memory_s and the per-CTA stream rate too (f <= 1 only slows it).
    memory_fraction <= 1 keeps the step no faster than reading the KV once at peak bandwidth, except
    with ``warm_l2=True`` (benchmarks only): then KV bytes stream ``l2_speedup``× faster as for
    :class:`GemmParams` (``l2_bytes``, ``l2_mode``; a small cache stays in L2 between back-to-back
    repeats; in serving each layer reads a different cache).
    """

    memory_fraction: Fraction
    c0_tokens: NonNegative
    w0_seq_heads: NonNegative
    compute_fraction: Fraction
    overhead_s: NonNegative
    smooth_q: Exponent
    head_dim_efficiency: dict[int, HeadDimFactor] = Field(default_factory=dict)
    l2_bytes: NonNegative = 0.0
    l2_speedup: Speedup = 1.0
    l2_mode: L2Mode = "first"
    tiling: DecodeTiling | None = None
