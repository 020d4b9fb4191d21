"""The simulator's PPD turn placement (pdplan/sim/turn_placement.py, decode_append.py, decode_cache.py, turn_stats.py):
hand-worked decode-side steps and caches, one 3-turn session placed and priced by hand, ``pd`` identical to today's
run, one-turn sessions placing nothing, the threshold and score rules, and load-balanced decode routing finding a
history only on the instance that holds it."""

from __future__ import annotations

import dataclasses
import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.request_overhead import request_delay_s
from pdplan.serving.resolve import resolve
from pdplan.sim.batch import Segments, Timeline
from pdplan.sim.decode import DecodeSetup
from pdplan.sim.decode_append import AppendDecodeInstance, AppendWork
from pdplan.sim.decode_cache import DecodeKvCache
from pdplan.sim.deployment import sim_chunk_price
from pdplan.sim.reuse import CacheLayout, ReuseResult, simulate_reuse
from pdplan.sim.reuse_sessions import session_requests
from pdplan.specs.arrivals import ConstantArrival
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.specs.reuse import SessionsSpec
from pdplan.types import FloatArray

UNBOUNDED = CacheLayout(1e12)
CONSTANT = ConstantArrival(process="constant")
LLAMA_8B_KV_BYTES = 2 * 32 * 8 * 128 * 2
"""Llama-3.1-8B's BF16 KV per token: K and V × 32 layers × 8 KV heads × head dim 128 × 2 bytes = 131,072 B."""


def _fixed(n: float) -> dict[str, Any]:
    return {"dist": "fixed", "value": n}


@cache
def _model(prefill: int = 1, decode: int = 1, routing: str = "random", policy: str | None = None) -> DisaggregatedModel:
    """Llama-3.1-8B on H100, ``prefill``P``decode``D TP1 (only the deployment matters: the workload is given);
    ``policy``: built for a 3-turn sessions workload with this ``turn_placement`` (``ppd``: the closed form's
    placement, its decode step stretched by the appends)."""
    data: dict[str, Any] = {
        "schema_version": 1,
        "name": "ppd-unit",
        "model": "llama-3.1-8b",
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 1, "count": prefill},
        "decode": {"gpu": "h100-sxm", "tp": 1, "count": decode},
        "link": "ib-ndr",
        "granularity": "layer",
        "routing": routing,
        "workload": {"input_tokens": _fixed(256), "output_tokens": _fixed(32)},
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }
    if policy is not None:
        sessions = {
            "turns": _fixed(3),
            "new_tokens": _fixed(200),
            "output_tokens": _fixed(100),
            "think_time": _fixed(0),
        }
        data["workload"] = {"sessions": sessions}
        data["cache"] = {"routing": "affinity", "turn_placement": {"policy": policy}}
    model = build_model(resolve(scenario_from_dict(data, source="test", base_dir=Path(".")), open_catalog()))
    assert isinstance(model, DisaggregatedModel)
    return model


def _sessions(turns: dict[str, Any], new: int, out: int, think: float, system: int = 0) -> SessionsSpec:
    return SessionsSpec.model_validate(
        {"turns": turns, "new_tokens": _fixed(new), "output_tokens": _fixed(out), "think_time": _fixed(think),
         "system_prompt_tokens": system}
    )  # fmt: skip


def _run(spec: SessionsSpec, rate: float, n: int, policy: str | None, **kw: Any) -> ReuseResult:
    model = kw.pop("model", None) or _model()
    reqs = session_requests(spec, kw.pop("arrival", "poisson"), rate, n, block_tokens=16, seed=kw.pop("seed", 0),
                            stationary_start=kw.pop("stationary_start", False))  # fmt: skip
    reqs = dataclasses.replace(reqs, count_until_s=math.inf)  # count every turn, drain included
    placement = None if policy is None else TurnPlacementSpec(policy=policy, **kw.pop("weights", {}))
    layout = kw.pop("layout", UNBOUNDED)
    return simulate_reuse(model, reqs, layout, rate_rps=rate, warmup_fraction=0.0, placement=placement, **kw)


# ---- the decode side by hand ----


def test_decode_cache_follows_the_free_kv_and_keeps_shared_blocks_found() -> None:
    kv = DecodeKvCache(free_tokens=64, block_tokens=16)  # room for 4 blocks
    kv.keep([1, 2, 3], free_tokens=64)
    kv.keep([4, 5], free_tokens=64)  # 5 blocks in 4: block 1, the least recent, goes
    assert kv.held_prefix([1, 2, 3]) == 0
    assert kv.held_prefix([2, 3, 9]) == 2
    kv.take([2, 3])  # a running sequence holds 2 and 3: out of the LRU, still found
    assert kv.blocks == 2
    assert kv.held_prefix([2, 3, 4]) == 3
    kv.resize(free_tokens=16)  # its reservation leaves one block: 4 (less recent than 5) goes
    assert kv.held_prefix([4]) == 0
    assert kv.held_prefix([5]) == 1
    kv.release([2, 3])
    kv.keep([2, 3, 6], free_tokens=48)  # finished: back as the most recent, 5 stays, 3 blocks fit
    assert [kv.held_prefix([b]) for b in (5, 2, 3, 6)] == [0, 1, 1, 1]


def _instance(work: AppendWork, tl: Timeline) -> AppendDecodeInstance:
    prompt, steps = [32, 48], [10, 4]
    setup = DecodeSetup(lambda b, k: np.full(np.shape(b), 0.01), 8, math.inf, prompt, steps, tl, Segments(), True, 0.0)
    return AppendDecodeInstance(setup, work)


def _drain(inst: AppendDecodeInstance, until_s: float = math.inf) -> None:
    while inst.next_time <= until_s and inst.next_time < math.inf:
        inst.fire()


def test_append_rides_in_one_mixed_step_and_slows_the_running_sequence() -> None:
    # Decode steps of 10 ms whatever the batch; a prefill piece costs 0.1 ms a token. Request 0 (prompt 32, KV
    # transferred, 10 steps, convention A) decodes from t = 0: steps end at 0.01 … 0.10 without interference.
    # Request 1 (prompt 48 = blocks 100, 101, 102) is placed at t = 0.025 and its history (blocks 100, 101) is
    # cached: it waits for the boundary at 0.03, takes its 32 cached tokens and computes 16 in one mixed step of
    # 10 + 1.6 ms (token 1 at 0.0416), then decodes its 3 other tokens (finish 0.0716). Request 0's 4th step is
    # the mixed one: it finishes 1.6 ms late, at 0.1016.
    blocks = {0: [7, 8], 1: [100, 101, 102, 103]}

    def chunk_s(tokens: FloatArray, before: FloatArray, _decode_tokens: float) -> FloatArray:
        return np.asarray(1e-4 * tokens, dtype=np.float64)

    work = AppendWork(
        chunk_s=chunk_s, budget_tokens=64, block_tokens=16, blocks=lambda r, c: blocks[r][:c],
        lookup_blocks=[1, 2], prompt_blocks=[2, 3], sequence_blocks=[2, 3], append_steps=[9, 3], hit_tokens=[0, 0],
    )  # fmt: skip
    tl = Timeline(2)
    inst = _instance(work, tl)
    inst.caches[0].keep([100, 101], free_tokens=math.inf)
    inst.submit(0, 0.0)
    _drain(inst, 0.025)
    inst.submit_append(1, 0.025)
    _drain(inst)
    assert work.hit_tokens == [0, 32]
    assert tl.first_token[0] == pytest.approx(0.01)
    assert tl.first_token[1] == pytest.approx(0.0416)
    assert tl.prefill_done[1] == tl.first_token[1]
    assert tl.finish[1] == pytest.approx(0.0716)
    assert tl.finish[0] == pytest.approx(0.1016)
    assert inst.kv_used == 0.0
    assert inst.caches[0].held_prefix([100, 101, 102]) == 3  # request 1's sequence kept (blocks of 48 + 4 tokens)


# ---- one session by hand ----


def test_three_turn_session_placed_and_priced_by_hand() -> None:
    # One session (constant arrivals at 1 request/s, 3 turns, n = 6: sessions every 3 s, one before t_end = 6 s),
    # zero think time, 64 new and 32 output tokens a turn, blocks of 16: prompts 64, 160, 256; histories 96 and
    # 192 tokens (6 and 12 whole blocks: turn 1's and turn 2's sequences, kept on the decode instance when they
    # finish). Under ppd, turn 1 goes through the prefill pool; turns 2 and 3 find their whole history on their
    # decode instance and append 64 tokens there. P→D bytes: 480 prompt tokens under pd, 64 under ppd.
    spec = _sessions(_fixed(3), 64, 32, 0.0)
    pd = _run(spec, 1.0, 6, "pd", arrival=CONSTANT)
    ppd = _run(spec, 1.0, 6, "ppd", arrival=CONSTANT)
    for res in (pd, ppd):
        assert res.turn.tolist() == [1, 2, 3]
        assert res.run.input_tokens.tolist() == [64, 160, 256]
    assert pd.prefill_instance.tolist() == [0, 0, 0]
    assert ppd.prefill_instance.tolist() == [0, -1, -1]
    assert pd.turns is not None
    assert ppd.turns is not None
    assert pd.turns.pd_kv_bytes == 480 * LLAMA_8B_KV_BYTES == pd.turns.pd_kv_bytes_all_pd
    assert (pd.turns.share_on_decode, pd.turns.decode_hit_ratio, pd.turns.transfer_reduction) == (None, None, 0.0)
    assert ppd.turns.pd_kv_bytes == 64 * LLAMA_8B_KV_BYTES
    assert ppd.turns.transfer_reduction == pytest.approx(1.0 - 64 / 480)
    assert ppd.turns.share_on_decode == pytest.approx(2 / 3)
    assert ppd.turns.decode_hit_ratio == 1.0
    assert ppd.turns.decode_token_hit_ratio == pytest.approx((96 + 192) / 480)
    # Turn 2 arrives when turn 1 ends; the decode instance is then idle: one mixed step with no decodes, the
    # decode step at B = 0 plus the chunk price of 64 tokens over 96 cached (the colocated simulator's tables).
    model = _model()
    hw = model.res.hardware.decode
    chunk = sim_chunk_price(hw, model.res.chunk_tokens, 256.0)
    step0 = float(model.decode.step(np.array([0.0]), np.array([0.0]))[0])
    for i, before in ((1, 96.0), (2, 192.0)):
        mixed = step0 + float(chunk(np.array([64.0]), np.array([before]))[0])
        assert ppd.run.ttft_s[i] == pytest.approx(mixed, rel=1e-12)
        # 31 decode steps after token 1, alone, at contexts P … P + 30 (the turn's own output − 1 steps)
        steps = model.decode.step(np.ones(31), ppd.run.input_tokens[i] + np.arange(31.0))
        assert ppd.run.tpot_s[i] == pytest.approx(float(np.sum(steps)) / 31, rel=1e-9)
    host = request_delay_s(hw, model.res.lengths.mean_input())
    np.testing.assert_allclose(ppd.ttft_extra_s[1:], host)
    assert ppd.turns.ttft_turn2_p50_s is not None
    assert pd.turns.ttft_turn2_p50_s is not None
    assert ppd.turns.ttft_turn2_p50_s < pd.turns.ttft_turn2_p50_s
    assert ppd.turns.ttft_turn1_p50_s == pd.turns.ttft_turn1_p50_s


# ---- the policies against today's run ----


def _same_run(a: ReuseResult, b: ReuseResult) -> None:
    for name in ("ttft_s", "tpot_s", "finish_s", "arrival_s"):
        np.testing.assert_array_equal(getattr(a.run, name), getattr(b.run, name))
    np.testing.assert_array_equal(a.hit_tokens, b.hit_tokens)
    np.testing.assert_array_equal(a.prefill_instance, b.prefill_instance)


@pytest.mark.parametrize("routing", ["affinity", "load-balance"])
def test_pd_is_todays_run(routing: str) -> None:
    spec = _sessions({"dist": "geometric", "mean": 3.1}, 200, 100, 2.0, system=40)
    kw: dict[str, Any] = {"model": _model(2, 2, "least-work"), "routing": routing, "layout": CacheLayout(16 * 400)}
    today = _run(spec, 8.0, 1500, None, **kw)
    pd = _run(spec, 8.0, 1500, "pd", **kw)
    _same_run(today, pd)
    assert today.turns is not None
    assert pd.turns is not None
    assert today.turns == pd.turns
    assert pd.as_dict()["turn_placement"]["policy"] == "pd"


def test_run_does_not_take_the_closed_forms_stretched_decode_step() -> None:
    """A PPD model's decode step is the closed form's, stretched by its appends' load; the simulator prices the
    appends itself in its mixed steps, on the plain step: the run is the same whichever model it is given."""
    ppd = _model(1, 1, "least-work", "ppd")
    plain = _model(1, 1, "least-work", "pd")
    assert ppd.decode.step.t0_s > plain.decode.step.t0_s  # the closed form's stretch
    spec = _sessions(_fixed(3), 200, 100, 0.0)
    _same_run(_run(spec, 8.0, 600, "ppd", model=ppd, routing="affinity"),
              _run(spec, 8.0, 600, "ppd", model=plain, routing="affinity"))  # fmt: skip


@pytest.mark.parametrize("policy", ["ppd", "threshold", "score"])
def test_one_turn_sessions_place_nothing_on_decode(policy: str) -> None:
    spec = _sessions(_fixed(1), 300, 50, 1.0)
    kw: dict[str, Any] = {"model": _model(2, 2, "least-work"), "routing": "affinity"}
    placed = _run(spec, 10.0, 1000, policy, **kw)
    _same_run(placed, _run(spec, 10.0, 1000, "pd", **kw))
    assert placed.turns is not None
    assert placed.turns.later_turns == 0
    assert placed.turns.share_on_decode == 0.0
    assert placed.turns.decode_hit_ratio is None
    assert placed.turns.pd_kv_bytes == placed.turns.pd_kv_bytes_all_pd
    assert bool(np.all(placed.prefill_instance >= 0))


def test_threshold_places_appends_shorter_than_it() -> None:
    spec = _sessions(_fixed(3), 64, 32, 1.0)
    kw: dict[str, Any] = {"model": _model(1, 2, "least-work"), "routing": "affinity"}
    at = _run(spec, 4.0, 600, "threshold", weights={"append_threshold_tokens": 64}, **kw)
    above = _run(spec, 4.0, 600, "threshold", weights={"append_threshold_tokens": 65}, **kw)
    assert at.turns is not None
    assert above.turns is not None
    assert at.turns.share_on_decode == 0.0
    assert at.turns.decode_hit_ratio == 1.0  # held, turned down: 64 new tokens are not fewer than 64
    assert above.turns.share_on_decode == above.turns.later_turns / above.turns.turns
    later = above.turn >= 2
    assert bool(np.all(above.prefill_instance[later] == -1))


def test_score_weights_move_turns_between_pools() -> None:
    # At light load an append on decode is mostly faster than a prefill plus the KV transfer (TTFT gain > 0; not
    # when appends queue ahead on the decode instance while the prefill pool is idle) and always costs its
    # co-runners its chunk (TPOT loss > 0): a heavy TTFT weight places nearly every held turn on decode, a heavy
    # TPOT weight none.
    spec = _sessions(_fixed(3), 300, 60, 0.5, system=100)
    kw: dict[str, Any] = {"model": _model(1, 2, "least-work"), "routing": "affinity"}
    ttft = _run(spec, 6.0, 600, "score", weights={"ttft_weight": 1e6}, **kw)
    tpot = _run(spec, 6.0, 600, "score", weights={"tpot_weight": 1e6}, **kw)
    assert ttft.turns is not None
    assert tpot.turns is not None
    assert ttft.turns.decode_hit_ratio == 1.0
    assert ttft.turns.share_on_decode is not None
    assert ttft.turns.share_on_decode > 0.95 * ttft.turns.later_turns / ttft.turns.turns
    assert tpot.turns.share_on_decode == 0.0


def test_load_balanced_decode_routing_finds_the_history_on_one_instance_in_four() -> None:
    # Random decode routing over 4 instances: a Turn 2's history is on the instance that decoded turn 1, which the
    # policy picks again with probability 1/4; only then does the turn run on decode.
    spec = _sessions(_fixed(2), 200, 100, 2.0)
    res = _run(spec, 8.0, 4000, "ppd", model=_model(2, 4, "random"), routing="load-balance")
    assert res.turns is not None
    assert res.turns.share_on_decode is not None
    on_decode_of_turn2 = res.turns.share_on_decode * res.turns.turns / res.turns.later_turns
    assert on_decode_of_turn2 == pytest.approx(res.turns.decode_hit_ratio)
    assert on_decode_of_turn2 == pytest.approx(0.25, abs=0.03)


@pytest.mark.parametrize("routing", ["random", "round-robin", "least-work"])
def test_score_under_load_balanced_routing_places_only_held_turns(routing: str) -> None:
    # The score's prefill-side estimate reads each routing's queue (a drawn instance, the next one, the central
    # least-work queue); whatever it decides, only a turn whose history its instance holds runs on decode.
    spec = _sessions(_fixed(3), 200, 100, 1.0, system=64)
    res = _run(spec, 12.0, 900, "score", model=_model(2, 2, routing), routing="load-balance")
    assert res.turns is not None
    assert res.turns.share_on_decode is not None
    assert res.turns.decode_hit_ratio is not None
    on_decode_of_later = res.turns.share_on_decode * res.turns.turns / res.turns.later_turns
    assert 0.0 < on_decode_of_later <= res.turns.decode_hit_ratio
