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
  :mod:`pdplan.perf.memory`). The chunked-prefill price is the same pass at one prompt on every rank
  (:func:`pdplan.serving.roles.chunk_price`: batch D, attention per rank, MoE over the D chunks): its secant per
  chunk token ``t_p`` is, per token of one rank's chunk, what the shared step costs when all ranks carry chunks
  alike. In the mean field that is exact for the linear terms: each rank's tokens add ``t_p`` of step time per
  token (the expert layers' share for all D ranks' tokens plus the rank's own attention), the step time is what all
  ranks see.
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

* Ranks' prefill chunks land independently, and are priced in the mean field (each rank's chunk tokens at the
  symmetric secant t_p). A step where only some ranks carry a chunk really waits for the slowest rank's chunk
  attention and attention GEMMs: with each of D ranks carrying a chunk in a fraction ρ of steps, that part of the
  step is paid in a fraction ``1 − (1 − ρ)^D`` of steps, not ρ. The model understates it most at low-to-mid
  chunk load (ρ = 0.2, D = 8: 0.83 vs 0.2 of the per-rank chunk part), and is exact at ρ → 1. A linear step law
  cannot carry it (the chord of ``1 − (1 − ρ)^D`` over [0, 1] is ρ itself).
* The split is random. The engines balance: TensorRT-LLM hands requests to the rank with the fewest tokens
  (``executor_request_queue.py``, a min-heap on tokens), SGLang's DP controller round-robins (its default
  ``load_balance_method``), vLLM's front end picks the least-loaded engine. The straggler term of a random split is
  an upper bound for them, and the per-rank seat and KV bounds (Poisson dispersion per rank) are conservative.
* The per-sequence part of the decode step (t1) is treated as shared (the MoE reads grow with the instance's
  tokens); its per-rank share (the rank's attention projections) gets no straggler term.
* TTFT is that of the rank's own queue; a prompt is never moved between ranks.
* The simulator's colocated deployment runs independent instances, so it cannot express the step shared across
  ranks; there is no simulator twin of this model.

D = 1 is today's colocated model unchanged (e_1 = 0, every factor 1).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from pdplan.numerics.normal import ndtr
from pdplan.queueing import DecodeWorkload, LinearStepTime
from pdplan.serving.roles import DecodePerf

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


def rank_decode(decode: DecodePerf, ranks: int, cells: DecodeWorkload) -> DecodePerf:
    """One attention-DP rank's step law, seats and KV from the instance's (module docstring): ``t0``,
    ``D·t1 + straggler``, ``D·t2``; seats and KV capacity over D. D = 1 returns the same numbers."""
    d = float(ranks)
    st = decode.step
    t2 = st.t2_s_per_token * d
    seats = decode.max_num_seqs / d
    kv = decode.kv_capacity_tokens / d
    extra = straggler_s_per_seq(t2, ranks, cells, seats, kv, decode.state_tokens_per_seq)
    step = LinearStepTime(st.t0_s, st.t1_s_per_seq * d + extra, t2)
    return dataclasses.replace(decode, step=step, kv_capacity_tokens=kv, max_num_seqs=seats)
