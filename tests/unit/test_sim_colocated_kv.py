"""The simulator's colocated KV per engine (pdplan.sim.colocated_instance): the final footprint reserved at
admission (TensorRT-LLM) against the growing context with preemption and recompute (vLLM, SGLang)."""

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
        chunk_time_s=lambda c, ctx: 0.01 * np.asarray(c),
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
