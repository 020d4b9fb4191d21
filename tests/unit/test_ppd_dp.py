"""PPD appends on a decode instance of D > 1 attention-DP ranks (issue #24 item 1; docs/prefix_cache.md §11,
*Attention data parallelism*): the closed form's append price puts the append's m tokens through the experts once,
not D times (pdplan/serving/append_price.py ``rank_gemm_s``); the simulator runs each append on its session's rank, the
slowest rank's pieces and every rank's experts setting the mixed step (pdplan/sim/append_ranks.py); the two agree on
a lone append's price and on a DP4 PPD run."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.append_price import append_work_s, rank_gemm_s
from pdplan.serving.build import build_model, model_at_rate, with_cache_rate
from pdplan.serving.ppd_report import placement_of, ppd_report
from pdplan.serving.resolve import ResolvedScenario, resolve
from pdplan.serving.roles import prefill_pass_time, prefill_split_s
from pdplan.sim.append_ranks import RankPieces, rank_pieces
from pdplan.sim.batch import Segments, Timeline
from pdplan.sim.decode import DecodeSetup
from pdplan.sim.decode_append import AppendDecodeInstance, AppendWork
from pdplan.sim.reuse_setup import reuse_inputs


def _fixed(n: float) -> dict[str, Any]:
    return {"dist": "fixed", "value": n}


def _resolved(dp: int, policy: str = "ppd", **placement: Any) -> ResolvedScenario[Any]:
    """Qwen3-30B-A3B (128 experts, 8 a token) 1P1D on H100, decode TP1 DP``dp``/EP``dp``; 4-turn sessions of 600
    new and 100 output tokens, 2 s exponential think time."""
    sessions = {"turns": _fixed(4), "new_tokens": _fixed(600), "output_tokens": _fixed(100),
                "think_time": {"dist": "exponential", "mean": "2s"}, "system_prompt_tokens": 0}  # fmt: skip
    doc: dict[str, Any] = {
        "schema_version": 1, "name": "ppd-dp", "model": "qwen3-30b-a3b", "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "decode": {"gpu": "h100-sxm", "tp": 1, "dp": dp, "ep": dp, "count": 1},
        "link": "ib-ndr", "granularity": "layer", "routing": "least-loaded", "engine": "vllm",
        "workload": {"sessions": sessions},
        "cache": {"prefix_caching": True, "routing": "affinity", "turn_placement": {"policy": policy, **placement}},
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }  # fmt: skip
    return resolve(scenario_from_dict(doc, source="test", base_dir=Path(".")), open_catalog())


def _kind(pt: Any, kind: str) -> np.ndarray:
    return np.asarray(sum((op.time_s for op in pt.ops if op.kind == kind), np.zeros(2)))


# ---- the closed form's price ----


def test_one_rank_keeps_the_pass_increment() -> None:
    hw = _resolved(1).hardware.decode
    tokens = np.array([1.0, 600.0, 8192.0])
    g, _ = prefill_split_s(hw, np.concatenate(([12.0], 12.0 + tokens)))
    np.testing.assert_array_equal(rank_gemm_s(hw, 12.0, tokens), np.maximum(g[1:] - g[0], 0.0))


def test_the_experts_see_the_append_once_not_d_times() -> None:
    # DP4/EP4, 16 sequences a rank (64 on the instance), a 600-token append on one rank: its rank's dense layers,
    # all-to-all share and attention are those of the pass in which every rank carries 16 + 600 tokens, and the
    # experts run over 64 + 600 tokens of the instance, against 64 without it. The pass in which every rank carries
    # the append put 4 × 600 through the experts.
    hw = _resolved(4).hardware.decode
    b, m = 16.0, 600.0
    every = prefill_pass_time(hw, batch=4.0, tokens=np.array([b, b + m]), detail=False)
    rest = np.asarray(every.time_s) - _kind(every, "attn_prefill") - _kind(every, "moe")
    alone = prefill_pass_time(hw, batch=1.0, tokens=np.array([4 * b, 4 * b + m]), detail=False)
    experts = _kind(alone, "moe")
    got = float(rank_gemm_s(hw, b, np.array([m]))[0])
    assert got == pytest.approx(rest[1] - rest[0] + experts[1] - experts[0], rel=1e-12)
    d_times = float(np.diff(_kind(every, "moe"))[0])
    assert experts[1] - experts[0] < 0.5 * d_times  # the 2,400 tokens the pass of every rank put through them
    g, _ = prefill_split_s(hw, np.array([b, b + m]))
    assert got < float(g[1] - g[0])  # the former price: the append on every rank


def test_a_lone_append_costs_the_closed_form_what_it_costs_the_simulator() -> None:
    # The simulator's tables (whole token counts, pdplan/sim/append_ranks.py) against the closed form's roofline
    # calls: the same physics by two routes. A 600-token append over 1,800 cached tokens in a step of 8 sequences
    # (2 a rank), and one of 8,192 + 600 tokens (two chunks of 8,192 then 600: the closed form's w sums them).
    res = _resolved(4)
    hw, budget = res.hardware.decode, int(res.chunk_tokens)
    pieces = rank_pieces(hw, budget, 256 * 4, 12_000.0)
    w, steps = append_work_s(hw, 2.0, np.array([600.0]), np.array([1800.0]), budget)
    sim = pieces.added_s(np.array([600.0]), np.array([1800.0]), np.array([0]), 8.0)
    assert steps[0] == 1.0
    assert sim == pytest.approx(float(w[0]), rel=2e-3)
    w2, steps2 = append_work_s(hw, 2.0, np.array([budget + 600.0]), np.array([1800.0]), budget)
    chunks = pieces.added_s(np.array([float(budget)]), np.array([1800.0]), np.array([0]), 8.0)
    chunks += pieces.added_s(np.array([600.0]), np.array([1800.0 + budget]), np.array([0]), 8.0)
    assert steps2[0] == 2.0
    assert chunks == pytest.approx(float(w2[0]), rel=2e-3)


# ---- the simulator's mixed step over ranks, by hand ----


def _linear_pieces() -> RankPieces:
    """R(x) = 0.1 ms + 10 µs·x, X(n) = 2 µs·n, A(s) = 0.1 µs·s on two ranks."""
    rest, experts, attn = np.arange(1.0, 67.0), np.arange(1.0, 201.0), np.arange(0.0, 301.0)
    return RankPieces(2, rest, 1e-4 + 1e-5 * rest, experts, 2e-6 * experts, attn, 1e-7 * attn)


def test_the_slowest_rank_and_every_ranks_experts_by_hand() -> None:
    # B = 10 sequences, b = 5 a rank. Rank 0 carries 20 tokens over none: R(25) − R(5) = 200 µs, A(20) = 2 µs;
    # rank 1 carries 8 over 14: R(13) − R(5) = 80 µs, A(√(8·36)) = 1.697 µs. The slower rank (202 µs) and the
    # experts over all 28 tokens, X(38) − X(10) = 56 µs: 258 µs. On one rank: R(33) − R(5) = 280 µs, both
    # attentions, and the same experts: 339.7 µs.
    pieces = _linear_pieces()
    tokens, before = np.array([20.0, 8.0]), np.array([0.0, 14.0])
    attn1 = 1e-7 * math.sqrt(8 * 36)
    assert pieces.added_s(tokens, before, np.array([0, 1]), 10.0) == pytest.approx(202e-6 + 56e-6, rel=1e-12)
    one = pieces.added_s(tokens, before, np.array([0, 0]), 10.0)
    assert one == pytest.approx(280e-6 + 2e-6 + attn1 + 56e-6, rel=1e-12)
    per_piece = pieces(tokens, before, 10.0)  # the score's estimate: pieces on one rank, their sum that price
    assert float(per_piece.sum()) == pytest.approx(one, rel=1e-12)
    # a rank's prompt budget: the step's less its ⌈B/D⌉ decoding sequences
    assert (pieces.rank_budget(64, 10), pieces.rank_budget(64, 11)) == (59, 58)


def test_two_appends_on_two_ranks_share_one_mixed_step_by_hand() -> None:
    # Decode steps of 10 ms; request 0 (prompt 32, KV transferred, 10 steps) decodes from t = 0. Requests 1 and 2
    # (prompts 48 and 40, their first 32 tokens cached) are placed at t = 0.025 on ranks 0 and 1: admitted at the
    # boundary at 0.03, they compute 16 and 8 tokens in one mixed step with B = 1 (b = 0.5). Rank 0:
    # R(16.5) − R(1) = 155 µs and A(√(16·80)) = 3.578 µs; rank 1: R(8.5) − R(1) = 75 µs and A(24) = 2.4 µs; the
    # experts X(25) − X(1) = 48 µs. The step lasts 10 ms + 158.58 + 48 µs; both first tokens at its end, request
    # 0 finishes that much late (0.1 s without appends).
    blocks = {0: [7, 8], 1: [100, 101, 102, 103], 2: [200, 201, 202]}
    work = AppendWork(
        chunk_s=_linear_pieces(), budget_tokens=64, block_tokens=16, blocks=lambda r, c: blocks[r][:c],
        lookup_blocks=[1, 2, 2], prompt_blocks=[2, 3, 3], sequence_blocks=[2, 3, 3], append_steps=[9, 3, 3],
        hit_tokens=[0, 0, 0], ranks=_linear_pieces(), rank_of=[0, 0, 1],
    )  # fmt: skip
    tl = Timeline(3)
    setup = DecodeSetup(lambda b, k: np.full(np.shape(b), 0.01), 8, math.inf, [32, 48, 40], [10, 4, 4], tl,
                        Segments(), True, 0.0)  # fmt: skip
    inst = AppendDecodeInstance(setup, work)
    inst.caches[0].keep([100, 101], free_tokens=math.inf)  # each session's history in its rank's KV
    inst.caches[1].keep([200, 201], free_tokens=math.inf)
    inst.submit(0, 0.0)
    while inst.next_time <= 0.025:
        inst.fire()
    inst.submit_append(1, 0.025)
    inst.submit_append(2, 0.025)
    assert inst.append_tokens_ahead(0) == 48  # queued: counted whole
    assert inst.append_tokens_ahead(1) == 40
    while inst.next_time < math.inf:
        inst.fire()
    added = 155e-6 + 1e-7 * math.sqrt(16 * 80) + 48e-6
    assert work.hit_tokens == [0, 32, 32]
    assert tl.first_token[1] == pytest.approx(0.04 + added, rel=1e-12)
    assert tl.first_token[2] == pytest.approx(0.04 + added, rel=1e-12)
    assert tl.finish[0] == pytest.approx(0.1 + added, rel=1e-12)


def test_each_rank_keeps_its_own_sessions_kv_by_hand() -> None:
    # 128 KV slots on two ranks, 64 (4 blocks of 16) each. Request 0 (session on rank 0: prompt 32, 10 steps)
    # reserves 42 slots of rank 0, which leaves its session KV ⌊22/16⌋ = 1 block and rank 1's its 4 (one cache for
    # the instance: ⌊86/16⌋ = 5). When it finishes its 2 whole blocks are rank 0's, not rank 1's; 5 histories'
    # blocks on rank 1 keep its 4 most recent, where the instance's 128 slots would hold all 5.
    work = AppendWork(
        chunk_s=_linear_pieces(), budget_tokens=64, block_tokens=16, blocks=lambda r, c: [7, 8][:c],
        lookup_blocks=[1], prompt_blocks=[2], sequence_blocks=[2], append_steps=[9], hit_tokens=[0],
        ranks=_linear_pieces(), rank_of=[0],
    )  # fmt: skip
    setup = DecodeSetup(lambda b, k: np.full(np.shape(b), 0.01), 8, 128.0, [32], [10], Timeline(1), Segments(), True,
                        0.0)  # fmt: skip
    inst = AppendDecodeInstance(setup, work)
    inst.submit(0, 0.0)
    inst.fire()
    assert (inst.free_tokens(0), inst.free_tokens(1)) == (22.0, 64.0)
    assert [c.lru.capacity for c in inst.caches] == [1, 4]
    while inst.next_time < math.inf:
        inst.fire()
    assert inst.caches[0].held_prefix([7, 8]) == 2
    assert inst.caches[1].held_prefix([7, 8]) == 0
    inst.caches[1].keep([300, 301, 302, 303, 304], inst.free_tokens(1))
    assert inst.caches[1].held_prefix([300]) == 0
    assert inst.caches[1].held_prefix([301, 302, 303, 304]) == 4


# ---- the closed form against the simulator ----


def test_dp4_ppd_run_against_the_closed_form() -> None:
    # 30 req/s nominal, 3,000 requests, seed 0; the closed form on the line its offered rate runs on, at that rate.
    # On 2026-12-07 (docs/prefix_cache.md §11): TPOT mean 15.50 against 15.20 ms (+2.0 %; +8.5 % before the
    # appends' experts were priced once), Turn 2+ TTFT P90 46.1 against 46.2 ms (−0.2 %; +20.5 % before). With the
    # appends of different ranks side by side in a step (pdplan/serving/ppd_ranks.py; ρ_a 0.162 → 0.147): TPOT mean
    # 15.21 against 15.20 ms (+0.1 %), P90 15.90 against 15.72 ms, Turn 2+ TTFT P90 45.3 against 46.2 ms (−1.8 %).
    res = _resolved(4)
    rate = 30.0
    model = build_model(res)
    inputs = reuse_inputs(model, rate)
    run = inputs.simulate(
        model, res.scenario.workload, rate_rps=rate, n_requests=3000, seed=0, warmup_fraction=0.2, turn_latency_s=None
    )
    offered = run.offered_rps
    closed = model_at_rate(with_cache_rate(res, offered), offered)
    placement, report = placement_of(closed), ppd_report(res, closed)
    assert placement is not None
    assert report is not None
    assert report.ttft_turn2_p90_s is not None
    assert run.turns is not None
    assert run.turns.share_on_decode is not None
    assert placement.share_on_decode == pytest.approx(run.turns.share_on_decode, abs=0.01)  # 3 turns of 4
    warm = run.run.warmup_count
    tpot = run.run.tpot_s[warm:]
    ttft, turn = run.ttft_s[warm:], run.turn[warm:]
    closed_tpot = closed.snapshot(np.array([offered])).tpot_summary(90)[0].mean
    assert closed_tpot == pytest.approx(float(np.nanmean(tpot)), rel=0.03)
    assert report.ttft_turn2_p90_s == pytest.approx(float(np.percentile(ttft[turn > 1], 90)), rel=0.05)


# ---- the score rule on the step law ----


def test_the_score_decides_on_the_law_whichever_line_is_priced() -> None:
    # Qwen3-30B-A3B's decode step is concave in the batch, the minimum of two lines (pdplan/serving/decode_lines.py).
    # One decode instance (DP1) at 10 req/s: the law runs on line 1, τ̄ = 23.73 ms (line 0's own fixed point is
    # 63.4 ms; decode_at clamps it at 0.99 of that line's capacity, 45.2 ms). The score rule compares PD's and PPD's
    # figures of the deployment, so every line's model decides on the law's: at w_tpot = 3.2 the 600-token appends
    # of turns 2 and 3 stay on the prefill pool (TTFT gain 0.346 < 3.2 × TPOT loss 0.1146 = 0.367) and turn 4's
    # goes to decode (gain 0.40). Priced on line 0's own steps (45.2 → 48.2 ms: a TPOT loss of 0.066) the line-0
    # model placed every Turn 2+.
    from pdplan.queueing import decode_fixed_point
    from pdplan.serving.ppd_model import _law_at

    res = with_cache_rate(_resolved(1, "score", tpot_weight=3.2), 10.0)
    models = [build_model(dataclasses.replace(res, decode_line=line)) for line in (0, 1)]
    plain = build_model(with_cache_rate(_resolved(1, "pd"), 10.0))
    lines = plain.decode.law_lines
    assert len(lines) == 2
    taus = [float(decode_fixed_point(np.array([10.0]), plain.cells, line).tau_mean_s[0]) for line in lines[1:]]
    assert _law_at(plain, 10.0, 0.0).tau_s == pytest.approx(taus[0], rel=1e-12)
    assert taus[0] == pytest.approx(0.02373, abs=1e-5)
    for model in models:
        p = placement_of(model)
        assert p is not None
        placed = p.placed / np.maximum(p.held, 1e-300)
        np.testing.assert_array_equal(placed, [0.0, 0.0, 0.0, 1.0])
