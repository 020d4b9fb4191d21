"""A tandem chain whose inputs lie within NEAR_RTOL of a kept solve's takes that solve's law
(pdplan.queueing.link_delay._near); one further off is solved afresh."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.errors import UnsettledWaitError
from pdplan.queueing import link_delay, tandem_chain
from pdplan.queueing.link_delay import NEAR_RTOL, TandemLink, tandem_delay

# The three prompt bins of tests/unit/test_tandem_saturation.py: request granularity (lead 0), the link twice as slow
# as the prefill, link load 0.7.
PROB = np.array([0.5, 0.35, 0.15])
SERVICE_S = np.array([0.008, 0.04, 0.4])
BUSY_S = 2.0 * SERVICE_S
THETA = np.array([0.7 / float(PROB @ BUSY_S)])


def _link(scale: float) -> TandemLink:
    """The link with every service, carry and clearance times ``scale`` (the slack stays 0)."""
    service = SERVICE_S * scale
    return TandemLink(PROB, service, BUSY_S * scale, service, np.zeros(3))


@pytest.fixture
def solves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the chain solves (link_delay imports stationary_wait from tandem_chain when it solves)."""
    counted: list[int] = []
    real = tandem_chain.stationary_wait

    def counting(*args: object, **kwargs: object) -> object:
        counted.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tandem_chain, "stationary_wait", counting)
    link_delay._SOLVED.clear()
    return counted


def test_inputs_within_the_tolerance_take_the_kept_law(solves: list[int]) -> None:
    """Times 1 + 1e-13 (bytes that differ, well within 1e-11): no new solve, the kept law, and each point of the
    delay within 1e-12 relative of the first (the law's cells are the same; their seconds are this call's lattice)."""
    first = tandem_delay(_link(1.0), THETA)
    near = tandem_delay(_link(1.0 + 1e-13), THETA)
    assert len(solves) == 1
    assert not np.array_equal(first.points_s, near.points_s)  # another lattice: the near call's own h
    np.testing.assert_allclose(near.points_s, first.points_s, rtol=1e-12, atol=0.0)
    assert np.array_equal(near.weights, first.weights)


def test_a_near_hit_is_what_a_fresh_solve_gives_to_its_tolerance(solves: list[int]) -> None:
    """The delay the kept law gives against the one solved afresh for the perturbed inputs (1e-13 relative): the same
    to the solves' own accuracy. Each stops at an L1 change of TANDEM_TOL = 1e-6 (Anderson mixing at 1e-8), so a
    fresh solve of inputs 1e-13 off already differs by more than that from the first: here 1.8e-8 relative on the
    delay's points, by the mixing's path, not by the inputs."""
    tandem_delay(_link(1.0), THETA)
    near = tandem_delay(_link(1.0 + 1e-13), THETA)
    link_delay._SOLVED.clear()
    fresh = tandem_delay(_link(1.0 + 1e-13), THETA)
    assert len(solves) == 2
    np.testing.assert_allclose(near.points_s, fresh.points_s, rtol=1e-6, atol=0.0)
    np.testing.assert_allclose(near.weights, fresh.weights, rtol=1e-6, atol=0.0)


def test_inputs_past_the_tolerance_are_solved_again(solves: list[int]) -> None:
    """Times 1 + 100·NEAR_RTOL, or another rate by as much: a chain of its own."""
    tandem_delay(_link(1.0), THETA)
    tandem_delay(_link(1.0 + 100.0 * NEAR_RTOL), THETA)
    tandem_delay(_link(1.0), THETA * (1.0 + 100.0 * NEAR_RTOL))
    assert len(solves) == 3


def test_settings_must_match_exactly(solves: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another iteration budget is another chain even where the inputs are near: its error is its own."""
    tandem_delay(_link(1.0), THETA)
    monkeypatch.setattr(link_delay, "TANDEM_MAX_ITER", 3)  # too few steps: it cannot settle
    with pytest.raises(UnsettledWaitError, match="no convergence"):
        tandem_delay(_link(1.0 + 1e-13), THETA)
    assert len(solves) == 2
