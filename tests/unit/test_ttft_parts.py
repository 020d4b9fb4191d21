"""The one TTFT decomposition (pdplan.serving.ttft): hand-worked parts, the parts of every model adding up to its mean
TTFT, the screen's shortcut as the same formula, PrfaaS' two paths, and the two sides against the simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.overrides import apply_overrides
from pdplan.io.scenario import default_scenario_path, load_scenario, revalidate
from pdplan.serving.build import build_model
from pdplan.serving.prfaas.build import prfaas_setup
from pdplan.serving.prfaas.queue import path_mixture, path_ttft_parts
from pdplan.serving.resolve import resolve
from pdplan.serving.ttft import TtftParts, convention_words, first_token_s, step_boundary_s
from pdplan.sim.compare import simulate_scenario
from pdplan.specs.command_line import ScenarioOverrides
from pdplan.specs.scenario import Scenario

CATALOG = open_catalog()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _default(**update: object) -> Scenario:
    sc = load_scenario(default_scenario_path())
    return revalidate(sc, dict(update)) if update else sc


def test_first_token_by_hand() -> None:
    """A: an idle instance adds one step (τ), a busy one a step and a half (τ + τ/2); B: nothing."""
    tau = np.array([0.02, 0.04])
    assert first_token_s("A", tau, 0.0).tolist() == [0.02, 0.04]
    assert first_token_s("A", tau, np.array([1.0, 0.5])) == pytest.approx([0.03, 0.05])
    assert first_token_s("B", tau, 1.0).tolist() == [0.0, 0.0]
    assert step_boundary_s(0.5, 0.04) == pytest.approx(0.01)


def test_screen_shortcut_is_the_formula_at_zero_load() -> None:
    """The optimiser's screen prices the decode side as the busy instance's (1 + 1/2)·t0, bit for bit the 1.5·t0 it
    always used."""
    for t0 in (0.0123, 0.00871, 0.0301):
        assert float(first_token_s("A", np.array(t0), 1.0)) == 1.5 * t0


def test_parts_add_up_by_hand() -> None:
    parts = TtftParts(queue_s=0.1, prefill_s=0.4, kv_transfer_s=0.05, first_token_s=0.03, request_overhead_s=0.02)
    assert parts.prefill_side_s == pytest.approx(0.52)
    assert parts.decode_side_s == pytest.approx(0.08)
    assert parts.total_s == pytest.approx(0.6)


@pytest.mark.parametrize(
    "update",
    [
        {},
        {"ttft_convention": "B"},
        {"routing": "random"},
        {"prefill_max_batch_tokens": 8192},
    ],
    ids=["A-least-work", "B", "A-random", "batched-prefill"],
)
def test_disaggregated_parts_add_up_to_the_mean(update: dict[str, object]) -> None:
    model = build_model(resolve(_default(**update), CATALOG))
    rate = 0.6 * model.limit().rate_rps
    parts = model.ttft_parts(rate)
    mean = float(model.snapshot(np.array([rate])).ttft.mean_s[0])
    assert parts.total_s == pytest.approx(mean, rel=1e-9)
    assert parts.queue_s > 0.0
    assert parts.prefill_s > 0.0
    if update.get("ttft_convention") == "B":
        assert parts.decode_side_s == 0.0  # the KV and the step boundary delay token 2 (TPOT) under B
    else:
        assert parts.first_token_s > 0.0
        assert parts.kv_transfer_s > 0.0


@pytest.mark.parametrize("scheduler", ["chunked", "prefill-first"])
def test_colocated_parts_add_up_to_the_mean(scheduler: str) -> None:
    sc = apply_overrides(_default(), ScenarioOverrides(colocated=3, scheduler=scheduler))
    model = build_model(resolve(sc, CATALOG))
    rate = 0.6 * model.limit().rate_rps
    parts = model.ttft_parts(rate)
    assert parts.total_s == pytest.approx(float(model.snapshot(np.array([rate])).ttft.mean_s[0]), rel=1e-9)
    assert parts.decode_side_s == 0.0  # one instance does both: no KV crosses a link


def test_prfaas_paths_mix_to_the_mixture_mean() -> None:
    res = resolve(load_scenario(EXAMPLES / "prfaas-h200-h20.yaml"), CATALOG)
    setup = prfaas_setup(res)
    remote, local = path_ttft_parts(setup, 19_000.0, 2.0)
    mix = path_mixture(setup, 19_000.0, 2.0)
    assert remote is not None
    assert local is not None
    assert mix.remote is not None
    assert mix.local is not None
    assert remote.total_s == pytest.approx(float(mix.remote.mean_s[0]), rel=1e-9)
    assert local.total_s == pytest.approx(float(mix.local.mean_s[0]), rel=1e-9)
    assert remote.kv_transfer_s > setup.rtt_s  # the cross-datacenter transfer: at least one round trip
    assert local.decode_side_s == 0.0  # the paper's Eq. 4: no intra-cluster transfer on the local path


def test_evaluate_carries_the_parts_and_words() -> None:
    ev = evaluate(_default(), rate=5.0)
    assert ev.ttft_parts is not None
    assert ev.operating_point is not None
    assert ev.ttft_parts.total_s == pytest.approx(ev.operating_point.ttft_s.mean, rel=1e-9)
    assert ev.convention == convention_words("disaggregated", "A")
    assert "ttft_parts" not in ev.to_document()  # a library record, not part of the JSON contract
    assert evaluate(_default()).ttft_parts is None


def test_sides_against_the_simulator() -> None:
    """The prefill side (arrival to prefill end) and the decode side (prefill end to token 1) of the closed form
    against the simulator's own timeline, which shares none of the queueing (default scenario, half load,
    6,000 requests): each within 10 %."""
    sc = _default()
    rate = 0.5 * evaluate(sc).stability_limit_rps
    cmp = simulate_scenario(sc, rate=rate, n_requests=6_000)
    parts, sim = cmp.evaluation.ttft_parts, cmp.simulated
    assert parts is not None
    assert sim is not None
    assert parts.decode_side_s == pytest.approx(sim.ttft_decode_side_s, rel=0.10)
    assert parts.prefill_side_s == pytest.approx(sim.ttft_prefill_side_s, rel=0.10)
