"""Colocated instances with attention data parallelism: one instance of D attention-DP ranks as D colocated servers.

An instance of ``tp·dp`` GPUs with attention DP = D (TensorRT-LLM ``enable_attention_dp``, SGLang
``--enable-dp-attention``, vLLM ``--data-parallel-size``) runs D attention ranks. Each rank has its own scheduler,
its own waiting queue, its own KV pool and seats (``max_num_seqs`` per rank) and its own chunk budget (the budget
pdplan prices is a rank's: SGLang divides ``--chunked-prefill-size`` by the DP size, so the export writes D times it,
:func:`pdplan.report.export.engine_args.sglang_chunk`), and so runs its own chunked (or prefill-first) schedule. The
MoE (or dense-FFN) layers and their all-to-all run over the tokens of all D ranks in one step, and every step ends
when the slowest rank's attention has finished (the expert layers wait for every rank's tokens). docs/colocated_dp.md
has the derivation, the limits and the held-out check on TensorRT-LLM's DeepSeek-R1 attention-DP runs.

**The model.** A colocated deployment of z such instances is priced as z·D colocated servers
(:class:`~pdplan.serving.colocated.ColocatedModel` with ``z`` = instances × D), each fed ``λ/(z·D)`` by a random
split, with a per-rank step law derived from the instance's:

* *The balanced step.* The instance's decode law ``τ = t0 + t1·B + t2·K`` is fitted over the instance's total batch
  B and context K with every rank carrying B/D sequences (:func:`pdplan.serving.roles.decode_perf`; attention at
  B/D per rank, MoE over all B tokens: :mod:`pdplan.perf.ops_attention`, :mod:`pdplan.perf.ops_moe`; the
  disaggregated decode pool uses the same law). With every rank at b sequences and k context tokens, ``B = D·b``,
  ``K = D·k``, so one rank sees ``τ = t0 + (D·t1)·b + (D·t2)·k``. Its seats and KV are the instance's over D (the
  law's seat cap is ``max_num_seqs·D``, the memory model's KV capacity the sum over the ranks,
  :mod:`pdplan.perf.memory`).
* *A rank's chunk and the other ranks' chunks (issue #24 item 6).* Each rank schedules its own chunk (TensorRT-LLM:
  one ``PyExecutor`` scheduler per rank, requests handed to ranks by ``executor_request_queue.py``; its
  ``attention_dp_config.enable_balance``, which withholds context until every rank has some, is off by default,
  ``llmapi/llm_args.py``). Every MoE layer then runs over the tokens of ALL ranks of that step: the experts all-gather
  ``all_rank_num_tokens`` rows, each rank's own count, unpadded on Hopper (NVIDIA/TensorRT-LLM
  ``tensorrt_llm/_torch/modules/fused_moe/communication/allgather_reducescatter.py`` at 0f39b2d,
  ``AllGatherReduceScatter.dispatch``: ``sizes = all_rank_num_tokens``; ``models/modeling_deepseekv3.py`` pads to the
  largest rank only on SM120). SGLang alike: a step with a prefill in it gathers the ranks' tokens at their sum
  (sgl-project/sglang ``python/sglang/srt/layers/dp_attention.py`` at 0016109, ``DpPaddingMode.get_dp_padding_mode``:
  ``SUM_LEN`` for an extend batch over several ranks; its pplx all-to-all backend pads every rank to the largest,
  where the symmetric pass would be the price). So a rank's chunk of n tokens costs the step its own dense layers,
  all-to-all share and causal attention (those of the pass in which every rank carries n: the step waits for its rank)
  plus the routed experts of its own n tokens, not of D·n (:func:`rank_prefill_split_s`, the split
  :func:`pdplan.serving.roles.chunk_price` prices a rank's chunks with: ``t_p`` and a lone prompt's ``g(L)``). The
  other D − 1 ranks' chunks ride in the same steps whether or not this rank carries one. In the mean field (each
  rank's load that of the others, as the balanced step already takes for decode) a rank pushes ``λ_r·L̄`` prompt
  tokens a second and holds ``b = λ_r·τ·E[n]`` decoding sequences (Little, n its decode steps), so the other ranks put
  ``(D − 1)·b·L̄/E[n]`` chunk tokens through the experts per step, at ``e`` seconds each (the experts' added time per
  token when the other ranks carry a chunk: :func:`others_expert_s_per_token`): a per-sequence term
  ``(D − 1)·e·L̄/E[n]`` added to the rank's t1 (:func:`others_chunk_s_per_seq`, chunked schedules only). The mean step is
  that of the symmetric pass in which every rank carries its chunk; what the term moves is WHEN the others' expert
  tokens are paid: in every step, not only in this rank's chunk steps. The earlier price (the pass of D chunks per
  rank chunk, D·n expert tokens) charged them only when this rank chunked (the ranks' chunks perfectly correlated): a
  lone prompt at λ → 0 cost the D-rank pass, and on DeepSeek-V3 B200 TP1 DP8 EP8 at 2000/1000 and 20 req/s the closed
  form's TTFT P90 stood 48 % above the simulator's per-rank price.
* *The slowest rank (new; the disaggregated decode prices its ranks balanced and has no such term).* A step ends
  when the rank with the most attention work ends. A rank's decode attention reads its own context
  ``K_r`` at ``t2' = D·t2`` per token (the KV read is the rank's alone). Under the random split the ranks'
  in-flight sequences are independent; with ``N`` sequences per rank at Poisson dispersion (as the colocated KV and
  seat bounds take them, :mod:`pdplan.serving.colocated`) ``Var K_r = N·E[c²]`` with ``E[c²]`` the mean squared
  context of an in-flight sequence (:attr:`~pdplan.queueing.decode.DecodeWorkload.context_square_sum` /
  ``mean_steps``). For D independent, near-normal ``K_r``, ``E[max_r K_r] ≈ E[K] + e_D·sd K`` with
  ``e_D = E[max of D iid N(0, 1)] = ∫ x·d(Φ(x)^D)`` (:func:`expected_max_normal`; e_1 = 0, e_2 = 1/√π). The step
  therefore gains ``δ(N) = t2'·e_D·√(N·E[c²])``. That is concave in N, and the queueing models need a step linear
  in (B, K); it is replaced by its chord between N = 0 and ``N_max``, the per-rank batch at the seat or KV cap
  (the most a rank can hold: ``min(seats, KV / (κ + s))``, κ the mean context, s the fixed state per sequence):
  ``δ(N) ≈ N·t2'·e_D·√(E[c²]/N_max)``, a per-sequence term added to the rank's t1
  (:func:`straggler_s_per_seq`). The chord is exact at N = 0 and at the cap (where the limits bind) and below the
  curve in between: at N = N_max/4 it prices half the straggler term (√(N/N_max) of it).

**Approximations and their limits.**

* Ranks' prefill chunks land independently, and are priced in the mean field (a rank's own chunk at its own
  price, the others' expert tokens at their mean through the per-sequence term). A step where only some ranks
  carry a chunk really waits for the slowest rank's chunk attention and attention GEMMs: with each of D ranks
  carrying a chunk in a fraction ρ of steps, that part of the step is paid in a fraction ``1 − (1 − ρ)^D`` of
  steps, not ρ. The model understates it most at low-to-mid chunk load (ρ = 0.2, D = 8: 0.83 vs 0.2 of the
  per-rank chunk part), and is exact at ρ → 1. A linear step law cannot carry it (the chord of
  ``1 − (1 − ρ)^D`` over [0, 1] is ρ itself).
* The split is random. The engines balance: TensorRT-LLM hands requests to the rank with the fewest tokens
  (``executor_request_queue.py``, a min-heap on tokens), SGLang's DP controller round-robins (its default
  ``load_balance_method``), vLLM's front end picks the least-loaded engine. The straggler term of a random split is
  an upper bound for them, and the per-rank seat and KV bounds (Poisson dispersion per rank) are conservative.
* The per-sequence part of the decode step (t1) is treated as shared (the MoE reads grow with the instance's
  tokens); its per-rank share (the rank's attention projections) gets no straggler term.
* TTFT is that of the rank's own queue; a prompt is never moved between ranks.
* The other ranks' expert tokens are priced at the experts' time only: the all-to-all bytes they send to this
  rank's experts are not added (the symmetric pass's all-to-all is the rank's own). Prompts whose prefix is cached
  (:mod:`pdplan.serving.colocated_cache`) keep the uncached prompt's L̄ in the others' term (an upper bound).
  Prefill-first schedules keep the symmetric pass (``prefill_perf``).
* The simulator's colocated deployment runs independent ranks, so it cannot couple them: it prices a rank's own
  chunk with its own roofline tables (``pdplan.sim.deployment.rank_split_s``, own tokens through the experts) and
  takes the others' expert tokens from the rank's linear step law (the per-sequence term above), which it shares
  with this model by design (``step="linear"``).

D = 1 is today's colocated model unchanged (e_1 = 0, every factor 1).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from pdplan.numerics.normal import ndtr
from pdplan.queueing import DecodeWorkload, LinearStepTime
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import DecodePerf, prefill_pass_time
from pdplan.types import FloatArray

_MAX_GRID = np.linspace(-9.0, 9.0, 3601)
"""Grid of the e_D integral: the integrand ``x·D·φ(x)·Φ(x)^(D−1)`` is below 1e-15 outside ±9 for D ≤ 10⁴."""


@functools.lru_cache(maxsize=64)
def expected_max_normal(ranks: int) -> float:
    """``e_D = E[max of D iid N(0, 1)] = ∫ x·D·φ(x)·Φ(x)^(D−1) dx`` (trapezoid on :data:`_MAX_GRID`); exactly 0 for
    D = 1 (the max of one is itself, mean 0)."""
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    if ranks == 1:
        return 0.0
    x = _MAX_GRID
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    f = x * ranks * pdf * ndtr(x) ** (ranks - 1)
    return float(np.sum(0.5 * (f[1:] + f[:-1]) * np.diff(x)))


def straggler_s_per_seq(
    t2_rank_s_per_token: float, ranks: int, cells: DecodeWorkload, seats: float, kv_tokens: float, state_tokens: float
) -> float:
    """The slowest rank's extra attention per sequence of a rank (module docstring, "The slowest rank"):
    ``t2'·e_D·√(E[c²]/N_max)`` with ``E[c²] = context_square_sum / mean_steps`` and ``N_max = min(seats,
    kv_tokens/(κ + s))``, κ = ``mean_work / mean_steps``. 0 for D = 1."""
    e_d = expected_max_normal(ranks)
    if e_d == 0.0:
        return 0.0
    steps = cells.mean_steps
    mean_square = cells.context_square_sum / steps
    kappa = cells.mean_work / steps
    n_max = max(1.0, min(seats, kv_tokens / (kappa + state_tokens)))
    return t2_rank_s_per_token * e_d * math.sqrt(mean_square / n_max)


def rank_decode(decode: DecodePerf, ranks: int, cells: DecodeWorkload, others_s_per_seq: float = 0.0) -> DecodePerf:
    """One attention-DP rank's step law, seats and KV from the instance's (module docstring): ``t0``,
    ``D·t1 + straggler + others``, ``D·t2``; seats and KV capacity over D; ``others_s_per_seq`` the other ranks'
    chunk tokens per sequence (:func:`others_chunk_s_per_seq`). D = 1 returns the same numbers."""
    d = float(ranks)
    seats = decode.max_num_seqs / d
    kv = decode.kv_capacity_tokens / d

    def rank(st: LinearStepTime) -> LinearStepTime:
        t2 = st.t2_s_per_token * d
        extra = straggler_s_per_seq(t2, ranks, cells, seats, kv, decode.state_tokens_per_seq)
        return LinearStepTime(st.t0_s, st.t1_s_per_seq * d + extra + others_s_per_seq, t2)

    one = None if decode.one_line is None else rank(decode.one_line)  # a concave law's line: its one-line fit too
    lines = tuple(rank(line) for line in decode.lines)  # and the law's lines (the simulator's linear step)
    return dataclasses.replace(
        decode, step=rank(decode.step), kv_capacity_tokens=kv, max_num_seqs=seats, one_line=one, lines=lines
    )


def rank_prefill_split_s(hw: RoleHardware, tokens: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(G, A) of a chunk of ``tokens`` prompt tokens on ONE attention-DP rank (module docstring, "A rank's chunk"):
    ``G = P_D − A_D − X_D + X_1`` and ``A = A_D``, with P_D the pass in which every rank carries ``tokens``
    (``batch = D``), A_D its causal-attention kernels, X_D its routed-expert op and X_1 the routed-expert op of the
    pass in which the instance carries ``tokens`` in all (``batch = 1``): the rank's dense layers, all-to-all share
    and attention, and the experts over its own tokens only. Without attention DP or experts it is the batch-D
    pass (:func:`pdplan.serving.roles.prefill_split_s`)."""
    tok = np.asarray(tokens, dtype=np.float64)
    every = prefill_pass_time(hw, batch=float(hw.dp), tokens=tok, detail=False)
    attention = every.kind_s("attn_prefill", tok.shape)
    gemm = np.broadcast_to(every.time_s, tok.shape) - attention
    if hw.dp > 1 and hw.model.moe is not None:
        alone = prefill_pass_time(hw, batch=1.0, tokens=tok, detail=False)  # the instance carries the tokens in all
        gemm = gemm - every.kind_s("moe", tok.shape) + alone.kind_s("moe", tok.shape)
    return np.asarray(gemm, dtype=np.float64), attention


def others_expert_s_per_token(hw: RoleHardware, budget_tokens: float) -> float:
    """e: the routed experts' added seconds per token of the other ranks' chunks, at the chunk size C the scheduler
    runs: ``(X_D(C) − X_1(C)) / ((D − 1)·C)``, the experts' time when every rank carries C tokens less that when
    one rank does, over the (D − 1)·C tokens the others add (:func:`rank_prefill_split_s`'s X). 0 without attention
    DP or experts."""
    if hw.dp <= 1 or hw.model.moe is None:
        return 0.0
    c = np.array([float(max(int(budget_tokens), 2))])
    every, one = (
        float(prefill_pass_time(hw, batch=b, tokens=c, detail=False).kind_s("moe", c.shape)[0])
        for b in (float(hw.dp), 1.0)
    )
    return max(every - one, 0.0) / ((hw.dp - 1) * float(c[0]))


def others_chunk_s_per_seq(hw: RoleHardware, budget_tokens: float, cells: DecodeWorkload) -> float:
    """The other ranks' chunk tokens through the experts, per decoding sequence of a rank (module docstring):
    ``(D − 1)·e·L̄/E[n]``, L̄ the mean computed prompt tokens and E[n] the mean decode steps of ``cells``, e
    :func:`others_expert_s_per_token`. 0 for D = 1."""
    e = others_expert_s_per_token(hw, budget_tokens)
    if e == 0.0:
        return 0.0
    prompt = float(cells.prob @ cells.computed_tokens)
    return (hw.dp - 1) * e * prompt / cells.mean_steps
