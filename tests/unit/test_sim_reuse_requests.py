"""The simulator's reuse requests (pdplan/sim/reuse_requests.py, reuse_sessions.py, reuse_workload.py): block layouts
worked by hand, the session stream's rate, seeds and common random numbers, shared-prefix popularity, and Mooncake
traces with their own block ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.io.traces_mooncake import load_mooncake_trace
from pdplan.sim.reuse import affinity_keys, affinity_routes
from pdplan.sim.reuse_requests import ReuseRequests, blocks_of, mooncake_requests, shared_prefix_requests
from pdplan.sim.reuse_sessions import session_requests
from pdplan.specs.reuse import SessionsSpec, SharedPrefixSpec

TRACE = Path(__file__).resolve().parents[1] / "data" / "mooncake" / "conversation_trace_head200.jsonl"


def _fixed(n: float) -> dict[str, Any]:
    return {"dist": "fixed", "value": n}


def _sessions(turns: dict[str, Any], new: int = 40, out: int = 24, think: float = 1.0, **extra: Any) -> SessionsSpec:
    data = {"turns": turns, "new_tokens": _fixed(new), "output_tokens": _fixed(out), "think_time": _fixed(think)}
    return SessionsSpec.model_validate({**data, **extra})


def _blocks(reqs: ReuseRequests, i: int, count: int) -> list[int]:
    return blocks_of(reqs.block_lists(), i, count)


def test_session_blocks_by_hand() -> None:
    # System prompt 32 tokens (2 blocks of 16), 3 turns of 40 new and 24 output tokens: prompts 72, 136, 200;
    # sequences 96, 160, 224 (6, 10, 14 blocks); lookups ⌊(P − 1)/16⌋ = 4, 8, 12 blocks.
    spec = _sessions(_fixed(3), system_prompt_tokens=32)
    reqs = session_requests(spec, "poisson", 3.0, 30, seed=1, stationary_start=False)
    first = np.flatnonzero(reqs.turn == 1)
    s0, s1 = int(first[0]), int(first[1])
    assert reqs.input_tokens[s0 : s0 + 3].tolist() == [72, 136, 200]
    assert reqs.lookup_blocks[s0 : s0 + 3].tolist() == [4, 8, 12]
    assert reqs.prompt_blocks[s0 : s0 + 3].tolist() == [4, 8, 12]
    assert reqs.sequence_blocks[s0 : s0 + 3].tolist() == [6, 10, 14]
    seq1 = _blocks(reqs, s0, 6)
    assert _blocks(reqs, s0 + 1, 10)[:6] == seq1  # turn 2 re-sends turn 1's prompt and answer
    assert _blocks(reqs, s0 + 2, 14)[:10] == _blocks(reqs, s0 + 1, 10)
    other = _blocks(reqs, s1, 6)
    assert other[:2] == seq1[:2]  # the system prompt's blocks are shared
    assert not set(other[2:]) & set(_blocks(reqs, s0 + 2, 14))  # the rest is the session's own
    # turns 2 and 3 are released by the turn before, after the 1 s think time; the last releases nothing
    assert np.isnan(reqs.arrival_s[s0 + 1 : s0 + 3]).all()
    assert not np.isnan(reqs.arrival_s[s0])
    assert reqs.next_request[s0 : s0 + 3].tolist() == [s0 + 1, s0 + 2, -1]
    assert reqs.think_s[s0 : s0 + 3].tolist() == [1.0, 1.0, 0.0]


def test_distinct_system_prompts_spread_sessions() -> None:
    spec = _sessions(_fixed(1), system_prompt_tokens=64, distinct_system_prompts=2)
    reqs = session_requests(spec, "poisson", 2.0, 20, seed=0, stationary_start=False)
    heads = {tuple(_blocks(reqs, i, 4)) for i in range(reqs.count)}
    assert len(heads) == 2  # sessions s mod 2


def test_session_stream_rate_and_horizon() -> None:
    # Sessions start at λ/E[T]: about N/E[T] of them by t_end = N/λ, and those turns arrive within it.
    spec = _sessions({"dist": "geometric", "mean": 3.1}, think=2.0)
    reqs = session_requests(spec, "poisson", 10.0, 20_000, seed=3, stationary_start=False)
    firsts = int(np.sum(reqs.turn == 1))
    assert firsts == pytest.approx(20_000 / 3.1, rel=0.03)
    assert reqs.count_until_s == pytest.approx(2_000.0)
    assert reqs.count == pytest.approx(20_000, rel=0.04)
    assert reqs.turn.max() > 15  # geometric tail


def test_session_length_means_by_hand() -> None:
    # The grid's spread sessions (docs/prefix_cache.md §9): geometric turns of mean 3.1 (p = 1/3.1), new tokens
    # lognormal of truncated mean 600, outputs of truncated mean 250 (σ = 1). A random request has E[K − 1] =
    # (E[T²] − E[T])/(2E[T]) = (1 − p)/p = 2.1 earlier turns, so E[P] = 600 + 2.1·(600 + 250) = 2385 and E[O] = 250:
    # the closed form's prompt law, and the simulator's turns counted over whole sessions (the request mix exactly).
    spec = SessionsSpec.model_validate(
        {"turns": {"dist": "geometric", "mean": 3.1}, "think_time": _fixed(60.0),
         "new_tokens": {"dist": "lognormal", "mean": 600, "sigma": 1.0, "max": 16384},
         "output_tokens": {"dist": "lognormal", "mean": 250, "sigma": 1.0, "max": 4096}}
    )  # fmt: skip
    assert spec.prompt_pmf().mean() == pytest.approx(2385.0, rel=1e-4)
    assert spec.mean_history_tokens() == pytest.approx(2.1 * 850.0, rel=1e-4)
    reqs = session_requests(spec, "poisson", 10.0, 60_000, seed=7, stationary_start=False)
    assert reqs.input_tokens.mean() == pytest.approx(2385.0, rel=0.03)
    assert reqs.output_tokens.mean() == pytest.approx(250.0, rel=0.02)
    first = reqs.turn == 1
    assert reqs.input_tokens[first].mean() == pytest.approx(600.0, rel=0.02)  # turn 1: its new tokens only


def test_stationary_start_sessions_in_progress() -> None:
    # Little's law: λ_s · E[T − 1] · E[Z] sessions sit in a think gap at t = 0 (λ_s = 10/3.1, E[Z] = 20 s).
    spec = _sessions({"dist": "geometric", "mean": 3.1}, think=20.0)
    reqs = session_requests(spec, "poisson", 10.0, 2_000, seed=4)
    in_progress = int(np.sum(reqs.turn[~np.isnan(reqs.arrival_s)] > 1))
    assert in_progress == pytest.approx(10.0 / 3.1 * 2.1 * 20.0, rel=0.15)
    assert reqs.warm_request.size == in_progress
    assert np.all(reqs.arrival_s[reqs.warm_request] <= 20.0)  # within one think time


def test_stationary_start_with_turn_latency() -> None:
    # Turn cycles of D + Z (D = 10 s, Z exponential of mean 20 s): Little's law over the cycle puts
    # λ_s · E[T − 1] · (D + E[Z]) = (100/3.1) · 2.1 · 30 ≈ 2,032 sessions in progress at t = 0, each starting its next
    # turn after the residual of a length-biased cycle, mean E[(D + Z)²] / (2 (D + E[Z])) = (100 + 400 + 800) / 60
    # = 21.67 s (D = 0: E[Z²] / (2 E[Z]) = 800 / 40 = 20 s).
    think = {"dist": "exponential", "mean": 20.0}
    spec = SessionsSpec.model_validate(
        {"turns": {"dist": "geometric", "mean": 3.1}, "new_tokens": _fixed(40), "output_tokens": _fixed(24),
         "think_time": think}
    )  # fmt: skip
    firsts = []
    for latency_s in (10.0, 0.0):
        reqs = session_requests(spec, "poisson", 100.0, 2_000, seed=4, turn_latency_s=latency_s)
        placed = reqs.turn[~np.isnan(reqs.arrival_s)] > 1
        firsts.append(reqs.arrival_s[~np.isnan(reqs.arrival_s)][placed])
    assert firsts[0].size == pytest.approx(100.0 / 3.1 * 2.1 * 30.0, rel=0.06)
    assert firsts[1].size == pytest.approx(100.0 / 3.1 * 2.1 * 20.0, rel=0.06)
    assert float(np.mean(firsts[0])) == pytest.approx(1300.0 / 60.0, rel=0.06)
    assert float(np.mean(firsts[1])) == pytest.approx(20.0, rel=0.06)
    zero = session_requests(spec, "poisson", 100.0, 2_000, seed=4)  # D = 0 draws what the zero-latency start drew
    assert np.array_equal(np.nan_to_num(zero.arrival_s, nan=-1.0), np.nan_to_num(reqs.arrival_s, nan=-1.0))
    with pytest.raises(ValueError, match="turn latency"):
        session_requests(spec, "poisson", 100.0, 2_000, turn_latency_s=-1.0)


def test_seeded_and_common_random_numbers() -> None:
    spec = _sessions({"dist": "geometric", "mean": 2.0}, think=1.0)
    a = session_requests(spec, "poisson", 4.0, 500, seed=5, stationary_start=False)
    b = session_requests(spec, "poisson", 4.0, 500, seed=5, stationary_start=False)
    c = session_requests(spec, "poisson", 8.0, 500, seed=5, stationary_start=False)
    assert np.array_equal(a.input_tokens, b.input_tokens)
    assert np.array_equal(a.arrival_s, b.arrival_s, equal_nan=True)
    assert np.array_equal(a.input_tokens, c.input_tokens)  # same sessions at another rate …
    np.testing.assert_allclose(c.arrival_s * 2.0, a.arrival_s)  # … arriving twice as fast


def _prefix(n: int, popularity: dict[str, Any] | None = None, **extra: Any) -> SharedPrefixSpec:
    data = {
        "num_prefixes": n,
        "prefix_tokens": _fixed(160),
        "question_tokens": _fixed(40),
        "output_tokens": _fixed(8),
        **({"popularity": popularity} if popularity else {}),
        **extra,
    }
    return SharedPrefixSpec.model_validate(data)


def test_shared_prefix_blocks_by_hand() -> None:
    # Prefix 160 tokens = 10 blocks shared by its requests; the question (40 tokens) and output are the request's own.
    reqs = shared_prefix_requests(_prefix(3), "poisson", 5.0, 300, seed=2)
    assert set(reqs.input_tokens.tolist()) == {200}
    assert set(reqs.lookup_blocks.tolist()) == {12}
    by_prefix: dict[int, list[int]] = {}
    owned: set[int] = set()
    for i in range(reqs.count):
        blocks = _blocks(reqs, i, 12)
        assert by_prefix.setdefault(int(reqs.affinity_key[i]), blocks[:10]) == blocks[:10]
        assert not owned & set(blocks[10:])
        owned |= set(blocks[10:])
    assert len({tuple(v) for v in by_prefix.values()}) == 3
    assert float(np.mean(np.diff(reqs.arrival_s))) == pytest.approx(0.2, rel=0.15)


def test_repeated_questions_share_their_blocks() -> None:
    # Two questions per prefix: prefix j's k-th request re-sends question k mod 2 (inference-perf).
    reqs = shared_prefix_requests(_prefix(1, questions_per_prefix=2), "poisson", 5.0, 6, seed=2)
    prompts = [tuple(_blocks(reqs, i, 12)) for i in range(6)]
    assert prompts[0] == prompts[2] == prompts[4] != prompts[1] == prompts[3]


def test_zipf_popularity() -> None:
    spec = _prefix(8, {"kind": "zipf", "s": 1.0})
    reqs = shared_prefix_requests(spec, "poisson", 5.0, 20_000, seed=6)
    share = np.bincount(reqs.affinity_key, minlength=8) / reqs.count
    np.testing.assert_allclose(share, spec.prefix_probabilities(), atol=0.01)


def test_mooncake_requests_keep_the_trace_ids() -> None:
    trace = load_mooncake_trace(TRACE, 512)
    reqs = mooncake_requests(trace, 512, np.arange(trace.requests, dtype=float))
    assert reqs.count == trace.requests == 200
    for i in (0, 1, 57, 199):
        ids = trace.hash_ids[trace.hash_offsets[i] : trace.hash_offsets[i + 1]].tolist()
        assert _blocks(reqs, i, len(ids)) == ids
        assert reqs.lookup_blocks[i] == (trace.input_tokens[i] - 1) // 512
    assert reqs.affinity_key[1] == trace.hash_ids[trace.hash_offsets[1]]


def test_trace_affinity_keys_spread_a_shared_first_block() -> None:
    # Every request of the conversation trace opens with block 0: keyed on it alone, affinity would send them all
    # to one instance. The key lengthens until no key holds more than 1.5 / N of the requests; requests sharing
    # their leading blocks (one conversation) keep one key.
    trace = load_mooncake_trace(TRACE, 512)
    reqs = mooncake_requests(trace, 512, np.arange(trace.requests, dtype=float))
    assert len(set(reqs.affinity_key.tolist())) == 1
    keys = affinity_keys(reqs, 4)
    assert np.unique(keys, return_counts=True)[1].max() <= 1.5 * reqs.count / 4
    routes = affinity_routes(keys, 4, seed=0)
    assert np.bincount(routes, minlength=4).min() > 0
    heads = [tuple(_blocks(reqs, i, 16)) for i in range(reqs.count)]
    same = [(i, j) for i in range(50) for j in range(i + 1, 50) if heads[i] == heads[j]]
    assert all(keys[i] == keys[j] for i, j in same)
    assert np.array_equal(affinity_keys(reqs, 1), reqs.affinity_key)
