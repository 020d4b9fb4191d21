"""The simulator's goodput against the closed form's, decided by two simulations instead of a bisection.

``|closed / simulated − 1| < tol`` holds exactly when the simulated goodput lies in ``(closed / (1 + tol),
closed / (1 − tol))``; with the simulated attainment falling as the rate rises (the assumption
:func:`pdplan.sim.compare.simulated_goodput`'s bisection makes too), that is: the simulation meets the SLO at
``closed / (1 + tol)`` and misses it at ``closed / (1 − tol)``. Two runs at the bisection's request count replace its
about eight (``pdplan.sim.compare.expected_goodput_runs``), without its 1 % bracket slack.

The upper rate is capped at 0.999 × the closed form's stability limit, past which the closed form has no operating
point to simulate beside; a miss there bounds the simulated goodput tighter still (below the cap, not only below
``closed / (1 − tol)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pdplan.specs.scenario import Scenario


@dataclass(frozen=True)
class GoodputBracket:
    """The closed-form goodput, the two rates simulated and the simulated attainment at each, against the SLO's."""

    closed_rps: float
    low_rps: float
    high_rps: float
    attainment_low: float
    attainment_high: float
    target: float

    def holds(self) -> bool:
        """The simulation meets the SLO at the low rate and misses it at the high one."""
        return self.attainment_low >= self.target > self.attainment_high


def goodput_bracket(sc: Scenario, tolerance: float, n_requests: int) -> GoodputBracket:
    """Simulate ``sc`` (seed 0) at ``closed / (1 + tolerance)`` and at ``closed / (1 − tolerance)`` capped below the
    stability limit (module docstring)."""
    from pdplan.evaluation import evaluate
    from pdplan.sim.compare import simulate_scenario

    ev = evaluate(sc)
    closed = ev.goodput_rps
    low = closed / (1.0 + tolerance)
    high = min(closed / (1.0 - tolerance), 0.999 * ev.stability_limit_rps)
    attainment = []
    for rate in (low, high):
        simulated = simulate_scenario(sc, rate=rate, n_requests=n_requests).simulated
        assert simulated is not None, f"no simulation at {rate} req/s (closed-form goodput {closed})"
        attainment.append(simulated.attainment)
    return GoodputBracket(closed, low, high, attainment[0], attainment[1], sc.slo.attainment)
