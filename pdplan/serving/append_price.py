"""The mixed-batch price of a prefill riding a decode instance's steps: PPD's appends
(:mod:`pdplan.serving.ppd`, *Mixed-batch pricing* and *Attention data parallelism*, which derive it) and vLLM's
recompute of a preempted request on a disaggregated decode instance (:mod:`pdplan.serving.decode_recompute`).

Kept apart from :mod:`pdplan.serving.ppd` so that a model that prices only the recompute does not import PPD's session
machinery at start-up (issue #27); :mod:`pdplan.serving.ppd` re-exports these functions.
"""

from __future__ import annotations

import numpy as np

from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import prefill_pass_time, prefill_split_s
from pdplan.types import FloatArray


def append_work_s(
    hw: RoleHardware, batch: float, new_tokens: FloatArray, cached_tokens: FloatArray, budget_tokens: float
) -> tuple[FloatArray, FloatArray]:
    """``(w, steps)``: the time an append of ``new_tokens`` over ``cached_tokens`` adds to the decode steps that
    carry it, and how many steps it spans (⌈m/C⌉), on an instance whose steps run ``batch`` sequences (module
    docstring: ``G(B̄ + c) − G(B̄)`` per chunk of c tokens plus the chunk's causal attention over the keys before it)."""
    budget = float(max(int(budget_tokens), 1))
    m = np.maximum(np.asarray(new_tokens, dtype=np.float64), 1.0)
    h = np.maximum(np.asarray(cached_tokens, dtype=np.float64), 0.0)
    full = np.ceil(m / budget) - 1.0
    last = m - budget * full
    added = rank_gemm_s(hw, max(float(batch), 1.0), np.concatenate(([budget], last)))
    gemm = full * float(added[0]) + added[1:]
    j = np.arange(max(int(full.max()), 1), dtype=np.float64)
    starts = h[:, None] + budget * j[None, :]
    eq_full = np.sqrt(budget * (2.0 * starts + budget))
    eq_last = np.sqrt(last * (2.0 * (h + budget * full) + last))
    _, attn = prefill_split_s(hw, np.concatenate((eq_full.ravel(), eq_last)))
    per_chunk = attn[: eq_full.size].reshape(eq_full.shape)
    attention = np.where(j[None, :] < full[:, None], per_chunk, 0.0).sum(axis=1) + attn[eq_full.size :]
    return np.asarray(gemm + attention, dtype=np.float64), full + 1.0


def rank_gemm_s(hw: RoleHardware, batch: float, tokens: FloatArray) -> FloatArray:
    """``[n]`` the GEMM side that ``tokens`` prompt tokens of one rank add to a decode step whose every rank runs
    ``batch`` sequences (:mod:`pdplan.serving.ppd`, *Attention data parallelism*): ``G(B̄ + c) − G(B̄)`` on the
    :func:`~pdplan.serving.roles.prefill_split_s` pass without attention DP or experts; with D > 1 ranks and routed
    experts, the rank's own part ``R(B̄ + c) − R(B̄)`` (the pass in which every rank carries that many tokens, less
    its causal attention and its experts) plus the experts' ``X(D·B̄ + c) − X(D·B̄)`` over the instance's tokens
    (the experts' op of the pass in which the instance carries that many tokens in all: :func:`rank_parts_s`)."""
    tok = np.concatenate(([batch], batch + np.asarray(tokens, dtype=np.float64)))
    if hw.dp <= 1 or hw.model.moe is None:
        g, _ = prefill_split_s(hw, tok)
        return np.asarray(np.maximum(g[1:] - g[0], 0.0), dtype=np.float64)
    rest, experts = _rank_tables(hw, tok)
    return np.asarray(np.maximum(rest[1:] - rest[0] + experts[1:] - experts[0], 0.0), dtype=np.float64)


def rank_parts_s(hw: RoleHardware, batch: float, tokens: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``([n], [n])``: the rank's own part ``R(B̄ + c) − R(B̄)`` and the experts' ``X(D·B̄ + c) − X(D·B̄)`` of
    :func:`rank_gemm_s` on D = ``hw.dp`` ranks (the experts' part 0 without routed experts). The rank's part runs
    in parallel with the other ranks' appends in one step; the experts' part adds up over them
    (:mod:`pdplan.serving.ppd_ranks`)."""
    rest, experts = _rank_tables(hw, np.concatenate(([batch], batch + np.asarray(tokens, dtype=np.float64))))
    return np.asarray(rest[1:] - rest[0], dtype=np.float64), np.asarray(experts[1:] - experts[0], dtype=np.float64)


def _rank_tables(hw: RoleHardware, tok: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(R, X)`` at a rank's token counts ``tok`` (every rank's batch ``tok[0]``): the rank's pass less its causal
    attention and its experts, and the experts over the instance's ``tok + (D − 1)·tok[0]`` tokens (zeros without
    routed experts)."""
    ranks = float(hw.dp)
    every = prefill_pass_time(hw, batch=ranks, tokens=tok, detail=False)
    rest = np.broadcast_to(every.time_s, tok.shape) - every.kind_s("attn_prefill", tok.shape)
    rest = rest - every.kind_s("moe", tok.shape)
    if hw.model.moe is None:
        return np.asarray(rest, dtype=np.float64), np.zeros(tok.shape)
    total = tok + (ranks - 1.0) * float(tok[0])  # the instance's tokens: D·B̄ + c
    experts = prefill_pass_time(hw, batch=1.0, tokens=total, detail=False).kind_s("moe", tok.shape)
    return np.asarray(rest, dtype=np.float64), np.asarray(experts, dtype=np.float64)


def append_expert_s(hw: RoleHardware, batch: float, new_tokens: FloatArray, budget_tokens: float) -> FloatArray:
    """``[n]`` the experts' part of :func:`append_work_s`'s w on D > 1 ranks: ``(⌈m/C⌉ − 1)·x(C) + x(last)``, x the
    experts' ``X(D·B̄ + c) − X(D·B̄)`` of :func:`rank_parts_s` (0 without routed experts); the rest of w is the
    append's rank's own (:mod:`pdplan.serving.ppd_ranks`)."""
    budget = float(max(int(budget_tokens), 1))
    m = np.maximum(np.asarray(new_tokens, dtype=np.float64), 1.0)
    full = np.ceil(m / budget) - 1.0
    _, experts = rank_parts_s(hw, max(float(batch), 1.0), np.concatenate(([budget], m - budget * full)))
    return np.asarray(full * float(experts[0]) + experts[1:], dtype=np.float64)
