"""Batched prefill: the chain, its TTFT lattice and the roofline batch time, hand-checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.perf.roofline import phase_time
from pdplan.queueing.batched import batched_prefill, chain_state, full_batch
from pdplan.queueing.batched_ttft import batched_wait
from pdplan.serving import build_model, resolve
from pdplan.serving.resolve import precision_of
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import prefill_batch_time
from pdplan.specs.scenario import Scenario

CATALOG = open_catalog()
SHORT = {
    "input_tokens": {"dist": "lognormal", "mean": 256, "sigma": 1.0, "min": 16, "max": 4096},
    "output_tokens": {"dist": "fixed", "value": 32},
}


def linear(a: float = 0.006, b: float = 2e-5, c: float = 1e-9) -> Any:
    """Batch time a + b·Σl + c·Σl² (seconds)."""
    return lambda tokens, sq: a + b * np.asarray(tokens) + c * np.asarray(sq)


def scenario(**extra: Any) -> Scenario:
    data: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "prefill": {"gpu": "h100-sxm"},
        "decode": {"gpu": "h100-sxm"},
        "routing": "random",
        "prefill_max_batch_tokens": 8192,
        "workload": SHORT,
        "slo": {"ttft": "100ms", "tpot": "50ms"},
    }
    data.update(extra)
    return scenario_from_dict(data, source="test", base_dir=Path.cwd())


def test_full_batch_of_fixed_prompts_by_hand() -> None:
    # 256-token prompts, budget 8192: a full batch is exactly 32 prompts, 0.006 + 2e-5·8192 +
    # 1e-9·32·256² s; capacity = 32 prompts per full batch time.
    m = batched_prefill(np.array([256.0]), np.array([1.0]), 8192, linear())
    time_s = 0.006 + 2e-5 * 8192 + 1e-9 * 32 * 256**2
    assert m.full_tokens == pytest.approx(8192.0, rel=1e-9)
    assert m.full_s == pytest.approx(time_s, rel=1e-9)
    assert m.capacity_rps == pytest.approx(32 / time_s, rel=1e-9)


def test_full_batch_packing_loss_by_hand() -> None:
    # 300-token prompts: 27 fit (8100 tokens), the 28th would need 8400 > 8192.
    m = batched_prefill(np.array([300.0]), np.array([1.0]), 8192, linear())
    assert full_batch(m)[0] == pytest.approx(8100.0, rel=5e-3)


def test_prompt_over_budget_runs_alone() -> None:
    # Prompts of 100 and 10000 tokens (half each), budget 8192. A 10000-token head runs alone and
    # the next head is any prompt; after a 100-token head, 100-token prompts follow until a
    # 10000 (which then heads the next batch; 80 small ones in a row never happen): on average one
    # more, so 200 tokens. Heads: small → big, big → small or big (½ each): π_big = 2/3.
    m = batched_prefill(np.array([100.0, 10000.0]), np.array([0.5, 0.5]), 8192, linear(c=0.0))
    assert m.full_tokens == pytest.approx(2 / 3 * 10000 + 1 / 3 * 200, rel=0.01)


def test_light_load_is_single_prompt_batches() -> None:
    lens, p = np.array([128.0, 512.0, 2048.0]), np.array([0.5, 0.3, 0.2])
    m = batched_prefill(lens, p, 8192, linear())
    lam = 1e-3 * m.capacity_rps
    state = chain_state(m, lam)
    assert state.busy_fraction == pytest.approx(lam * float(p @ m.single_s), rel=2e-3)
    wait = batched_wait(m, np.array([lam]))
    assert float(wait.cdf_grid[0, :, 0].min()) > 0.99  # TTFT = own prompt alone


def test_chain_conserves_requests() -> None:
    # Renewal–reward: requests served per unit time = Σ_s P(in s)·n_s/T_s = λ. Fixed 256-token
    # prompts on a lattice that holds them exactly: a batch of U tokens serves U/256 requests.
    m = batched_prefill(np.array([256.0]), np.array([1.0]), 8192, linear())
    for load in (0.3, 0.7, 0.9):
        lam = load * m.capacity_rps
        state = chain_state(m, lam)
        lattice = np.arange(state.arrivals.shape[1]) * state.step_tokens
        tokens = np.concatenate(([256.0], lattice))
        served = np.where(state.carry_tokens > 0, m.full_tokens, tokens) / 256.0
        rate = float(np.sum(state.busy_prob * served / state.duration_s))
        assert rate == pytest.approx(lam, rel=0.02), load


def test_ttft_lattice_is_a_distribution() -> None:
    lens, p = np.array([64.0, 256.0, 1024.0, 4096.0]), np.array([0.3, 0.4, 0.2, 0.1])
    m = batched_prefill(lens, p, 2048, linear())
    wait = batched_wait(m, np.array([0.2, 0.6, 0.95]) * m.capacity_rps)
    assert np.all(np.diff(wait.cdf_grid, axis=2) >= -1e-12)
    assert np.all(wait.cdf_grid[:, :, -1] == 1.0)
    assert np.all(wait.mean_s > 0.0)
    assert np.all(np.diff(wait.mean_s, axis=0) > 0.0)  # more load, longer waits
    assert np.all(np.diff(wait.busy) > 0.0)


def test_anchor_interpolation_matches_all_bins(monkeypatch: pytest.MonkeyPatch) -> None:
    import pdplan.queueing.batched_ttft as bt

    res = resolve(scenario(), CATALOG)
    pool = build_model(res).pool.batched
    assert pool is not None
    rates = np.array([0.3, 0.7]) * pool.capacity_rps
    some = bt.batched_wait(pool, rates)
    monkeypatch.setattr(bt, "ANCHORS", 1000)
    every = bt.batched_wait(pool, rates)
    assert np.abs(some.cdf_grid - every.cdf_grid).max() < 0.01
    np.testing.assert_allclose(some.mean_s, every.mean_s, rtol=0.01)


def test_batch_time_table_matches_roofline() -> None:
    hw = RoleHardware(
        CATALOG.model("llama-3.1-8b"),
        CATALOG.gpu("h100-sxm"),
        CATALOG.kernel_table("h100-sxm"),
        1,
        1,
        precision_of(scenario()),
    )
    table = prefill_batch_time(hw, 16384, 0.0)
    rng = np.random.default_rng(0)
    prompts = rng.integers(1, 40, 2000).astype(float)
    tokens = np.exp(rng.uniform(0.0, np.log(16000.0 / prompts)))
    direct = phase_time(
        hw.model, hw.gpu, hw.table, phase="prefill", batch=prompts, tokens=tokens, precision=hw.precision, detail=False
    ).stage_time_s
    rel = np.abs(table(prompts * tokens, prompts * tokens**2) / direct - 1.0)
    assert np.percentile(rel, 99) < 0.01  # the roofline's tile-wave steps limit interpolation
    assert rel.max() < 0.05
    one = phase_time(
        hw.model,
        hw.gpu,
        hw.table,
        phase="prefill",
        batch=1.0,
        tokens=np.array([100.0, 3000.0]),
        precision=hw.precision,
        detail=False,
    ).stage_time_s
    np.testing.assert_allclose(table.single_s(np.array([100.0, 3000.0])), one, rtol=0.01)


@pytest.mark.slow
def test_batching_raises_capacity_of_short_prompts() -> None:
    batched = evaluate(scenario())
    alone = evaluate(scenario(prefill_max_batch_tokens=None))
    # 256-token prompts are memory-bound alone (weights read per prompt): batching amortises it.
    assert batched.stability_limit_rps > 1.5 * alone.stability_limit_rps
    assert batched.goodput_rps > alone.goodput_rps


@pytest.mark.slow
def test_batched_operating_point_reports_busy_fraction() -> None:
    ev = evaluate(scenario(), rate=60.0)
    util = ev.operating_point.utilisation if ev.operating_point else {}
    assert 0.0 < util["prefill"] < util["prefill_busy"] < 1.0
    assert ev.deployment["prefill_max_batch_tokens"] == 8192
    assert ev.assumptions.prefill.full_batch_tokens <= 8192


@pytest.mark.slow
def test_batch_option_validation() -> None:
    with pytest.raises(SpecError, match="greater than or equal to 1") as err:
        scenario(prefill_max_batch_tokens=0)
    assert "\n" not in str(err.value)
    colocated = scenario(
        mode="colocated", prefill=None, decode=None, colocated={"gpu": "h100-sxm"}
    )  # ignored there: searches swap modes
    assert evaluate(colocated).goodput_rps > 0.0
    chunked = evaluate(scenario(granularity="chunk"))
    assert (
        chunked.stability_limit_rps
        > evaluate(scenario(granularity="chunk", prefill_max_batch_tokens=None)).stability_limit_rps
    )


@pytest.mark.slow
def test_least_work_pools_the_prefill_instances() -> None:
    """Least-work feeds x batched instances from one queue (Erlang-C × chain with T/x): shorter
    TTFT than x independent queues (random routing), same capacity; x = 1 is the plain chain."""
    two = {"prefill": {"gpu": "h100-sxm", "count": 2}}
    pooled = evaluate(scenario(routing="least-work", **two), rate=200.0).operating_point
    split = evaluate(scenario(**two), rate=200.0).operating_point
    assert pooled is not None
    assert split is not None
    assert pooled.ttft_s.p90 < split.ttft_s.p90
    one_lw = evaluate(scenario(routing="least-work"), rate=100.0).operating_point
    one_rnd = evaluate(scenario(), rate=100.0).operating_point
    assert one_lw is not None
    assert one_rnd is not None
    assert one_lw.ttft_s.p90 == pytest.approx(one_rnd.ttft_s.p90, rel=1e-9)
