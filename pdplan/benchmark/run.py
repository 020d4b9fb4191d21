"""The closed loop of a deployment at a concurrency: both answers pdplan gives, from one entry point.

* the mean-value fixed point ``X = C / E[R](X)`` on the open-loop model (:mod:`pdplan.benchmark.mva`): the
  throughput at which the open model holds C requests in flight, whose latencies ``evaluate`` then reports as the
  operating point;
* what the engine's benchmark tool prints at that concurrency (:mod:`pdplan.benchmark.colocated_loop` for a
  colocated deployment, :mod:`pdplan.benchmark.disaggregated_loop` for xPyD): start-up cohorts, warm-up and
  measured request counts, the steady state.
"""

from __future__ import annotations

from pdplan.benchmark.disaggregated_loop import disagg_benchmark_of
from pdplan.benchmark.loop_inputs import benchmark_of
from pdplan.benchmark.mva import closed_loop_throughput
from pdplan.benchmark.records import BenchmarkLoop, ClosedLoop
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel


def closed_loop(
    model: ColocatedModel | DisaggregatedModel, concurrency: int, requests: int | None, warmup: int | None
) -> tuple[ClosedLoop, BenchmarkLoop]:
    """The closed loop at ``concurrency`` and what the engine's benchmark tool would report of it (``requests`` /
    ``warmup``: the tool's measured and warm-up requests; None: the engine profile's tool defaults)."""
    loop = closed_loop_throughput(model, concurrency)
    if isinstance(model, ColocatedModel):
        return loop, benchmark_of(model, concurrency, requests, warmup)
    return loop, disagg_benchmark_of(model, concurrency, requests, warmup)
