"""Closed-loop load (benchmark clients): C clients, each sends its next request when the last ends.

Mean-value-analysis style fixed point with zero think time (Little's law on the C circulating
requests): the throughput X satisfies ``X = C / E[R](X)`` where ``E[R](X)`` is the mean
end-to-end response time (TTFT + output_steps × TPOT, averaged over the workload) of the open
Poisson model at rate X. ``X·E[R](X)`` is increasing in X (E[R] grows with load), so the root is
unique and found by brentq on (0, λ_stab). If even at λ_stab fewer than C requests are in flight,
the deployment saturates: X = λ_stab and the remaining clients queue (``saturated``).

Approximation (documented): the latency distributions at X are those of the open model with
Poisson arrivals at X. A closed population of C has at most C requests in the system, so queueing
tails are somewhat shorter than the open model's — the reported percentiles are conservative.
Cf. Reiser & Lavenberg, "Mean-value analysis of closed multichain queuing networks", JACM 1980.
"""

from __future__ import annotations

import numpy as np

from pdplan.benchmark.records import ClosedLoop
from pdplan.numerics.roots import brentq
from pdplan.serving.goodput import ServingModel


def closed_loop_throughput(model: ServingModel, concurrency: int) -> ClosedLoop:
    """Solve ``X·E[R](X) = C`` (module docstring)."""
    limit = model.limit().rate_rps * (1.0 - 1e-6)

    def in_flight(x: float) -> float:
        return x * float(model.snapshot(np.array([x])).mean_response_s()[0]) - concurrency

    top = in_flight(limit)
    if top <= 0.0:
        resp = concurrency / limit
        return ClosedLoop(concurrency, limit, resp, True)
    x = float(brentq(in_flight, limit * 1e-9, limit, xtol=1e-6 * limit, rtol=1e-6))
    return ClosedLoop(concurrency, x, concurrency / x, False)
