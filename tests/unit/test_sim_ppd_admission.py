"""PPD's simulated decode instance under each engine's KV admission (pdplan/sim/append_growth.py), worked out by hand
on one instance of M = 1,000 KV slots, 10 ms decode steps whatever the batch, 0.1 ms a prompt token in a mixed step,
blocks of 16 tokens. r0's KV arrives at t = 0 (prompt 400, 300 steps); r1 is an append placed at 45 ms (prompt 240,
whose first 12 blocks, 192 tokens, its history, are cached; 300 decode steps after its token 1 counted as its n, 299
after it). r0's steps end at 10, 20, … ms, so r1 waits for the boundary at 50 ms, where r0 holds 405 tokens."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdplan.sim.append_growth import PdAppendInstance, PreemptAppendInstance, append_instance
from pdplan.sim.batch import Segments, Timeline
from pdplan.sim.decode import DecodeSetup
from pdplan.sim.decode_append import AppendDecodeInstance, AppendWork
from pdplan.sim.pd_decode_rule import PdDecodeAdmission, PdRule
from pdplan.sim.spec import DecodePool, DecodeRecompute
from pdplan.types import FloatArray

STEP_S = 0.01
BLOCKS = {0: list(range(0, 100)), 1: list(range(100, 200))}
R = PdDecodeAdmission(reserved_tokens=50, clip_tokens=4096)


def _per_token(tokens: FloatArray, before: FloatArray, decode_tokens: float) -> FloatArray:
    return np.asarray(1e-4 * tokens, dtype=np.float64)


def _setup(tl: Timeline) -> DecodeSetup:
    return DecodeSetup(
        lambda b, k: np.full(np.shape(b), STEP_S), 8, 1000.0, [400, 240], [300, 300], tl, Segments(), True, 0.0
    )


def _work() -> AppendWork:
    return AppendWork(
        chunk_s=_per_token, budget_tokens=1000, block_tokens=16, blocks=lambda r, c: BLOCKS[r][:c],
        lookup_blocks=[24, 14], prompt_blocks=[25, 15], sequence_blocks=[0, 33], append_steps=[299, 299],
        hit_tokens=[0, 0],
    )  # fmt: skip


def _run(inst: AppendDecodeInstance) -> None:
    inst.caches[0].keep(BLOCKS[1][:12], inst.free_tokens(0))
    inst.submit(0, 0.0)
    while inst.next_time <= 0.045:
        inst.fire()
    inst.submit_append(1, 0.045)
    while inst.next_time < math.inf:
        inst.fire()


def test_pool_picks_the_engines_instance() -> None:
    tl = Timeline(2)
    step = _setup(tl).step_fn
    assert type(append_instance(_setup(tl), _work(), DecodePool(1, step))) is AppendDecodeInstance  # TensorRT-LLM
    assert isinstance(append_instance(_setup(tl), _work(), DecodePool(1, step, pd_admission=R)), PdAppendInstance)
    vllm = DecodePool(1, step, recompute=DecodeRecompute(_per_token, 1000))
    assert isinstance(append_instance(_setup(tl), _work(), vllm), PreemptAppendInstance)


def test_reservation_holds_the_append_until_r0_ends() -> None:
    # r0 reserves 700: r1's 240 + 300 = 540 > 300 left waits for r0's end at 3.0 s; one mixed step of 10 + 4.8 ms
    # (48 tokens over its 192 cached), then 299 steps
    tl = Timeline(2)
    inst = AppendDecodeInstance(_setup(tl), _work())
    _run(inst)
    assert inst.work.hit_tokens == [0, 192]
    assert tl.first_token[1] == pytest.approx(3.0148)
    assert tl.finish == pytest.approx([3.0, 6.0048])


def test_sglang_admits_on_context_plus_r_then_retracts_the_fewest_output() -> None:
    # At 50 ms (K0 = 405): the one-request room is r0's 400 + 300 − 405 = 295 > R = 50, so r1 may take
    # 1,000 − 405 − 295 = 300, and needs max(240 + 50, 240 + 300 − 405) = 290: admitted (the reservation's 540 is
    # not). Its mixed step ends at 64.8 ms (token 1), r0 then at 406 tokens, r1 at 240: 646 held, two more a step;
    # steps 0..176 fit (646 + 2·176 + 2 = 1,000), and at 64.8 + 1,770 = 1,834.8 ms the next would need 1,002: the
    # fewest-output request, r1 (177 tokens out against r0's 183), is retracted with its 417 tokens and 122 steps
    # left. It needs 417 + 50 = 467 of 1,000 − 583 − (700 − 583) = 300: it resumes when r0 ends (117 more steps,
    # 3.0048 s) and ends 122 steps later.
    tl = Timeline(2)
    inst = PdAppendInstance(_setup(tl), _work(), PdRule(R, [400, 240], [300, 300], 0.0, math.inf))
    _run(inst)
    assert inst.work.hit_tokens == [0, 192]
    assert tl.first_token[1] == pytest.approx(0.0648)
    assert inst.retractions == 1
    assert tl.finish == pytest.approx([3.0048, 4.2248])
    assert inst.held_tokens() == 0.0


def test_sglang_retraction_stalls_for_the_host_copy() -> None:
    # The same run with 10 µs a KV token to host or back: the boundary at 1,834.8 ms retracts r1's 417 tokens, so
    # r0's remaining 117 steps start 4.17 ms later and it ends at 3.0048 + 0.00417 = 3.00897 s; the boundary that
    # resumes r1 there loads them back, another 4.17 ms before its 122 steps: 4.2248 + 2 × 0.00417 = 4.23314 s.
    tl = Timeline(2)
    rule = PdDecodeAdmission(reserved_tokens=50, clip_tokens=4096, host_copy_s_per_token=1e-5)
    inst = PdAppendInstance(_setup(tl), _work(), PdRule(rule, [400, 240], [300, 300], 0.0, math.inf))
    _run(inst)
    assert inst.retractions == 1
    assert tl.first_token[1] == pytest.approx(0.0648)
    assert tl.finish == pytest.approx([3.00897, 4.23314], abs=1e-9)


@pytest.mark.parametrize(("hits", "finish_s"), [(True, 3.0048 + 0.0101 + 1.22), (False, 3.0048 + 0.0517 + 1.22)])
def test_vllm_preempts_the_newest_and_recomputes_it_here(hits: bool, finish_s: float) -> None:
    # r1 is admitted at 50 ms on its prompt (405 + 1 + 240 ≤ 1,000) and runs as under SGLang until 1,834.8 ms, where
    # the next step needs 1,002: the newest, r1 (context 417, 122 steps left), is preempted and its 26 whole blocks
    # go to the free queue, tail first; the boundary admits nothing, and r1 waits (583 + 1 + 417 > 1,000) for r0's
    # end at 3.0048 s. With prefix caching its 26 blocks (416 tokens) are still cached, so one token is recomputed
    # (a mixed step of 10 + 0.1 ms); without, 417 (10 + 41.7 ms). It rejoins, its token 1 not sent again.
    tl = Timeline(2)
    inst = PreemptAppendInstance(_setup(tl), _work(), hits)
    _run(inst)
    assert inst.preemptions == 1
    assert tl.first_token[1] == pytest.approx(0.0648)
    assert tl.finish == pytest.approx([3.0048, finish_s])
    assert inst.held_tokens() == 0.0
