"""The simulator's colocated KV per engine (pdplan.sim.colocated_instance): the final footprint reserved at
admission (TensorRT-LLM) against the growing context with preemption and recompute (vLLM) and SGLang's ratio
admission with retraction (pdplan.sim.ratio_admission)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving import build_model, resolve
from pdplan.serving.colocated import ColocatedModel
from pdplan.sim import Colocated, Requests
from pdplan.sim.deployment import sim_deployment
from pdplan.sim.event_loop import simulate
from pdplan.sim.ratio_admission import RatioAdmission, RatioBook
from pdplan.types import FloatArray


def _step(batch: FloatArray, context: FloatArray) -> FloatArray:
    del context
    return np.full(np.shape(batch), 0.1)


def _two_requests(reserve_kv: bool) -> tuple[FloatArray, FloatArray]:
    # C = 8 tokens a step, τ = 0.1 s (also with B = 0), chunks 0.01 s a token; a KV pool of 20 tokens; two 4-token
    # prompts at t = 0 with 9 output tokens each (8 decode steps: a final context of 12).
    dep = Colocated(
        1,
        step_time_s=_step,
        scheduler="chunked",
        token_budget=8,
        max_batch=4,
        chunk_time_s=lambda c, ctx, _b: 0.01 * np.asarray(c),
        kv_capacity_tokens=20,
        reserve_kv=reserve_kv,
    )
    res = simulate([0.0, 0.0], Requests.of([4, 4], [9, 9]), dep, np.random.default_rng(0), warmup_fraction=0.0)
    return res.first_token_s, res.finish_s


def test_reserved_footprint_by_hand() -> None:
    # r0 reserves 4 + 8 = 12; r1's 12 more would make 24 > 20, so it waits. r0: prefill 0.1 + 0.04 → 0.14, 8 steps
    # → 0.94; then r1: 1.08, 1.88.
    first, finish = _two_requests(True)
    np.testing.assert_allclose(first, [0.14, 1.08])
    np.testing.assert_allclose(finish, [0.94, 1.88])


def test_growing_footprint_preempts_and_recomputes_by_hand() -> None:
    # Both prompts fit (4 + 4): one iteration 0.1 + 0.08 → 0.18, both first tokens. Decoding, the batch holds its
    # contexts plus the token each writes: 4 + 4 + 2 = 10 at the first step, 2 more a step, so 6 steps fit (the
    # 6th holds 20) → 0.78, contexts 10 and 10; the 7th would hold 22: r1, the later admitted, is preempted (context
    # 10, 2 steps left). r0 alone (11 ≤ 20) ends its 2 steps at 0.98; r1 is admitted again and recomputes its 10
    # tokens in two iterations (8 tokens: 0.18, then 2 tokens: 0.12) → 1.28, and decodes 2 steps → 1.48. Its first
    # token stays at 0.18.
    first, finish = _two_requests(False)
    np.testing.assert_allclose(first, [0.18, 0.18])
    np.testing.assert_allclose(finish, [0.98, 1.48])


def test_growing_footprint_needs_chunks() -> None:
    dep = Colocated(1, step_time_s=_step, scheduler="prefill-first", prefill_service_s=[0.5], reserve_kv=False)
    with pytest.raises(SpecError, match="reserve_kv"):
        simulate([0.0], Requests.of([4], [3]), dep, np.random.default_rng(0))


def _opt13b(engine: str, scheduler: str) -> ColocatedModel:
    data: dict[str, Any] = {
        "model": "opt-13b",
        "mode": "colocated",
        "colocated": {"gpu": "a100-sxm-80gb", "tp": 2, "count": 1, "scheduler": scheduler},
        "workload": {"input_tokens": {"dist": "fixed", "value": 600}, "output_tokens": {"dist": "fixed", "value": 200}},
        "slo": {"ttft": "250ms", "tpot": "100ms"},
        "engine": engine,
    }
    model = build_model(resolve(scenario_from_dict(data, source="test", base_dir=Path.cwd()), open_catalog()))
    assert isinstance(model, ColocatedModel)
    return model


@pytest.mark.parametrize(
    ("engine", "scheduler", "reserve"),
    [
        ("vllm", "chunked", False),
        ("sglang", "chunked", False),
        ("trtllm", "chunked", True),
        ("vllm", "prefill-first", True),
    ],
)
def test_simulated_footprint_follows_the_engine(engine: str, scheduler: str, reserve: bool) -> None:
    setup = sim_deployment(_opt13b(engine, scheduler), np.array([600]), np.array([200]))
    assert isinstance(setup.deployment, Colocated)
    assert setup.deployment.reserve_kv is reserve


def _sglang_three() -> tuple[FloatArray, FloatArray]:
    # SGLang's rule with the ratio held at 0.5 (start = floor, so no decay), clip 100, a 36-token pool; τ = 0.1 s,
    # 0.01 s a prefill token, C = 8. r0 (4 + 17 output: 16 decode steps) at 0, r1 (the same) at 0.3, r2 (4 + 2) at 1.0.
    rule = RatioAdmission(init_ratio=0.5, min_ratio=0.5, decay_steps=600, clip_tokens=100, retract_steps=20)
    dep = Colocated(
        1,
        step_time_s=_step,
        scheduler="chunked",
        token_budget=8,
        max_batch=4,
        chunk_time_s=lambda c, ctx, _b: 0.01 * np.asarray(c),
        kv_capacity_tokens=36,
        reserve_kv=False,
        ratio_admission=rule,
    )
    req = Requests.of([4, 4, 4], [17, 17, 2])
    res = simulate([0.0, 0.3, 1.0], req, dep, np.random.default_rng(0), warmup_fraction=0.0)
    return res.first_token_s, res.finish_s


def test_sglang_ratio_admission_and_retraction_by_hand() -> None:
    # r0 counts 4 + 17 = 21 < 36: prefill 0.14 (step counter s = 1), 16 steps to go (its last at s = 17). r1 arrives
    # at 0.3; the boundary at 0.34 (s = 3, r0 at context 6 with 14 steps left) counts r0's 6 + 1 (the token it
    # writes), r1's 4 + 17 and 0.5 × 14 = 35 < 36: admitted (reserving both finals, 40 > 36, would wait for r0's end
    # at 1.74). Mixed iteration → 0.48: r1's first token, contexts 7 + 4. Decoding, the pool holds 11 + 2k + 2 at the
    # k-th step. r2 arrives at 1.0; at 1.08 (s = 10: contexts 13 and 10, 7 and 10 steps left) it counts 25 + 4 + 2 +
    # 0.5 × 17 = 39.5 ≥ 36: refused. At 1.68 (s = 16) the next step would hold 19 + 16 + 2 = 37 > 36: the least
    # decoded, r1 (13 output tokens against r0's 16), is retracted (context 16, 4 steps left) to the queue's tail,
    # behind r2. r0's last step → 1.78. Then r2 (4 + 2) and r1 (16 + min(4, 100)) are admitted in queue order: one
    # iteration of 4 + 4 tokens → 1.96 (r2's first token), r1's next 7 beside r2's decode step → 2.13 (r2 done), its
    # last 5 → 2.28, and its 4 steps → 2.68; its first token stays at 0.48.
    first, finish = _sglang_three()
    np.testing.assert_allclose(first, [0.14, 0.48, 1.96])
    np.testing.assert_allclose(finish, [1.78, 2.68, 2.13])


def test_ratio_admission_needs_growing_kv() -> None:
    rule = RatioAdmission(init_ratio=0.7, min_ratio=0.098, decay_steps=600, clip_tokens=4096, retract_steps=20)
    dep = Colocated(1, step_time_s=_step, chunk_time_s=lambda c, ctx, _b: 0.01 * np.asarray(c), ratio_admission=rule)
    with pytest.raises(SpecError, match="ratio_admission"):
        simulate([0.0], Requests.of([4], [3]), dep, np.random.default_rng(0))


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_simulated_admission_rule_follows_the_profile(engine: str) -> None:
    setup = sim_deployment(_opt13b(engine, "chunked"), np.array([600]), np.array([200]))
    assert isinstance(setup.deployment, Colocated)
    expected = (
        RatioAdmission(init_ratio=0.7, min_ratio=0.098, decay_steps=600, clip_tokens=4096, retract_steps=20)
        if engine == "sglang"
        else None
    )
    assert setup.deployment.ratio_admission == expected


def test_ratio_book_by_hand() -> None:
    book = RatioBook(RatioAdmission(init_ratio=0.7, min_ratio=0.1, decay_steps=600, clip_tokens=4096, retract_steps=20))
    book.join(0, 0, 10)
    book.join(1, 0, 5000)  # more than the clip left: counted 4096 until its last 4096 steps
    book.ratio = 0.5
    assert book.reserve_tokens(0) == pytest.approx(0.5 * (10 + 4096))
    assert book.reserve_tokens(10) == pytest.approx(0.5 * (0 + 4096))  # r0 at its end; r1 4990 left, clipped
    book.leave(0)
    assert book.reserve_tokens(904) == pytest.approx(0.5 * 4096)  # r1 exactly at the clip
    assert book.reserve_tokens(1000) == pytest.approx(0.5 * 4000)
    book.ratio = 0.7
    book.decoded(300)  # (0.7 − 0.1)/600 a step: 0.4 after 300 steps, the floor after 600
    assert book.ratio == pytest.approx(0.4)
    book.decoded(1000)
    assert book.ratio == pytest.approx(0.1)
    book.retracted(output_tokens=30, max_new_tokens=200, running=2)  # (30 + 20 × 2)/200
    assert book.ratio == pytest.approx(0.35)
    book.retracted(output_tokens=190, max_new_tokens=200, running=2)  # capped at 1
    assert book.ratio == 1.0
    book.idle()
    assert book.ratio == 0.7
