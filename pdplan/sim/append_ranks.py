"""The append-prefills of a mixed step on a decode instance of D > 1 attention-DP ranks (PPD; docs/prefix_cache.md §11,
*Attention data parallelism*), priced apart from the closed form (:func:`pdplan.serving.append_price.rank_gemm_s`): the
two share the roofline, not the formula.

A session's history lives in one rank's KV, so its append runs in that rank's step: with the rank's own token budget
(the engine's ``max_num_batched_tokens`` per rank less the rank's decoding sequences) and at the rank's own price. The
simulated decode instance runs its B sequences on the balanced step law (every rank B/D of them, as the closed form's
decode pool: :func:`pdplan.serving.roles.decode_perf`), so a rank's decoding sequences are taken at ``b = B/D``.
Every MoE layer gathers the tokens of every rank (DeepEP's dispatch and combine, an idle batch on a rank with
nothing to run), so the step ends when the slowest rank ends and the experts run over every rank's tokens:

    added = max_r [R(b + c_r) − R(b) + Σ_{i ∈ r} A(√(c_i(2h_i + c_i)))] + X(B + Σ_r c_r) − X(B)

with ``c_r`` rank r's chunk tokens, R the rank's pass less its causal attention and its experts (the pass in which
every rank carries that many tokens: the rank's dense layers and all-to-all share), X the experts' op of the pass in
which the instance carries that many tokens in all, A the causal attention (:func:`pdplan.sim.deployment.rank_split_s`
splits a rank's pass alike). The B = 0 step (appends alone) pays R(1) and X(1) in its decode step of none, as
:class:`~pdplan.sim.deployment.SimChunkPrice` does. Tables on whole token counts, read by linear interpolation,
beyond them at their last slope (X past one rank's full chunk over a full batch: several ranks each carrying a full
chunk in one step)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdplan.serving.role_hardware import RoleHardware
from pdplan.sim.deployment import _pass
from pdplan.types import FloatArray


def _at(grid: FloatArray, table: FloatArray, n: float) -> float:
    """``table`` at ``n`` tokens: interpolated on ``grid``, beyond it at its last slope."""
    top, slope = float(grid[-1]), float(table[-1] - table[-2])
    return float(np.interp(n, grid, table)) + max(n - top, 0.0) * slope


@dataclass(frozen=True, slots=True)
class RankPieces:
    """The prefill pieces of a mixed step over D attention-DP ranks (module docstring)."""

    ranks: int
    rest_tokens: FloatArray
    rest_s: FloatArray
    """R(x): one rank's pass of x tokens less its causal attention and its experts."""
    expert_tokens: FloatArray
    expert_s: FloatArray
    """X(n): the experts over n tokens of the instance."""
    attention_tokens: FloatArray
    attention_s: FloatArray

    def rank_budget(self, budget_tokens: int, decode_tokens: int) -> int:
        """A rank's prompt tokens in a step: its budget less its decoding sequences, ``⌈B/D⌉``."""
        return budget_tokens - -(-decode_tokens // self.ranks)

    def added_s(self, tokens: FloatArray, before: FloatArray, rank: FloatArray, decode_tokens: float) -> float:
        """The time the pieces (``tokens`` after ``before`` computed tokens, on ranks ``rank``) add to a step of
        ``decode_tokens`` = B decoding sequences on the instance (module docstring)."""
        tok = np.asarray(tokens, dtype=np.float64)
        if tok.size == 0 or float(tok.sum()) <= 0.0:
            return 0.0
        b_total = float(decode_tokens)
        b = b_total / self.ranks
        attn = np.interp(np.sqrt(tok * (2.0 * np.asarray(before, dtype=np.float64) + tok)),
                         self.attention_tokens, self.attention_s)  # fmt: skip
        ranks = np.asarray(rank, dtype=np.intp)
        slowest = 0.0
        for r in np.unique(ranks).tolist():
            mine = ranks == r
            c = float(tok[mine].sum())
            rest = _at(self.rest_tokens, self.rest_s, b + c) - _at(self.rest_tokens, self.rest_s, max(b, 1.0))
            slowest = max(slowest, max(rest, 0.0) + float(attn[mine].sum()))
        total = float(tok.sum())
        experts = _at(self.expert_tokens, self.expert_s, b_total + total)
        experts -= _at(self.expert_tokens, self.expert_s, max(b_total, 1.0))
        return slowest + max(experts, 0.0)

    def __call__(self, tokens: FloatArray, before: FloatArray, decode_tokens: float = 0.0) -> FloatArray:
        """Seconds per piece of pieces on ONE rank (:data:`pdplan.sim.spec.ChunkTimeFn`; the score's estimates):
        :meth:`added_s` shared among them, the GEMM side by tokens and each its own attention."""
        tok = np.asarray(tokens, dtype=np.float64)
        total = float(tok.sum())
        if total <= 0.0:
            return np.zeros_like(tok)
        attn = np.interp(np.sqrt(tok * (2.0 * np.asarray(before, dtype=np.float64) + tok)),
                         self.attention_tokens, self.attention_s)  # fmt: skip
        gemm = self.added_s(tok, before, np.zeros(tok.shape), decode_tokens) - float(attn.sum())
        return np.asarray(gemm * tok / total + attn, dtype=np.float64)


def rank_pieces(hw: RoleHardware, budget_tokens: int, max_batch: int, max_context: float) -> RankPieces:
    """Tabulate the roofline for :class:`RankPieces` on ``hw`` (D = ``hw.dp`` ranks): R up to a rank's budget, X up
    to a full batch of the instance (``max_batch`` sequences) and one rank's budget, A up to the longest prompt."""
    rest_tokens = np.arange(1.0, max(int(budget_tokens), 2) + 2.0)
    every = _pass(hw, float(hw.dp), rest_tokens)
    rest = np.broadcast_to(every.time_s, rest_tokens.shape) - every.kind_s("attn_prefill", rest_tokens.shape)
    rest = rest - every.kind_s("moe", rest_tokens.shape)
    expert_tokens = np.arange(1.0, max_batch + max(int(budget_tokens), 2) + 2.0)
    experts = _pass(hw, 1.0, expert_tokens).kind_s("moe", expert_tokens.shape)
    grid = np.arange(1.0, math.ceil(max(float(max_context), 2.0)) + 2.0)
    attn = _pass(hw, float(hw.dp), grid).kind_s("attn_prefill", grid.shape)
    return RankPieces(
        int(hw.dp),
        rest_tokens,
        np.asarray(rest, dtype=np.float64),
        expert_tokens,
        experts,
        np.concatenate(([0.0], grid)),
        np.concatenate(([0.0], attn)),
    )
