"""How many prompts a context step of the spread steady state carries (``steady_arrivals: spread``).

The spread regime (:mod:`pdplan.benchmark.colocated_loop`) is the one in which host jitter gives every request its own
phase in the cycle, where the phase-locked regime keeps the start-up burst's groups. An in-flight-batching engine
without chunking (TensorRT-LLM: the scheduler takes every waiting context request up to ``max_num_tokens`` at each
iteration; vLLM alike within its budget) schedules together all the requests that arrived while the step before
ran. When the steps are short beside the arrival spacing, almost every context step carries one prompt (the
singleton pattern); when a step is long (an eager step that launches every kernel from the host: 94 MoE layers ×
0.6 ms = 56 ms for Qwen3-235B) several arrivals land in one step and are prefilled together. This module gives the
mean number of prompts ḡ per context step; the loop then prices the cycle with ``C/ḡ`` groups of ḡ prompts
(:func:`even_groups`), the token budget repacking what does not fit (``settled_groups``).

Derivation (renewal argument, no fitted term). In a cycle of length T (one request's end to end, its
per-request overhead included) each of the C clients arrives once, at a phase independent of the others (the
spread assumption), so the number of arrivals in a window of length L is Binomial(C, L/T) and a window holds at
least one with probability ``q(L) = 1 − (1 − L/T)^C`` (``= 1`` once L ≥ T). A step collects the arrivals of the
window one step long before it (with the overlap scheduler the window is the step two back; in a run of steps of
one kind the length is the same). The steps then form a two-state Markov chain:

* after a decode-only step (CUDA-graph replay, τ = τ_d(C)) the next step carries prompts with probability
  ``q_d = q(τ)``;
* after a context step (S = S(ḡ): GPU time with its prompts, floored at the eager launch time) the next one does
  with probability ``q_c = q(S)``.

Its stationary share of context steps is ``π_c = q_d/(q_d + 1 − q_c)`` and the mean step ``L̄ = π_c·S + (1 − π_c)·τ``.
Every arrival is prefilled in exactly one context step, so arrivals per unit time C/T equal prompts per context
step times context steps per unit time π_c/L̄:

    ḡ = (C/T)·L̄/π_c,

(the mean of "at least one arrival" over the two kinds of window,
``[π_c·q_c·(C·S/T)/q_c + (1 − π_c)·q_d·(C·τ/T)/q_d]/π_c``, is the same).
S depends on ḡ and T on the whole cycle, so ḡ, S and T are solved together: the inner fixed point here (ḡ and S at
a given T), the outer one in the loop (T from the cycle priced with the merged groups, starting from singletons:
merging shortens the cycle, which raises the arrival rate, so the iteration rises monotonically to the least
fixed point). Limits: ``C·S/T → 0`` gives ``ḡ → 1`` (the singleton pattern, kept where steps are short), and
``S ≥ T`` gives every step a context step with ``ḡ = C·S/T``.

What it leaves out: the TTFT keeps the loop's own accounting (the step in flight, the overlap scheduler's step
behind it, its own step: ``_mixed_steady``); arrivals are taken independent (jitter larger than a step), so a group
prefilled together and finishing together is not kept together (that is the phase-locked regime).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pdplan.errors import SpecError


def window_hit(clients: int, cycle_s: float, window_s: float) -> float:
    """q(L) = 1 − (1 − L/T)^C: the chance that at least one of C clients, each arriving once per cycle T at an
    independent phase, arrives within a window of L (module docstring)."""
    return 1.0 - (1.0 - min(window_s / cycle_s, 1.0)) ** clients


def merged_group_size(
    clients: int,
    cycle_s: float,
    decode_step_s: float,
    context_step_s: Callable[[float], float],
    *,
    iterations: int = 64,
) -> float:
    """ḡ ≥ 1: the mean prompts per context step for C clients over a cycle T, τ the decode-only step and S(g) the
    step with g prompts (module docstring); SpecError if T or τ is not positive."""
    if cycle_s <= 0.0 or decode_step_s <= 0.0 or clients < 1:
        raise SpecError(
            f"merged_group_size needs clients >= 1, cycle_s > 0 and decode_step_s > 0, got {clients}, {cycle_s}, "
            f"{decode_step_s}",
            field="cycle_s",
        )
    q_d = window_hit(clients, cycle_s, decode_step_s)
    g = 1.0
    for _ in range(iterations):
        step_s = context_step_s(g)
        q_c = window_hit(clients, cycle_s, step_s)
        share = q_d / (q_d + 1.0 - q_c)  # π_c; q_d > 0 since τ > 0
        mean_step_s = share * step_s + (1.0 - share) * decode_step_s
        new = min(max(1.0, clients / cycle_s * mean_step_s / share), float(clients))
        if abs(new - g) <= 1e-9 * new:
            return new
        g = new
    return g


def even_groups(clients: int, group_size: float) -> np.ndarray:
    """``round(C/ḡ)`` groups (at least 1) of ⌊C/G⌋ or ⌈C/G⌉ prompts, the larger first, summing to C."""
    count = int(min(max(round(clients / group_size), 1), clients))
    groups = np.full(count, clients // count, dtype=np.int64)
    groups[: clients % count] += 1
    return groups
