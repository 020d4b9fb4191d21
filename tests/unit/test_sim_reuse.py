"""simulate_reuse (pdplan/sim/reuse.py): a deployment with per-instance prefix caches, request by request. Hand-worked
hits (two sessions, one instance, a cache of one history), the theory checks (one-turn sessions never hit; an
unbounded cache under affinity routing hits every later turn's whole history; random routing over N instances finds
the previous turn's instance with probability 1/N; DualPath's 32,721-token context with a 429-token append), and the
prefill priced at dispatch (a hit shortens its prefill by the roofline price of the cached tokens)."""

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
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve
from pdplan.serving.roles import cached_prefill_perf
from pdplan.sim.deployment import sim_deployment
from pdplan.sim.reuse import CacheLayout, ReuseResult, mean_turn_latency_s, simulate_reuse
from pdplan.sim.reuse_sessions import session_requests
from pdplan.specs.arrivals import ConstantArrival
from pdplan.specs.reuse import SessionsSpec
from pdplan.specs.workload import WorkloadSpec

UNBOUNDED = CacheLayout(1e12)
CONSTANT = ConstantArrival(process="constant")


def _fixed(n: float) -> dict[str, Any]:
    return {"dist": "fixed", "value": n}


@cache
def _model(prefill: int = 1, routing: str = "random") -> DisaggregatedModel:
    """Llama-3.1-8B on H100, ``prefill``P1D (TP1), a two-turn session workload (only its lengths matter here)."""
    data = {
        "schema_version": 1,
        "name": "reuse-unit",
        "model": "llama-3.1-8b",
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 1, "count": prefill},
        "decode": {"gpu": "h100-sxm", "tp": 1, "count": 1},
        "link": "ib-ndr",
        "granularity": "layer",
        "routing": routing,
        "workload": {
            "sessions": {
                "turns": _fixed(2),
                "new_tokens": _fixed(64),
                "output_tokens": _fixed(32),
                "think_time": _fixed(5),
            },
        },
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }
    scenario = scenario_from_dict(data, source="test", base_dir=Path("."))
    model = build_model(resolve(scenario, open_catalog()))
    assert isinstance(model, DisaggregatedModel)
    return model


def _sessions(turns: dict[str, Any], new: int, out: int, think: float, system: int = 0) -> SessionsSpec:
    return SessionsSpec.model_validate(
        {"turns": turns, "new_tokens": _fixed(new), "output_tokens": _fixed(out), "think_time": _fixed(think),
         "system_prompt_tokens": system}
    )  # fmt: skip


def _run(spec: SessionsSpec, rate: float, n: int, layout: CacheLayout, **kw: Any) -> ReuseResult:
    model = kw.pop("model", None) or _model()
    block = kw.pop("block_tokens", 16)
    reqs = session_requests(spec, kw.pop("arrival", "poisson"), rate, n, block_tokens=block, seed=kw.pop("seed", 0),
                            stationary_start=False)  # fmt: skip
    reqs = dataclasses.replace(reqs, count_until_s=math.inf)  # count every turn, drain included
    return simulate_reuse(model, reqs, layout, rate_rps=rate, warmup_fraction=0.0, **kw)


def test_two_sessions_one_instance_by_hand() -> None:
    # Constant arrivals at 1 request/s, 2-turn sessions: sessions A, B start at 2 s and 4 s (n = 6 → two of them);
    # each turn is 64 new tokens and 32 output (blocks of 16): turn 1's prompt is 4 blocks, its sequence 6; turn 2's
    # prompt 10 blocks (lookup 9). A's turn 2 comes 5 s after its turn 1 ends (about 2.3 s), after B's turn 1, and
    # before B's turn 2. Outputs cached (as a colocated engine would); a prompt's blocks are touched when its
    # prefill ends, its sequence's when it finishes (module docstring of pdplan.sim.reuse).
    # * 6 blocks (one turn-1 history): B's turn 1 evicts A's history, A's turn 2 then evicts B's: no hit.
    # * 12 blocks (two histories): A's turn 2 hits its 6 blocks (96 tokens); its 10-block prompt then evicts the
    #   4 least recent blocks, B's first four: B's turn 2 misses.
    # * 18 blocks: A's turn 2 prompt (10 blocks) and sequence (12) fit beside B's 6: both hit 96 tokens.
    spec = _sessions(_fixed(2), 64, 32, 5.0)
    hits = {}
    for blocks in (6, 12, 18):
        res = _run(spec, 1.0, 6, CacheLayout(16 * blocks), arrival=CONSTANT, cache_outputs=True)
        assert res.session.tolist() == [0, 1, 0, 1]
        assert res.turn.tolist() == [1, 1, 2, 2]
        hits[blocks] = res.hit_tokens.tolist()
    assert hits == {6: [0, 0, 0, 0], 12: [0, 0, 96, 0], 18: [0, 0, 96, 96]}
    assert res.tiers[0].token_hit_ratio == pytest.approx(192 / (2 * 64 + 2 * 160))
    # Disaggregated default: the prefill instance holds the prompt only (turn 1's 4 whole blocks).
    prompt_only = _run(spec, 1.0, 6, CacheLayout(16 * 18), arrival=CONSTANT)
    assert prompt_only.hit_tokens.tolist() == [0, 0, 64, 64]


def test_measured_turn_latency_is_the_runs_own() -> None:
    # turn_latency_s=None: from D = 0, each run's mean arrival-to-last-token time places the next run's start, until
    # a run's D is within 5 % of what it measures (pdplan/sim/reuse_sessions.py, Stationary start). Geometric 3-turn
    # sessions with 5 s think times on 1P1D at 20 requests/s: D is a turn's latency (well above 0), and the start then
    # places more sessions in progress, λ_s · E[T − 1] · (D + E[Z]) against λ_s · E[T − 1] · E[Z].
    sessions = {"turns": {"dist": "geometric", "mean": 3.0}, "new_tokens": _fixed(512), "output_tokens": _fixed(64),
                "think_time": _fixed(5.0)}  # fmt: skip
    wl = WorkloadSpec.model_validate({"sessions": sessions})

    def run(latency_s: float | None) -> ReuseResult:
        return simulate_reuse(_model(), wl, UNBOUNDED, rate_rps=20.0, n_requests=400, turn_latency_s=latency_s)

    zero = run(0.0)
    latencies = [0.0]
    while True:
        res = run(latencies[-1])
        warm = res.run.warmup_count
        measured_s = float(np.mean(res.run.finish_s[warm:] - res.run.arrival_s[warm:]))
        assert mean_turn_latency_s(res.run) == measured_s
        if abs(measured_s - latencies[-1]) <= 0.05 * measured_s:
            break
        latencies.append(measured_s)
    assert len(latencies) >= 2
    assert latencies[1] > 0.1
    assert np.array_equal(run(None).run.finish_s, res.run.finish_s)
    assert res.run.arrival_s.size > zero.run.arrival_s.size  # more sessions in progress at t = 0


def test_offered_rate_by_hand() -> None:
    # One-turn sessions at constant gaps of 1/4 s offer exactly the nominal 4 requests/s.
    one = _run(_sessions(_fixed(1), 64, 32, 1.0), 4.0, 40, UNBOUNDED, arrival=CONSTANT)
    assert one.offered_rps == pytest.approx(4.0, rel=1e-12)
    # Two-turn sessions at 1 request/s (sessions at 2 s and 4 s, n = 6): a turn 2 arrives 5 s after its turn 1's
    # last token, so the four arrivals span 2 s to B's finish + 5 s: 3 gaps over that, far below the nominal 1/s.
    two = _run(_sessions(_fixed(2), 64, 32, 5.0), 1.0, 6, UNBOUNDED, arrival=CONSTANT)
    finish_b = float(two.run.finish_s[1])
    assert two.run.arrival_s.tolist()[:2] == [2.0, 4.0]
    assert two.offered_rps == pytest.approx(3.0 / (finish_b + 5.0 - 2.0), rel=1e-12)
    assert two.offered_rps < 0.5


def test_one_turn_sessions_never_hit() -> None:
    res = _run(_sessions(_fixed(1), 300, 50, 1.0), 8.0, 1500, UNBOUNDED, cache_outputs=True)
    assert res.hit_tokens.max() == 0
    assert res.token_hit_ratio == 0.0


def test_unbounded_cache_with_affinity_hits_every_later_turn_whole_history() -> None:
    spec = _sessions({"dist": "geometric", "mean": 3.1}, 200, 100, 2.0, system=40)
    res = _run(spec, 8.0, 1500, UNBOUNDED, routing="affinity", cache_outputs=True, model=_model(4))
    later = res.turn > 1
    history = res.run.input_tokens - 200  # the system prompt and earlier turns' new tokens and outputs
    np.testing.assert_array_equal(res.hit_tokens[later], history[later] // 16 * 16)
    first = res.hit_tokens[~later]  # a first turn finds the system prompt's 2 whole blocks, except the first one
    assert set(first.tolist()) == {0, 32}  # served on each instance (nothing cached there yet)
    assert int(np.sum(first == 0)) == 4
    assert len(set(res.prefill_instance.tolist())) == 4
    by_session: dict[int, int] = {}
    for s, inst in zip(res.session.tolist(), res.prefill_instance.tolist(), strict=True):
        assert by_session.setdefault(s, inst) == inst  # a session stays on its instance


def test_random_routing_finds_the_previous_turn_with_probability_one_over_n() -> None:
    spec = _sessions(_fixed(2), 200, 100, 2.0)
    res = _run(spec, 8.0, 4000, UNBOUNDED, routing="load-balance", cache_outputs=True, model=_model(4))
    second = res.turn == 2
    assert float(np.mean(res.hit_tokens[second] > 0)) == pytest.approx(0.25, abs=0.03)


def test_dualpath_append_hits_the_whole_history() -> None:
    # DualPath's agent turns: a 32,721-token context of which 429 tokens are new; with the history cached the turn
    # hits 32,292 tokens (98.7 %). System prompt 31,571 + 429 new + 292 output = 32,292 of history before turn 2's
    # 429 new tokens. Blocks of 4 tokens divide 32,292; vLLM's 16-token blocks keep the whole ones, 32,288.
    spec = _sessions(_fixed(2), 429, 292, 1.0, system=31_571)
    for block, expected in ((4, 32_292), (16, 32_288)):
        res = _run(spec, 0.5, 20, UNBOUNDED, routing="affinity", cache_outputs=True, block_tokens=block)
        second = res.turn == 2
        assert set(res.run.input_tokens[second].tolist()) == {32_721}
        assert set(res.hit_tokens[second].tolist()) == {expected}


def test_prefill_priced_at_dispatch_on_the_missed_tokens() -> None:
    # One idle prefill instance (constant arrivals far apart): each prompt's prefill lasts the roofline price of its
    # missed tokens over the cached ones (cached_prefill_perf, the closed form's price) plus the granularity's
    # extra. Turn 2 (160 tokens) finds 96 cached: cheaper than the 160-token prompt in full (not by 96/160: at
    # this length the prefill is bound by reading the weights).
    model = _model()
    res = _run(_sessions(_fixed(2), 64, 32, 5.0), 1.0, 6, CacheLayout(16 * 18), arrival=CONSTANT,
               cache_outputs=True, model=model)  # fmt: skip
    lens = res.run.input_tokens.astype(float)
    setup = sim_deployment(model, res.run.input_tokens, res.run.output_tokens)
    assert setup.prefill_extra_s is not None
    priced = cached_prefill_perf(model.res.hardware.prefill, lens, res.hit_tokens.astype(float)).service_s
    np.testing.assert_allclose(res.run.prefill_done_s - res.run.arrival_s, priced + setup.prefill_extra_s, rtol=1e-9)
    full = cached_prefill_perf(model.res.hardware.prefill, lens, np.zeros_like(lens)).service_s
    assert res.hit_tokens.tolist() == [0, 0, 96, 96]
    assert np.all(priced[2:] < full[2:])


@cache
def _colocated(scheduler: str) -> ColocatedModel:
    data = {
        "schema_version": 1,
        "name": "reuse-colocated",
        "model": "llama-3.1-8b",
        "mode": "colocated",
        "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 2, "scheduler": scheduler},
        "workload": {"input_tokens": _fixed(600), "output_tokens": _fixed(50)},
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }
    model = build_model(resolve(scenario_from_dict(data, source="test", base_dir=Path(".")), open_catalog()))
    assert isinstance(model, ColocatedModel)
    return model


@pytest.mark.parametrize("scheduler", ["prefill-first", "chunked"])
def test_colocated_instances_cache_whole_sequences(scheduler: str) -> None:
    # A colocated instance keeps the outputs it decoded (by default): with an unbounded cache and affinity every
    # later turn hits its whole history; the cached prefix shortens the prefill (prefill-first: its priced time;
    # chunked: the chunks start after the hit), so TTFT falls against the same run without a cache.
    spec = _sessions(_fixed(3), 600, 50, 1.0)
    model = _colocated(scheduler)
    res = _run(spec, 10.0, 600, UNBOUNDED, routing="affinity", model=model)
    later = res.turn > 1
    history = res.run.input_tokens - 600
    np.testing.assert_array_equal(res.hit_tokens[later], history[later] // 16 * 16)
    cold = _run(spec, 10.0, 600, CacheLayout(0.0, prefix_caching=False), routing="affinity", model=model)
    assert cold.hit_tokens.max() == 0
    assert float(np.mean(res.run.ttft_s[later])) < 0.6 * float(np.mean(cold.run.ttft_s[later]))  # engine time aside
