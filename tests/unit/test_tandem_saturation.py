"""The tandem link chain's saturation test and early stop (pdplan.queueing.tandem_chain, **Saturation** and **A tail
past the lattice**; pdplan.queueing.link_delay's lattice widening)."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.errors import UnsettledWaitError
from pdplan.queueing.link_delay import TAIL_MAX, TandemLink, tandem_delay
from pdplan.queueing.tandem_chain import ChainInputs, drift_s, stationary_wait

# Request granularity (lead 0): carry a = link busy, clearance b = prefill service; the prompt bins of
# tests/unit/test_link_delay.py with a link twice as slow as the prefill, so the link saturates first (at link
# load 1 the prefill's is 0.5).
PROB = np.array([0.5, 0.35, 0.15])
SERVICE_S = np.array([0.008, 0.04, 0.4])
BUSY_S = 2.0 * SERVICE_S
INPUTS = ChainInputs(PROB, SERVICE_S, BUSY_S, SERVICE_S)


def test_drift_is_the_link_load_less_one_over_the_rate() -> None:
    """With lead 0, E[a] − E[S] − (1 − θE[S])/θ = E[busy] − 1/θ: the drift changes sign at link load 1."""
    e_busy = float(PROB @ BUSY_S)
    theta = np.array([0.5, 0.99, 1.0, 1.01]) / e_busy  # prefill loads 0.25-0.5: ρ below its 0.999 clip
    np.testing.assert_allclose(drift_s(INPUTS, theta), e_busy - 1.0 / theta, rtol=1e-12, atol=1e-15)
    assert list(drift_s(INPUTS, theta) < 0.0) == [True, True, False, False]


def test_tail_stop_only_where_the_finished_law_runs_past() -> None:
    """On a lattice too short for the law (link load 0.7, 64 cells of 1 ms) the early stop gives None,
    and the law iterated to the end does hold more than the limit on its last cell; where it fits, the stop
    changes nothing (byte for byte)."""
    theta = np.array([0.7 / float(PROB @ BUSY_S)])
    short = stationary_wait(INPUTS, theta, np.array([1e-3]), 64)
    assert short is not None
    assert float(short[0, :, -1].sum()) > TAIL_MAX
    assert stationary_wait(INPUTS, theta, np.array([1e-3]), 64, tail_max=TAIL_MAX) is None
    fits = stationary_wait(INPUTS, theta, np.array([0.02]), 1024)
    assert fits is not None
    assert float(fits[0, :, -1].sum()) <= TAIL_MAX
    again = stationary_wait(INPUTS, theta, np.array([0.02]), 1024, tail_max=TAIL_MAX)
    assert again is not None
    assert np.array_equal(again, fits)


def test_saturated_link_is_refused_without_iterating() -> None:
    link = TandemLink(PROB, SERVICE_S, BUSY_S, SERVICE_S, np.zeros(3))
    theta = np.array([1.05 / float(PROB @ BUSY_S)])
    with pytest.raises(UnsettledWaitError, match="runs past its lattice"):
        tandem_delay(link, theta)


def test_a_chain_asked_again_is_not_solved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The goodput search asks for the same single-rate chain more than once (pdplan.queueing.link_delay._solved):
    the second answer is the first, an error included, without iterating again; another iteration budget is
    another chain."""
    from pdplan.queueing import link_delay, tandem_chain

    solves: list[int] = []

    def counted(*args: object, **kwargs: object) -> object:
        solves.append(1)
        return stationary_wait(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tandem_chain, "stationary_wait", counted)  # link_delay imports it when it solves
    link_delay._SOLVED.clear()
    link = TandemLink(PROB, SERVICE_S, BUSY_S, SERVICE_S, np.zeros(3))
    theta = np.array([0.7 / float(PROB @ BUSY_S)])
    first = tandem_delay(link, theta)
    again = tandem_delay(link, theta)
    assert len(solves) == 1
    assert np.array_equal(first.points_s, again.points_s)
    assert np.array_equal(first.weights, again.weights)
    monkeypatch.setattr(link_delay, "TANDEM_MAX_ITER", 3)  # too few steps: it cannot settle
    for _ in range(2):
        with pytest.raises(UnsettledWaitError, match="no convergence"):
            tandem_delay(link, theta)
    assert len(solves) == 2
