"""vLLM's disaggregated decode instance in the simulator (pdplan.sim.preempt_decode): growth on demand, preemption of
the newest request and its recompute on the instance, worked out by hand on one decode instance with a constant 0.1 s
step and 1 ms a recomputed token; convention B (prefill streams token 1, n = output − 1). Both prompts' KV is ready
at 1.0 s (two prefill instances of 1 s each, no transfer time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario, revalidate
from pdplan.serving.build import build_model
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve
from pdplan.sim import DecodePool, Disaggregated, PrefillPool, Requests, simulate
from pdplan.sim.deployment import sim_deployment
from pdplan.sim.spec import DecodeRecompute

STEP_S = 0.1


def _run(recompute: DecodeRecompute | None) -> tuple[np.ndarray, np.ndarray]:
    """(decode admission times, finish times) of r0 (l = 500, n = 300) and r1 (l = 400, n = 300) on M = 1,000."""
    dep = Disaggregated(
        prefill=PrefillPool(2, routing="round-robin", service_s=[1.0, 1.0]),
        decode=DecodePool(
            1, step_time_s=lambda b, k: np.full(np.shape(b), STEP_S), kv_capacity_tokens=1000.0, recompute=recompute
        ),
        convention="B",
    )
    res = simulate([0.0, 0.0], Requests.of([500, 400], [301, 301]), dep, np.random.default_rng(0), warmup_fraction=0.0)
    return np.asarray(res.decode_admit_s), np.asarray(res.finish_s)


def _per_token(tokens: np.ndarray, before: np.ndarray, decode_tokens: float) -> np.ndarray:
    return 1e-3 * np.asarray(tokens, dtype=np.float64)


def test_reservation_holds_the_second_request_back() -> None:
    # r0 reserves 800, r1 needs 700 > 200 left: r1 waits for r0's end at 1 + 30 = 31 s and ends at 61 s
    admit, finish = _run(None)
    np.testing.assert_allclose(admit, [1.0, 31.0], rtol=1e-9)
    np.testing.assert_allclose(finish, [31.0, 61.0], rtol=1e-9)


def test_one_preemption_and_its_recompute_by_hand() -> None:
    # Both admitted at 1 s on their prompts (500, then 501 + 400 ≤ 1,000). After k steps the batch holds 900 + 2k and
    # step k needs 2 more: steps 0..49 fit, and at 1 + 50 × 0.1 = 6 s the next would need 1,002 > 1,000, so the
    # newest, r1 (context 400 + 50 = 450, 250 steps left), is preempted to the head of the queue. r0 alone holds
    # 551 for its next step, and 551 + 450 > 1,000 keeps r1 waiting until r0 ends at 6 + 25 = 31 s. No prefix cache:
    # r1 recomputes its 450 tokens in one mixed step of 0.1 + 0.45 s (B = 0), rejoins at 31.55 s and ends 25 s later.
    admit, finish = _run(DecodeRecompute(_per_token, budget_tokens=1000, hits=False))
    np.testing.assert_allclose(admit, [1.0, 1.0])  # admission to the decode batch: its first, not its readmission
    np.testing.assert_allclose(finish, [31.0, 56.55], rtol=1e-9)


def test_prefix_cache_hits_cut_the_recompute() -> None:
    # The free block queue (pdplan.sim.recompute_hits): the pool's 1,000 free positions, then r0 takes 500, r1 400 and
    # 50 steps 100 (evicted up to 1,000); r1's 450 tokens are appended at [1,000, 1,450); r0's 250 lone steps take
    # [1,000, 1,250) of them, so 200 of r1's prefix are hits at its readmission and it recomputes 250 tokens:
    # 0.1 + 0.25 s, rejoining at 31.35 s, ending at 56.35 s.
    admit, finish = _run(DecodeRecompute(_per_token, budget_tokens=1000, hits=True))
    np.testing.assert_allclose(finish, [31.0, 56.35], rtol=1e-9)
    np.testing.assert_allclose(admit, [1.0, 1.0])


def test_recompute_is_chunked_by_the_token_budget() -> None:
    # budget 200 with no running request: 450 tokens in three mixed steps of 200, 200 and 50 tokens, each 0.1 s plus
    # its tokens at 1 ms: 0.3 + 0.45 = 0.75 s from 31 s, so r1 ends at 31.75 + 25 s
    _, finish = _run(DecodeRecompute(_per_token, budget_tokens=200, hits=False))
    np.testing.assert_allclose(finish, [31.0, 56.75], rtol=1e-9)


@pytest.mark.parametrize(("engine", "preempts"), [("vllm", True), ("trtllm", False), ("sglang", False)])
def test_deployment_runs_the_rule_for_vllm_only(engine: str, preempts: bool) -> None:
    root = Path(__file__).resolve().parents[2]
    sc = load_scenario(root / "examples" / "opt-13b-a100-distserve.yaml")
    model = build_model(resolve(sc if engine == "vllm" else revalidate(sc, {"engine": engine}), open_catalog()))
    assert isinstance(model, DisaggregatedModel)
    setup = sim_deployment(model, np.array([1000, 200]), np.array([100, 300]))
    assert isinstance(setup.deployment, Disaggregated)
    recompute = setup.deployment.decode.recompute
    assert (recompute is not None) is preempts
    if recompute is not None:
        assert recompute.budget_tokens == model.res.chunk_tokens
        assert recompute.hits
