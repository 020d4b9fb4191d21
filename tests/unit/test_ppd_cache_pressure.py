"""PPD's held histories where a decode rank's history cache binds (issue #24 item 6; docs/prefix_cache.md §11, *Held
histories under cache pressure*): the closed form's law (:func:`pdplan.serving.ppd.held_probability`, Che's
characteristic time with each turn's history its own item size) by hand, and against the simulator's rank caches
(:mod:`pdplan.sim.decode_cache`) on a run whose warm-up outlasts the characteristic time."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.ppd_pressure import pressure_case, pressure_sessions

from pdplan.cache.lru_closed_form import session_cache
from pdplan.serving.build import build_model, model_at_rate, with_cache_rate
from pdplan.serving.ppd import decode_session_workload, held_probability, turns_pmf
from pdplan.serving.ppd_report import placement_of
from pdplan.serving.resolve import SESSIONS_PAST_WINDOW
from pdplan.sim.reuse_setup import reuse_inputs
from pdplan.specs.reuse import SessionsSpec

# ---- the law by hand ----


def _two_turns() -> SessionsSpec:
    """Two turns of 600 new and 400 output tokens, 10 s exponential think: the decode side's items are the histories
    H_1 = 1,000 tokens (reused by turn 2 after a think time G) and H_2 = 2,000 (the session's last: never reused)."""
    return SessionsSpec.model_validate(pressure_sessions(2, 600, 400, 10.0))


def test_held_law_with_two_history_sizes_by_hand() -> None:
    # 0.02 turns/s: 0.01 sessions/s on the one domain. Che's characteristic time T fills the free KV C with the
    # items' mean occupancy (Little's law, each item its own size): H_1 is held from turn 1's end until turn 2
    # takes it or T passes, E[min(G, T)] = θ(1 − e^{−T/θ}); H_2 is held T. At T = θ = 10 s:
    # C = 0.01·(1,000·10·(1 − e^{−1}) + 2,000·10) = 263.212 tokens, and turn 2 finds H_1 w.p. P(G < T) = 1 − e^{−1}.
    spec = _two_turns()
    workload = decode_session_workload(spec, 0.02, turns_pmf(spec))
    capacity = 0.01 * (1000.0 * 10.0 * -math.expm1(-1.0) + 2000.0 * 10.0)
    assert capacity == pytest.approx(263.212, abs=1e-3)
    held, free = held_probability(workload, capacity, 1, affine=True)
    assert free == capacity
    np.testing.assert_allclose(held, [0.0, -math.expm1(-1.0)], rtol=1e-6)
    result = session_cache(workload, capacity, instances=1, partial_hits=False)
    assert result.characteristic_time_s == pytest.approx(10.0, rel=1e-6)


def test_held_law_on_two_domains_by_hand() -> None:
    # Random decode routing over two domains, 0.005 sessions/s each: turn 2 lands on turn 1's domain w.p. q = 1/2,
    # and H_1 is then held E[min(G, T)]; else nothing takes it and it is held T. At T = 10 s:
    # C = 0.005·(1,000·(0.5·6.3212 + 0.5·10) + 2,000·10) = 140.803 tokens, f_2 = q·(1 − e^{−1}) = 0.31606.
    spec = _two_turns()
    workload = decode_session_workload(spec, 0.02, turns_pmf(spec))
    capacity = 0.005 * (1000.0 * (0.5 * 10.0 * -math.expm1(-1.0) + 0.5 * 10.0) + 2000.0 * 10.0)
    assert capacity == pytest.approx(140.803, abs=1e-3)
    held, _ = held_probability(workload, capacity, 2, affine=False)
    np.testing.assert_allclose(held, [0.0, 0.5 * -math.expm1(-1.0)], rtol=1e-6)


def test_larger_histories_in_the_same_room_by_hand() -> None:
    # The same free KV (263.212 tokens) with 1,400 output tokens a turn: H_1 = 2,000 and H_2 = 4,000 tokens. Then
    # 0.01·(2,000·10·(1 − e^{−T/10}) + 4,000·T) = 263.212 at T = 4.7040 s (the fixed point of
    # T ← (26,321.2 − 20,000·(1 − e^{−T/10}))/4,000, a contraction: slope ≤ 1/2), and f_2 = 1 − e^{−0.47040} = 0.37525
    # where the smaller histories' is 0.63212: the items' sizes set T, not their count.
    big = SessionsSpec.model_validate(pressure_sessions(2, 600, 1400, 10.0))
    held, _ = held_probability(decode_session_workload(big, 0.02, turns_pmf(big)), 263.212, 1, affine=True)
    assert held[1] == pytest.approx(0.37525, abs=1e-5)


# ---- the closed form against the simulator ----


def test_sessions_past_the_window_are_flagged() -> None:
    # 20 turns of 3,000 new and 100 output tokens: turn k's prompt and output are 3,100·k tokens, past
    # Qwen3-30B-A3B's 40,960 from turn 14 on (7 turns of 20: 35 % of the requests). The simulator ends each session
    # after 13 turns; the closed form keeps the 20, so the warning says the two answer different workloads.
    res = pressure_case(pressure_sessions(20, 3000, 100, 60.0))
    (warning,) = res.warnings
    assert warning.startswith("35.00% of requests exceed qwen3-30b-a3b's context window of 40960 tokens")
    assert warning.endswith(SESSIONS_PAST_WINDOW)
    assert not pressure_case(pressure_sessions(13, 3000, 100, 60.0)).warnings


@pytest.mark.slow
def test_held_histories_against_the_simulator_where_the_cache_binds() -> None:
    # 20 req/s nominal, 4,000 requests, seed 0. Each rank holds ~570K free tokens; the sessions' histories (2,100 to
    # 8,400 tokens) fill it at T_C ≈ 32 s, so turns find their history w.p. 1 − e^{−T_C/20} ≈ 0.80. On 2026-12-07
    # (docs/prefix_cache.md §11, benchmarks/ppd_cache_pressure.py): on decode 0.589 simulated against 0.597, Turn 2+
    # held 0.775 against 0.796, a rank's free KV 554K mean (522–589K P10–P90) against 572K. The run's warm-up (41 s)
    # outlasts T_C: the stationary start warms the caches with the sessions in progress only, and the runs whose
    # counted window starts within T_C of it hold more (3,000 requests of 4-turn sessions at 60 s think: 0.553
    # against 0.481 over 12,000).
    res = pressure_case()
    rate = 20.0
    model = build_model(res)
    inputs = reuse_inputs(model, rate)
    run = inputs.simulate(
        model, res.scenario.workload, rate_rps=rate, n_requests=4000, seed=0, warmup_fraction=0.2, turn_latency_s=None
    )
    offered = run.offered_rps
    placement = placement_of(model_at_rate(with_cache_rate(res, offered), offered))
    assert placement is not None
    assert run.turns is not None
    assert run.turns.share_on_decode is not None
    assert res.cache is not None
    sessions = res.cache.reuse.sessions
    assert sessions is not None
    workload = decode_session_workload(sessions, placement.rate_rps, turns_pmf(sessions))
    t_c = session_cache(workload, placement.free_tokens, instances=placement.domains, partial_hits=False)
    assert 20.0 < t_c.characteristic_time_s < run.run.window_s[0]  # binds, and warmed past it
    assert float(np.max(placement.held)) < 0.85  # the cache binds: a fifth of the histories are gone
    assert placement.share_on_decode == pytest.approx(run.turns.share_on_decode, abs=0.02)
