"""Per-role performance characteristics from the perf model: prefill S(l), decode τ(B, K), memory.

* **Prefill service** (docs/queueing.md §1.1, §1.2): one prompt at a time (batch 1) on an instance with
  TP = t, PP = p, priced by the roofline (:func:`pdplan.perf.roofline.phase_time`) per input-length
  bin. ``latency_s`` is the pass latency (all stages plus p − 1 hand-offs); ``service_s`` is what
  the FCFS queue sees: the bottleneck stage time, because with p stages p prompts are in flight
  (DistServe's inter-op model waits on D_m ≈ D/2 for p = 2; docs/published_results.md §1.2 (2)). For p = 1
  both are the same. The KV-transfer granularity may add prefill work (``prefill_extra_s``: per-layer
  sync, chunk launches and the chunked re-read of earlier KV; :mod:`pdplan.transfer.kv`), added to both.
* **Decode step** (docs/queueing.md §2.1): the roofline step τ(B, c) for B sequences at mean context c is
  linearised as ``τ = t0 + t1·B + t2·K`` (K = B·c) by a relative least-squares fit (non-negative
  coefficients, :func:`scipy.optimize.nnls`) over the operating range B ∈ [1, B_max] (B_max the seat
  and KV limit) and c ∈ [κ/4, 4κ] around κ, the mean context of an in-flight sequence. The linear
  form is what the closed-form fixed point and the §2.4 TPOT model use; the fit's median and worst
  relative error over that grid are reported as an assumption (typically a few per cent: the
  roofline is memory-bound and nearly linear there). The fit never undercuts the HBM floor (the
  physics invariant of :mod:`pdplan.serving.checks.physics`): ``t2`` is at least the KV read per
  context token at full bandwidth and ``t0 + t1·B`` at least the weight read of B sequences
  (:func:`step_bytes`; a constrained least squares when the plain one breaks it). That binds for
  MoE, whose expert reads saturate in B (Mixtral-8x7B on H100 TP2: at B ≈ 7 the plain fit gave
  10.4 ms, the weights alone take 11.9 ms at 3.35 TB/s, the roofline 16.1 ms): the linear form
  cannot follow that curve, and is kept physically possible rather than close (but see *Concave steps*). With PP = p a
  decode instance runs p
  micro-batches of B/p; a sequence gets one token per pipeline cycle, so
  ``τ(B, K) = p · stage_time(B/p, K/B)``. A model whose every layer is windowed (Mistral-7B v0.1) reads
  min(c, w) tokens per sequence (:mod:`pdplan.perf.ops_attention`), so beyond the window its roofline is flat in c
  and not linear in B·c: its law's K is the windowed context Σ min(c_i, w), the grid's c is capped at w, and the
  queueing model sums the same windowed context (:class:`pdplan.queueing.decode.DecodeWorkload`'s
  ``window_tokens``); κ is then the mean windowed context.
* **Concave steps** (:func:`concave_lines`; issue #23): where the one line errs by more than
  :data:`LINE_SPLIT_REL_ERR` somewhere on the grid, the step is also fitted as the minimum of two lines, each fitted
  the same way (relative least squares, above the HBM floor over the whole range, so their minimum is too) to the
  grid points on its side of a split batch, the split the one whose minimum errs least at its worst; kept where it at
  least halves the worst error. A minimum of lines is concave, as a MoE step is while its expert reads saturate
  (Mixtral-8x7B on H100 TP2 at 700 tokens of context: the one line +68 % at B = 1, −26 % at B = 8, +26 % at B = 101;
  the two lines within 7 % over the grid). The serving models price one line each, and the line a rate runs on is
  the one whose mean-field step is the least there (:mod:`pdplan.serving.decode_lines`, with the derivation).
* **Chunked prefill** (:func:`chunk_price`, Sarathi-Serve token budget C): a chunk step runs the
  decode batch plus up to C prefill tokens through the same GEMMs, so the chunk adds what the
  roofline pass of its tokens costs beyond the weight read and fixed costs the decode step pays
  anyway. Split a batch-1 prefill pass of n tokens into its causal-attention kernels A(n) (op kind
  ``attn_prefill``) and the rest G(n) (GEMMs, norms, all-reduces, embedding, hand-offs). Per chunk
  token ``t_p = (G(C) − G(1))/(C − 1)``: the secant of G between the decode step's one token and a
  full budget, i.e. the price at the chunk size the scheduler runs, taken from the roofline and not
  from the workload's lengths (a fit ``a + b·l + c·l²`` to the workload's own prompt lengths
  degenerates to (S, 0, 0) for one fixed length: chunked prefill came out free). A chunk of c
  tokens after b already prefilled attends to all b + c: causal FLOPs ∝ (b + c)² − b², priced as
  one causal-attention kernel of the same FLOPs, ``A(s_eq)`` at ``s_eq = √(c(2b + c))``; a prompt of
  L tokens runs as ⌈L/C⌉ − 1 full chunks and a last one of ``m_L = L − C(⌈L/C⌉ − 1)`` tokens, so its
  attention is the sum over those chunks (for L ≤ C, A(L)). The last chunk alone (at low load, or
  the chunk that drains the queue) costs ``g(m_L) = G(m_L) − G(1)`` on the GEMM side — less than
  t_p·m_L, because below the GEMM ridge extra tokens ride on the weight read: at λ → 0 a lone prompt
  of L ≤ C tokens then costs t0 + g(L) + A(L), its batch-1 roofline prefill. All evaluated at the
  scheduler's chunk sizes, none fitted: one length gives one exact value. The colocated queue charges neither t_p nor
  g: it prices the prompt tokens at the width of the step they ride in, ``G(N + c) − G(N)`` beside its N decode
  tokens (:mod:`pdplan.queueing.chunk_width`), from the table of G up to the budget that :class:`ChunkPrice` carries
  (``width``); t_p remains the full-chunk figure that reports and the benchmark loop quote.
* **Memory**: :func:`instance_budget` and the instance type :class:`RoleHardware` live in
  :mod:`pdplan.serving.role_hardware` (imported here as well, so ``pdplan.serving.roles`` still names them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdplan.numerics.nnls import nnls
from pdplan.numerics.sorted_stats import median, sorted_unique
from pdplan.perf.op_types import DecodeAttentionOp, GemmOp, LinearAttentionOp, MoeOp, PassShape
from pdplan.perf.ops import forward_ops
from pdplan.perf.ops_moe import parallel_fields
from pdplan.perf.roofline import PhaseTime, phase_time
from pdplan.queueing import LinearStepTime
from pdplan.queueing.chunk_width import GemmWidth, lower_convex_hull
from pdplan.serving.role_hardware import RoleHardware, instance_budget
from pdplan.serving.role_memo import HardwareMemo, arguments_key
from pdplan.types import FloatArray

_FIT_BATCHES = 12
_FIT_CONTEXT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True, slots=True)
class PrefillPerf:
    """Batch-1 prefill per input-length bin (arrays ``[K]``, seconds)."""

    input_tokens: FloatArray
    latency_s: FloatArray
    service_s: FloatArray


_PASSES: HardwareMemo[PhaseTime] = HardwareMemo()
"""The prefill passes priced, by instance type and shape (:mod:`pdplan.serving.role_memo`)."""


def prefill_pass_time(hw: RoleHardware, *, batch: FloatArray | float, tokens: FloatArray, detail: bool) -> PhaseTime:
    """The roofline prefill pass of ``batch`` prompts × ``tokens`` on one instance of ``hw`` (its TP, PP, DP, EP,
    precision and ZeRO-Prefill gather); kept by value for the process (:mod:`pdplan.serving.role_memo`: its arrays
    read-only)."""
    key = arguments_key(batch, tokens, detail)
    return _PASSES.get(hw, key, lambda: _pass_time(hw, batch, tokens, detail))


def _pass_time(hw: RoleHardware, batch: FloatArray | float, tokens: FloatArray, detail: bool) -> PhaseTime:
    return phase_time(
        hw.model,
        hw.gpu,
        hw.table,
        phase="prefill",
        batch=batch,
        tokens=tokens,
        tp=hw.tp,
        pp=hw.pp,
        precision=hw.precision,
        detail=detail,
        dp=hw.dp,
        ep=hw.ep,
        expert_gather=hw.expert_gather,
        routing=hw.prefill_routing,
        **hw.moe_options,  # type: ignore[arg-type]
    )


def _one_prompt(hw: RoleHardware, tokens: FloatArray, *, detail: bool = True) -> PhaseTime:
    """The roofline prefill of one prompt of ``tokens`` tokens on ``hw`` (per element of ``tokens``)."""
    # one prompt on each DP rank (each rank is a server of the prefill pool)
    return prefill_pass_time(hw, batch=float(hw.dp), tokens=tokens, detail=detail)


def prefill_perf(hw: RoleHardware, input_tokens: FloatArray) -> PrefillPerf:
    """Roofline latency and queue service time of one prompt per bin (module docstring)."""
    pt = _one_prompt(hw, input_tokens)
    latency = np.broadcast_to(pt.time_s, input_tokens.shape).astype(np.float64)
    stage = np.broadcast_to(pt.stage_time_s, input_tokens.shape).astype(np.float64)
    return PrefillPerf(input_tokens, latency, stage)


def cached_prefill_perf(hw: RoleHardware, input_tokens: FloatArray, cached_tokens: FloatArray) -> PrefillPerf:
    """One prompt of ``input_tokens`` whose first ``cached_tokens`` come from a prefix cache: only the
    ``m = L − h`` new tokens are computed (at least one: engines recompute the last prompt token to sample from it),
    their attention over the whole context. The GEMM side is that of an m-token pass, ``G(m)``; causal attention of
    m queries after h cached keys has ``m(2h + m)/2`` query-key pairs, those of a from-scratch prompt of
    ``√(m(2h + m))`` tokens, so it costs ``A(√(m(2h + m)))`` (:func:`prefill_split_s`; the chunked-prefill price of
    :func:`chunk_price` uses the same equivalence). With pipeline parallelism the service (stage) time keeps the
    ratio stage / pass of the m-token pass. Loading the cached KV is the tier's (:mod:`pdplan.cache.tiers`), not
    priced here; with ``h = 0`` the figures are a full prefill's."""
    lens = np.maximum(np.asarray(input_tokens, dtype=np.float64), 1.0)
    cached = np.clip(np.asarray(cached_tokens, dtype=np.float64), 0.0, lens - 1.0)
    new = lens - cached
    equivalent = np.sqrt(new * (2.0 * cached + new))
    flat = np.concatenate((new.ravel(), equivalent.ravel()))
    gemm, attn = prefill_split_s(hw, flat)
    latency = gemm[: new.size].reshape(new.shape) + attn[new.size :].reshape(new.shape)
    if hw.pp == 1:  # one stage: the stage time is the pass (no hand-off), a ratio of exactly 1
        return PrefillPerf(lens, np.asarray(latency, dtype=np.float64), np.array(latency, dtype=np.float64))
    full = _one_prompt(hw, new.ravel(), detail=False)
    ratio = np.broadcast_to(full.stage_time_s / np.maximum(full.time_s, 1e-300), (new.size,)).reshape(new.shape)
    return PrefillPerf(lens, np.asarray(latency, dtype=np.float64), np.asarray(latency * ratio, dtype=np.float64))


_TABLE_TOKENS = 256
_TABLE_PROMPTS = 64


@dataclass(frozen=True, slots=True)
class PrefillBatchTime:
    """Roofline stage time of one prefill batch as a function of ``(Σl, Σl²)`` (vectorised).

    A batch of prompts l_i costs what the roofline (:func:`pdplan.perf.roofline.phase_time`) gives
    for ``B_eq = (Σl)²/Σl²`` prompts of ``l_eq = Σl²/Σl`` tokens: the same token count Σl (GEMMs,
    norms, all-reduces) and the same causal-attention work Σl² (``B_eq·l_eq = Σl``,
    ``B_eq·l_eq² = Σl²``); one prompt gives exactly its batch-1 time. The roofline is tabulated
    once on a log grid of Σl (``_TABLE_TOKENS`` points up to ``max_tokens``) × B_eq
    (``_TABLE_PROMPTS`` points) and read by bilinear interpolation in (log Σl, log B_eq): against
    direct calls the P99 relative error is < 1 %, the worst a few per cent next to the roofline's
    tile-wave steps (tests/unit/test_batched_prefill.py). ``extra_s`` is added
    once per batch (the transfer granularity's per-pass prefill work, e.g. per-layer syncs). The
    simulator and the closed form both price batches with this one function.
    """

    log_tokens: FloatArray
    log_prompts: FloatArray
    table_s: FloatArray
    extra_s: float

    def __call__(self, tokens: FloatArray, sum_sq_tokens: FloatArray) -> FloatArray:
        """Batch time (s) for Σl = ``tokens`` and Σl² = ``sum_sq_tokens`` (broadcast)."""
        tok = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
        sq = np.clip(np.asarray(sum_sq_tokens, dtype=np.float64), tok, tok**2)
        x = _grid_pos(np.log(tok), self.log_tokens)
        y = _grid_pos(np.log(tok**2 / sq), self.log_prompts)
        i, j = np.floor(x).astype(np.intp), np.floor(y).astype(np.intp)
        fx, fy = x - i, y - j
        t = self.table_s
        out = (
            (1 - fx) * (1 - fy) * t[i, j]
            + fx * (1 - fy) * t[i + 1, j]
            + (1 - fx) * fy * t[i, j + 1]
            + fx * fy * t[i + 1, j + 1]
        )
        return np.asarray(out + self.extra_s, dtype=np.float64)

    def single_s(self, tokens: FloatArray) -> FloatArray:
        """One prompt of ``tokens`` tokens alone."""
        tok = np.asarray(tokens, dtype=np.float64)
        return self(tok, tok**2)


def _grid_pos(value: FloatArray, grid: FloatArray) -> FloatArray:
    """Fractional index of ``value`` on a uniform ``grid`` (clamped to [0, n − 1 − 1e-9])."""
    step = grid[1] - grid[0]
    return np.asarray(np.clip((value - grid[0]) / step, 0.0, grid.size - 1 - 1e-9), dtype=np.float64)


def prefill_batch_time(hw: RoleHardware, max_tokens: float, extra_s: float) -> PrefillBatchTime:
    """Tabulate the roofline batch *stage* time up to ``max_tokens`` per batch (class docstring)."""
    log_tok = np.linspace(0.0, np.log(max(max_tokens, 2.0) * 1.01), _TABLE_TOKENS)
    log_b = np.linspace(0.0, log_tok[-1], _TABLE_PROMPTS)
    tok, prompts = np.exp(log_tok)[:, None], np.exp(log_b)[None, :]
    per_prompt = np.maximum(tok / prompts, 1.0)
    # the same batch per DP rank
    pt = prefill_pass_time(hw, batch=hw.dp * tok / per_prompt, tokens=per_prompt, detail=False)
    table = np.broadcast_to(pt.stage_time_s, per_prompt.shape).astype(np.float64)
    return PrefillBatchTime(log_tok, log_b, table, float(extra_s))


@dataclass(frozen=True, slots=True)
class ChunkPrice:
    """Roofline price of chunked prefill per prompt length (module docstring): ``s_per_token`` = t_p,
    ``attention_s`` = the attention of the prompt's chunks, ``drain_s`` = g(m_L) of its last chunk, ``width`` = G(n)
    tabulated up to the budget, for the prompt tokens priced at the step's width (:mod:`pdplan.queueing.chunk_width`:
    what the colocated queue charges; t_p and g(m_L) are the full-chunk secant and the lone last chunk of a step with
    one decode token)."""

    budget_tokens: float
    s_per_token: float
    attention_s: FloatArray
    drain_s: FloatArray
    width: GemmWidth


_WIDTH_POINTS = 2048
"""Token counts 1..C, geometric and rounded to whole tokens (every token up to about 600 at C = 2,048, then steps under
0.4 %), on which :class:`~pdplan.queueing.chunk_width.GemmWidth` tabulates G(n) before taking its lower convex envelope:
dense enough that the envelope runs through the roofline's full tile waves (G steps by up to 45 % at a 256-token
wave edge, Llama-2-70B TP2 on H100), not through whichever points a sparse grid happens to land on (about 1 ms for
the roofline and 1 ms for the envelope)."""


def _width_grid(budget: float) -> FloatArray:
    """Token counts for G(n): 1..``budget`` geometric, the budget included (a step runs at most the budget)."""
    return sorted_unique(np.concatenate((np.round(np.geomspace(1.0, budget, _WIDTH_POINTS)), [budget])))


def _gemm_side(
    hw: RoleHardware, budget: float, last: FloatArray, split: PrefillSplit
) -> tuple[float, FloatArray, GemmWidth]:
    """t_p, g(m_L) = G(m_L) − G(1) and the table of G(n) up to the budget, from one call of ``split`` (the
    roofline's :func:`prefill_split_s`, or one attention-DP rank's)."""
    grid = _width_grid(budget)
    g, _ = split(hw, np.concatenate(([1.0, budget], last, grid)))
    t_p = max(float(g[1] - g[0]), 0.0) / (budget - 1.0)
    table = lower_convex_hull(grid, g[2 + last.size :])  # tile waves smoothed (pdplan.queueing.chunk_width)
    return t_p, np.maximum(g[2 : 2 + last.size] - g[0], 0.0), GemmWidth(grid, table)


PrefillSplit = Callable[[RoleHardware, FloatArray], tuple[FloatArray, FloatArray]]
"""(hardware, tokens) → (G, A) of a prefill piece of that many tokens (:func:`prefill_split_s`'s signature)."""


def prefill_split_s(hw: RoleHardware, tokens: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Batch-1 prefill pass latency of ``tokens`` tokens split into (G, A): everything but the causal
    attention kernels, and those kernels (op kind ``attn_prefill``), seconds (module docstring)."""
    tok = np.asarray(tokens, dtype=np.float64)
    pt = _one_prompt(hw, tok, detail=False)
    attn = np.zeros(tok.shape)
    for op in pt.ops:
        if op.kind == "attn_prefill":
            attn = attn + op.time_s
    total = np.broadcast_to(pt.time_s, tok.shape)
    return np.asarray(total - attn, dtype=np.float64), np.asarray(attn, dtype=np.float64)


def chunk_price(
    hw: RoleHardware, budget_tokens: float, prompt_tokens: FloatArray, split: PrefillSplit | None = None
) -> ChunkPrice:
    """t_p at the token budget C; per prompt of L tokens cut into k = ⌈L/C⌉ − 1 full chunks and a last
    one of ``m = L − kC``: the attention ``Σ_{j<k} A(C√(2j + 1)) + A(√(m(2kC + m)))`` and the last
    chunk's GEMM side ``g(m) = G(m) − G(1)`` (module docstring). ``split``: the (G, A) of a chunk's tokens (None:
    :func:`prefill_split_s`; attention DP: one rank's, :func:`pdplan.serving.colocated_dp.rank_prefill_split_s`)."""
    split = prefill_split_s if split is None else split
    budget = float(max(int(budget_tokens), 2))
    lens = np.maximum(np.asarray(prompt_tokens, dtype=np.float64), 1.0)
    full = np.ceil(lens / budget) - 1.0
    last = lens - budget * full
    t_p, drain, width = _gemm_side(hw, budget, last, split)
    k_max = int(full.max())
    _, attn = split(
        hw,
        np.concatenate((budget * np.sqrt(2.0 * np.arange(k_max) + 1.0), np.sqrt(last * (2.0 * budget * full + last)))),
    )
    full_sum = np.concatenate(([0.0], np.cumsum(attn[:k_max])))
    attention = full_sum[full.astype(np.intp)] + attn[k_max:]
    return ChunkPrice(budget, t_p, attention, drain, width)


def cached_chunk_price(
    hw: RoleHardware,
    budget_tokens: float,
    prompt_tokens: FloatArray,
    cached_tokens: FloatArray,
    split: PrefillSplit | None = None,
    like: ChunkPrice | None = None,
) -> ChunkPrice:
    """:func:`chunk_price` for prompts whose first ``h`` tokens come from a prefix cache: only the ``m = L − h``
    missed tokens are chunked (at least one, as :func:`cached_prefill_perf`), k = ⌈m/C⌉ − 1 full chunks and a last
    one of ``m_L = m − kC``. Chunk j starts after ``h + jC`` keys, so its causal attention has
    ``C(2(h + jC) + C)/2`` query-key pairs, those of a from-scratch prompt of ``√(C(2h + 2jC + C))`` tokens (the
    equivalence of :func:`cached_prefill_perf`); the last chunk's ``√(m_L(2(h + kC) + m_L))``. With ``h = 0`` this
    is :func:`chunk_price`'s sum term by term (``split`` as there).

    ``like``: a price of the same ``hw``, budget and ``split`` (the deployment's :func:`chunk_price` without the
    cache), whose t_p and G(n) table, which read neither the prompts nor the hits, are taken as they are: only G(1)
    and G(m_L) are priced here, in the one roofline call that prices the chunks' attention (the roofline prices each
    token count on its own, so these are the doubles :func:`_gemm_side` and a call of their own give;
    tests/unit/test_colocated_points.py, bit for bit)."""
    split = prefill_split_s if split is None else split
    budget = float(max(int(budget_tokens), 2))
    lens = np.maximum(np.asarray(prompt_tokens, dtype=np.float64), 1.0)
    cached = np.clip(np.asarray(cached_tokens, dtype=np.float64), 0.0, lens - 1.0)
    new = lens - cached
    full = np.ceil(new / budget) - 1.0
    last = new - budget * full
    j = np.arange(max(int(full.max()), 1), dtype=np.float64)
    starts = cached[:, None] + budget * j[None, :]
    eq_full = np.sqrt(budget * (2.0 * starts + budget))
    eq_last = np.sqrt(last * (2.0 * (cached + budget * full) + last))
    if like is None or like.budget_tokens != budget:
        t_p, drain, width = _gemm_side(hw, budget, last, split)
        _, attn = split(hw, np.concatenate((eq_full.ravel(), eq_last)))
    else:  # G(1) and G(m_L) first, then the attention's token counts
        t_p, width = like.s_per_token, like.width
        g, attn = split(hw, np.concatenate(([1.0], last, eq_full.ravel(), eq_last)))
        drain = np.maximum(g[1 : 1 + last.size] - g[0], 0.0)
        attn = attn[1 + last.size :]
    per_chunk = attn[: eq_full.size].reshape(eq_full.shape)
    attention = np.where(j[None, :] < full[:, None], per_chunk, 0.0).sum(axis=1) + attn[eq_full.size :]
    return ChunkPrice(budget, t_p, attention, drain, width)


def fit_quadratic(tokens: FloatArray, time_s: FloatArray) -> tuple[float, float, float]:
    """Non-negative relative least squares ``S(l) ≈ a + b·l + c·l²`` (docs/queueing.md §1.1).

    Not for pricing a workload's own lengths: with one length the fit is (S, 0, 0) (see
    :func:`chunk_price`)."""
    design = np.stack([np.ones_like(tokens), tokens, tokens**2], axis=1) / time_s[:, None]
    scale = np.abs(design).max(axis=0)
    coef, _ = nnls(design / scale, np.ones_like(tokens))
    a, b, c = coef / scale
    return float(a), float(b), float(c)


@dataclass(frozen=True, slots=True)
class DecodePerf:
    """Linearised decode step, its fit error, and the instance's KV/seat limits. ``state_tokens_per_seq``: the KV
    token slots each sequence takes on top of its context: its fixed state (hybrid / sliding-window models; 0
    otherwise; :mod:`pdplan.perf.memory`) plus the mean empty slots of its last KV block (:mod:`pdplan.perf.kv_blocks`;
    0 at block 1): a KV check is Σ (context + s) ≤ kv_capacity_tokens."""

    step: LinearStepTime
    fit_median_rel_err: float
    fit_max_rel_err: float
    kv_capacity_tokens: float
    max_num_seqs: float
    state_tokens_per_seq: float = 0.0
    window_tokens: float | None = None  # the KV/context cap of an all-windowed model (ModelSpec.kv_window_tokens)
    lines: tuple[LinearStepTime, ...] = ()
    """A step concave in B (a MoE's expert reads saturate) as the minimum of these lines, steepest first
    (:func:`concave_lines`; module docstring); empty where one line fits (``step`` is then the law)."""
    lines_rel_err: tuple[float, float] = (0.0, 0.0)
    """(median, worst) relative error of the minimum of :attr:`lines` over the fit's grid."""
    one_line: LinearStepTime | None = None
    """On a line of the law (:meth:`on_line`): the one-line fit it replaced, which the closed-loop benchmark
    prices (:mod:`pdplan.serving.decode_lines`, what is left out); None: ``step`` is that fit."""

    @property
    def law_lines(self) -> tuple[LinearStepTime, ...]:
        """The lines whose minimum is the step law: :attr:`lines`, or ``step`` alone where one line fits."""
        return self.lines or (self.step,)

    def law_step_s(self, batch: FloatArray, context_tokens: FloatArray) -> FloatArray:
        """τ(B, K) of the law at each (B, K): the least of :attr:`law_lines` there (a step concave in B,
        :func:`concave_lines`; ``step`` itself where one line fits)."""
        return np.asarray(np.minimum.reduce([line(batch, context_tokens) for line in self.law_lines]), np.float64)

    @property
    def line_fit(self) -> LinearStepTime:
        """The one-line fit of the step (``step`` itself unless priced on a line of a concave law)."""
        return self.step if self.one_line is None else self.one_line

    def on_line(self, line: int) -> DecodePerf:
        """The same instance priced on line ``line`` of its concave law (module docstring, *Concave steps*): the
        serving models take one line each, and the one a rate runs on is the line whose mean step is the least
        there (:mod:`pdplan.serving.decode_lines`). Its fit errors become the law's."""
        if not 0 <= line < len(self.lines):
            raise ValueError(f"decode line {line} of a law of {len(self.lines)} lines")
        med, worst = self.lines_rel_err
        return dataclasses.replace(
            self, step=self.lines[line], fit_median_rel_err=med, fit_max_rel_err=worst, one_line=self.line_fit
        )


def decode_step_fn(hw: RoleHardware, batch: FloatArray, context_tokens: FloatArray) -> FloatArray:
    """Roofline token interval ``p·stage_time(B/p, K/B)`` (vectorised; module docstring)."""
    b = np.maximum(batch, 1e-9)
    per_seq = context_tokens / b
    pt = phase_time(
        hw.model,
        hw.gpu,
        hw.table,
        phase="decode",
        batch=b / hw.pp,
        tokens=np.maximum(per_seq, 1.0),
        tp=hw.tp,
        pp=hw.pp,
        precision=hw.precision,
        dp=hw.dp,
        ep=hw.ep,
        **hw.moe_options,  # type: ignore[arg-type]
    )
    return np.asarray(hw.pp * pt.stage_time_s, dtype=np.float64)


def step_bytes(hw: RoleHardware, batch: FloatArray, context: FloatArray) -> FloatArray:
    """``B(b, c)``: bytes one decode step of ``batch`` sequences at mean context ``context`` must read from
    HBM per GPU of a TP group over all layers, from :func:`pdplan.perf.ops.forward_ops` (no efficiencies):
    the GEMM weights (MoE: the experts the batch touches, as the roofline counts them), the KV of every
    sequence (``b·c`` tokens of the per-GPU KV share) and the recurrent state of linear-attention layers."""
    b = np.asarray(batch, dtype=np.float64)
    c = np.asarray(context, dtype=np.float64)
    prec = hw.precision
    tp = np.asarray(float(hw.tp))
    par = parallel_fields(tp, hw.dp, hw.ep)
    shape = PassShape("decode", b, c, tp, prec.act_bytes, prec.weight_bytes, prec.kv_bytes, **par)  # type: ignore[arg-type]
    total = np.zeros(np.broadcast_shapes(b.shape, c.shape))
    for op in forward_ops(hw.model, shape):
        match op:
            case GemmOp():
                total = total + op.count * op.k * op.n * prec.weight_bytes
            case MoeOp():  # the experts the batch hits on the busiest GPU (pdplan.perf.moe)
                total = total + op.count * op.weight_bytes
            case DecodeAttentionOp():
                total = total + op.count * op.batch * op.context * op.kv_bytes_per_token
            case LinearAttentionOp():
                total = total + op.count * op.batch * op.state_bytes
    return np.asarray(total, dtype=np.float64)


_FLOOR_BATCHES = 160
_FLOOR_MARGIN = 1e-3


def _above_floor(hw: RoleHardware, a: FloatArray, scale: FloatArray, coef: FloatArray, b_max: float) -> FloatArray:
    """Coefficients (of the columns of ``a``, the design divided by ``scale``) of the least-squares ``τ``
    nearest to ``coef`` that never undercuts the HBM floor ``B(B/p, K/B)/BW`` (module docstring): ``t2`` at
    least the KV read per context token, ``t0 + t1·B`` at least the weight read on a dense grid of B (plus a
    0.1 % margin for the concave MoE expert reads between grid points). Unchanged when it already holds."""
    p, bw = float(hw.pp), hw.gpu.memory_bytes_per_s
    t2_min = float(step_bytes(hw, np.array(1.0), np.array(1.0)) - step_bytes(hw, np.array(1.0), np.array(0.0)))
    t2_min /= p * bw
    grid = np.geomspace(1e-3, b_max, _FLOOR_BATCHES)  # MoE weights rise with B: below 1e-3, t0 covers them
    need = step_bytes(hw, grid / p, np.zeros_like(grid)) / bw * (1.0 + _FLOOR_MARGIN)
    rows = np.stack([np.ones_like(grid) / scale[0], grid / scale[1], np.zeros_like(grid)], axis=1) / need[:, None]
    x = coef.copy()
    x[2] = max(x[2], t2_min * scale[2])
    if float((rows @ x).min()) >= 1.0:
        return x
    x[0] += float(np.max(need - (x[0] / scale[0] + grid * x[1] / scale[1]))) * scale[0]  # feasible start
    from scipy.optimize import minimize  # lazy: only a fit below the HBM floor needs SLSQP (~0.3 s to import)

    sol = minimize(
        lambda v: float(np.sum((a @ v - 1.0) ** 2)),
        x,
        jac=lambda v: 2.0 * a.T @ (a @ v - 1.0),
        bounds=[(0.0, None), (0.0, None), (t2_min * scale[2], None)],
        constraints=[{"type": "ineq", "fun": lambda v: rows @ v - 1.0, "jac": lambda v: rows}],
        method="SLSQP",
    )
    ok = sol.success and float((rows @ sol.x).min()) >= 1.0 - 1e-9
    return np.asarray(sol.x if ok else x, dtype=np.float64)


def decode_perf(
    hw: RoleHardware, mean_context_tokens: float, max_num_seqs: float, partial_block_tokens: float | None = None
) -> DecodePerf:
    """Fit ``τ = t0 + t1·B + t2·K`` to the roofline over the operating range, above the HBM floor
    (module docstring). A sequence holds, besides its context, its fixed state and the empty slots of its last KV
    block (``partial_block_tokens``, :func:`pdplan.perf.kv_blocks.resident_partial_block_tokens` of the workload;
    None: ``(b − 1)/2``, the mean for lengths not aligned to the block ``b = hw.kv_block_tokens``). Kept by value for
    the process (:mod:`pdplan.serving.role_memo`): the screen's decode tables and every model built on the instance
    type fit the same law (the batch cap read as a float: the screen's tables pass an int, the models a float, the
    same fit)."""
    seqs = float(max_num_seqs)
    key = arguments_key(mean_context_tokens, seqs, partial_block_tokens)
    return _FITS.get(hw, key, lambda: _decode_fit(hw, mean_context_tokens, seqs, partial_block_tokens))


_FITS: HardwareMemo[DecodePerf] = HardwareMemo()
"""The decode laws fitted, by instance type and the three numbers the fit reads (:mod:`pdplan.serving.role_memo`)."""


def _decode_fit(
    hw: RoleHardware, mean_context_tokens: float, max_num_seqs: float, partial_block_tokens: float | None
) -> DecodePerf:
    mem = instance_budget(hw, "decode")
    kv_cap = float(np.ravel(mem.kv_capacity_tokens)[0])
    partial = (hw.kv_block_tokens - 1) / 2.0 if partial_block_tokens is None else partial_block_tokens
    state = float(np.ravel(mem.state_tokens_per_seq)[0]) + partial
    max_num_seqs = max_num_seqs * hw.dp  # each DP rank schedules its own max_num_seqs sequences
    kappa = max(mean_context_tokens, 1.0)
    b_max = max(2.0, min(max_num_seqs, kv_cap / (kappa + state)))
    batch = sorted_unique(np.round(np.geomspace(1.0, b_max, _FIT_BATCHES)))
    ctx = kappa * np.asarray(_FIT_CONTEXT_FACTORS)
    window = hw.model.kv_window_tokens
    if window is not None:  # K is the windowed context (module docstring): c never exceeds the window
        ctx = sorted_unique(np.minimum(ctx, window))
    bb, cc = (g.ravel() for g in np.meshgrid(batch, ctx))
    keep = bb * (cc + state) <= kv_cap
    bb, cc = bb[keep], cc[keep]
    tau = decode_step_fn(hw, bb, bb * cc)
    design = np.stack([np.ones_like(bb), bb, bb * cc], axis=1) / tau[:, None]
    scale = np.abs(design).max(axis=0)
    # SciPy's NNLS without importing scipy.optimize (pdplan.numerics.nnls says why not a numpy one of our own)
    coef, _ = nnls(design / scale, np.ones_like(bb))
    if coef[0] <= 0.0:  # a pure-overhead floor is needed by the fixed point; keep the smallest step
        coef[0] = float(tau.min()) * 0.5 * scale[0]
    t0, t1, t2 = _above_floor(hw, design / scale, scale, coef, b_max) / scale
    fit = t0 + t1 * bb + t2 * bb * cc
    rel = np.abs(fit / tau - 1.0)
    lines, law_rel = concave_lines(hw, (bb, cc, tau), design / scale, scale, b_max, float(rel.max()))
    return DecodePerf(
        LinearStepTime(float(t0), float(t1), float(t2)),
        median(rel),
        float(rel.max()),
        kv_cap,
        float(max_num_seqs),
        state,
        window,
        lines,
        law_rel,
    )


LINE_SPLIT_REL_ERR = 0.10
"""A one-line fit whose worst relative error on the grid exceeds this (the 10 % TPOT target of issue #23) is
replaced by the minimum of two lines where that at least halves the worst error (module docstring, *Concave
steps*)."""


def concave_lines(
    hw: RoleHardware,
    grid: tuple[FloatArray, FloatArray, FloatArray],
    a: FloatArray,
    scale: FloatArray,
    b_max: float,
    line_max_rel_err: float,
) -> tuple[tuple[LinearStepTime, ...], tuple[float, float]]:
    """The step as the minimum of two lines, each fitted (relative least squares, above the HBM floor over the
    whole range) to the grid points on its side of a split batch, the split the one whose minimum errs least at its
    worst; ``((), (0, 0))`` where the one line errs by at most :data:`LINE_SPLIT_REL_ERR` or two do not halve
    its worst error. ``grid``: the fit's (B, c, τ) points; ``a``, ``scale``: its scaled design rows."""
    bb, cc, tau = grid
    none: tuple[tuple[LinearStepTime, ...], tuple[float, float]] = ((), (0.0, 0.0))
    batches = sorted_unique(bb)
    if line_max_rel_err <= LINE_SPLIT_REL_ERR or batches.size < 6:
        return none
    cols = np.stack([np.ones_like(bb), bb, bb * cc], axis=1)
    best: tuple[float, FloatArray, FloatArray] | None = None
    for split in batches[2:-2]:  # each side keeps at least three batches (three coefficients)
        low, high = bb <= split, bb >= split
        pair = [nnls(a[side], np.ones(int(side.sum())))[0] / scale for side in (low, high)]
        worst = float(np.abs(np.minimum(cols @ pair[0], cols @ pair[1]) / tau - 1.0).max())
        if best is None or worst < best[0]:
            best = (worst, low, high)
    if best is None:
        return none
    coefs = []
    for side in best[1:]:
        coef, _ = nnls(a[side], np.ones(int(side.sum())))
        if coef[0] <= 0.0:  # the fixed point needs a step at B = 0 (as the one line's fit)
            coef[0] = float(tau[side].min()) * 0.5 * scale[0]
        coefs.append(_above_floor(hw, a[side], scale, coef, b_max) / scale)
    rel = np.abs(np.minimum(cols @ coefs[0], cols @ coefs[1]) / tau - 1.0)
    if float(rel.max()) > 0.5 * line_max_rel_err:
        return none
    lines = sorted((LinearStepTime(*(float(x) for x in c)) for c in coefs), key=lambda s: -s.t1_s_per_seq)
    return tuple(lines), (median(rel), float(rel.max()))
