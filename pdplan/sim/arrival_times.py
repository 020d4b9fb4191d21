"""Open-loop arrival times drawn from a workload's arrival process (``arrival:``, :mod:`pdplan.specs.arrivals`).

The simulator's open-loop runs (:mod:`pdplan.sim.compare`) take their arrivals from here: Poisson by
:func:`pdplan.sim.poisson_arrivals` (exactly the gaps the simulator always drew, so every Poisson result is
unchanged), ``constant`` and ``gamma`` as the cumulative sum of the gaps of
:func:`pdplan.queueing.arrivals.interarrival_times_s` (constant 1/λ; gamma of shape 1/cv² and scale cv²/λ). As for
Poisson, request i arrives at the sum of the first i + 1 gaps, and one seed gives one run. The gamma gaps are the
generator's standard gamma variates times the scale, so the runs of one seed at different rates are the same draws
on a rescaled time axis (the common random numbers the simulated goodput search relies on). A trace brings its own
times (:mod:`pdplan.sim.trace_replay`).
"""

from __future__ import annotations

import numpy as np

from pdplan.errors import SpecError
from pdplan.queueing.arrivals import interarrival_times_s
from pdplan.sim.spec import poisson_arrivals
from pdplan.specs.arrivals import ArrivalProcess, GammaArrival, PoissonArrival, TraceArrival
from pdplan.types import FloatArray


def arrival_times_s(process: ArrivalProcess, rate_per_s: float, n: int, rng: np.random.Generator) -> FloatArray:
    """``n`` increasing arrival times (s) of ``process`` at mean rate ``rate_per_s`` (module docstring).

    Example: ``arrival_times_s(ConstantArrival(process="constant"), 4.0, 3, rng)`` → ``[0.25, 0.5, 0.75]``.
    """
    if isinstance(process, PoissonArrival):
        return poisson_arrivals(rate_per_s, n, rng)
    if isinstance(process, TraceArrival):
        raise SpecError("arrival: trace replays the trace's own times (pdplan.sim.trace_replay)", field="arrival")
    try:
        gaps = interarrival_times_s(process, rate_per_s, n, rng)
    except ValueError as err:  # a rate that is not finite and > 0
        raise SpecError(str(err), field="rate") from None
    return np.asarray(np.cumsum(gaps), dtype=np.float64)


def arrival_name(process: ArrivalProcess) -> str:
    """The process in a word, as a simulation's settings record it: ``poisson``, ``constant``, ``gamma (cv 2)``,
    ``trace``."""
    if isinstance(process, GammaArrival):
        return f"gamma (cv {process.cv:g})"
    return process.process
