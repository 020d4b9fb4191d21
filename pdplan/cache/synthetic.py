"""Block traces drawn from the closed-form workloads, to measure the closed forms against the exact LRU.

:func:`session_traces` and :func:`shared_prefix_trace` sample the processes that
:mod:`pdplan.cache.lru_closed_form` describes (Poisson arrivals, the same laws of turns and think times, the same
token counts rounded to whole blocks) and return :class:`~pdplan.cache.trace.BlockTrace` objects, one per
instance, for :func:`pdplan.cache.stack_distance.hit_ratio_curve`. Each request's blocks are its prompt (looked up)
then its output (inserted), as :class:`~pdplan.cache.trace.BlockTrace` describes. Seeded and deterministic.
"""

from __future__ import annotations

import math

import numpy as np

from pdplan.cache.lru_closed_form import SessionRouting, SessionWorkload, SharedPrefixWorkload, ThinkTime
from pdplan.cache.trace import BlockTrace
from pdplan.errors import SpecError
from pdplan.types import FloatArray, Int64Array


def _blocks(tokens: float, block_tokens: int) -> int:
    blocks = tokens / block_tokens
    if abs(blocks - round(blocks)) > 1e-9:
        raise SpecError(f"{tokens:g} tokens are not whole blocks of {block_tokens}", field="block_tokens")
    return round(blocks)


def _think_times(law: ThinkTime, size: int, rng: np.random.Generator) -> FloatArray:
    if law.kind == "exponential":
        return rng.exponential(law.mean_s, size)
    if law.kind == "fixed":
        return np.full(size, law.mean_s)
    mu = math.log(law.mean_s) - law.sigma**2 / 2
    return rng.lognormal(mu, law.sigma, size)


def _csr(
    lengths: Int64Array, bases: Int64Array, order: Int64Array, prompt_blocks: Int64Array, block_tokens: int
) -> BlockTrace:
    """Requests ``order`` (arrival order), request i being the ids ``bases[i] .. bases[i] + lengths[i] − 1``."""
    lengths, bases, prompts = lengths[order], bases[order], prompt_blocks[order]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    within = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    ids = np.repeat(bases, lengths) + within
    return BlockTrace(offsets, ids, block_tokens, prompt_blocks=prompts)


def session_traces(
    workload: SessionWorkload,
    n_sessions: int,
    block_tokens: int,
    *,
    instances: int = 1,
    routing: SessionRouting = "session-affine",
    seed: int = 0,
) -> list[BlockTrace]:
    """One trace per instance of ``n_sessions`` sessions: turn k's blocks are the first ``H_k`` blocks of its
    session's history (prompt ``H_{k−1} + append``, then the output)."""
    rng = np.random.default_rng(seed)
    system, append = _blocks(workload.system_tokens, block_tokens), _blocks(workload.append_tokens, block_tokens)
    output = _blocks(workload.output_tokens, block_tokens)
    turns = rng.choice(len(workload.turns_pmf), n_sessions, p=np.asarray(workload.turns_pmf)) + 1
    starts = np.cumsum(rng.exponential(1.0 / workload.session_rate_per_s, n_sessions))
    session = np.repeat(np.arange(n_sessions), turns)
    first_turn = np.concatenate(([0], np.cumsum(turns)[:-1]))
    k = np.arange(len(session)) - first_turn[session] + 1
    gaps = workload.turn_duration_s + _think_times(workload.think_time, len(session), rng)
    gaps[k == 1] = 0.0
    elapsed = np.cumsum(gaps)
    arrival = starts[session] + elapsed - elapsed[first_turn[session]]
    history = system + k * (append + output)
    span = system + turns * (append + output)
    bases = (np.concatenate(([0], np.cumsum(span)[:-1])))[session].astype(np.int64)
    if routing == "session-affine":
        instance = rng.integers(0, instances, n_sessions)[session]
    else:
        instance = rng.integers(0, instances, len(session))
    order = np.argsort(arrival, kind="stable")
    prompt = (history - output).astype(np.int64)
    return [
        _csr(history.astype(np.int64), bases, order[instance[order] == i], prompt, block_tokens)
        for i in range(instances)
    ]


def shared_prefix_trace(
    workload: SharedPrefixWorkload, n_requests: int, block_tokens: int, *, seed: int = 0
) -> BlockTrace:
    """One instance's trace: each request is its prefix's blocks, its question blocks, then its output blocks
    (Poisson arrivals only fix the order, which is all an LRU sees). With ``questions_per_prefix`` U, prefix j's k-th
    request resends its question k mod U (the same block ids after the same prefix); else each question is new."""
    rng = np.random.default_rng(seed)
    prefix = np.array([_blocks(t, block_tokens) for t in workload.prefix_tokens], dtype=np.int64)
    question = _blocks(workload.question_tokens, block_tokens)
    output = _blocks(workload.output_tokens, block_tokens)
    choice = rng.choice(len(prefix), n_requests, p=np.asarray(workload.popularity))
    resent = workload.questions_per_prefix
    own = output if resent is not None else question + output
    prefix_base = np.concatenate(([0], np.cumsum(prefix)[:-1]))
    question_base = int(prefix.sum())
    unique_base = question_base + (question * len(prefix) * resent if resent else 0) + own * np.arange(n_requests)
    shared = prefix[choice] + (question if resent is not None else 0)  # blocks another request may send again
    lengths = prefix[choice] + question + output
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    within = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    in_prefix = within < np.repeat(prefix[choice], lengths)
    slot = _nth_of_prefix(choice) % resent if resent else np.zeros(n_requests, np.int64)
    question_start = question_base + (choice * (resent or 1) + slot) * question - prefix[choice]
    ids = np.where(
        in_prefix,
        np.repeat(prefix_base[choice], lengths) + within,
        np.where(
            within < np.repeat(shared, lengths),
            np.repeat(question_start, lengths) + within,
            np.repeat(unique_base - shared, lengths) + within,
        ),
    )
    return BlockTrace(offsets, ids.astype(np.int64), block_tokens, prompt_blocks=prefix[choice] + question)


def _nth_of_prefix(choice: Int64Array) -> Int64Array:
    """Per request, how many earlier requests chose the same prefix."""
    order = np.argsort(choice, kind="stable")
    first = np.searchsorted(choice[order], choice[order], side="left")
    nth = np.empty(choice.size, dtype=np.int64)
    nth[order] = np.arange(choice.size) - first
    return nth
