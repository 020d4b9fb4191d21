"""``arrival: trace``: the simulator replays a trace's requests in order at its own arrival times.

A trace workload with ``arrival: trace`` (``input_tokens,output_tokens,arrival_s``) is simulated request by request
as recorded: row i arrives at ``arrival_s[i] - arrival_s[0]`` with its own lengths (clipped to the context window as
every sampled request is), instead of resampled lengths and Poisson gaps. Its native rate is
``(N - 1) / (arrival_s[N-1] - arrival_s[0])`` (N arrivals span N - 1 gaps).

At another rate λ (``--rate``, and each step of the simulated goodput search) the recorded gaps are scaled by
``native / λ``: the trace's burstiness (the gaps' shape) is kept and only the time axis changes, as trace
replay tools speed a trace up or slow it down.
"""

from __future__ import annotations

import numpy as np

from pdplan.errors import SpecError
from pdplan.io.workloads import load_trace
from pdplan.specs.workload import WorkloadSpec
from pdplan.types import FloatArray, Int64Array
from pdplan.workload.bins import clip_to_window


def replays_trace(spec: WorkloadSpec) -> bool:
    """Whether the simulator replays the workload's trace arrivals (``arrival: trace``)."""
    return spec.trace is not None and spec.arrival == "trace"


def trace_requests(spec: WorkloadSpec, context_window: int | None) -> tuple[Int64Array, Int64Array, FloatArray]:
    """The trace's (input, output) lengths in row order and its arrival times shifted to start at 0 s."""
    assert spec.trace is not None
    trace = load_trace(spec.trace.file)
    if trace.arrival_s is None:
        raise SpecError("the trace has no arrival_s column (needed by arrival: trace)", field="arrival")
    arrival = trace.arrival_s - trace.arrival_s[0]
    if arrival.size < 2 or arrival[-1] <= 0.0:
        raise SpecError("arrival: trace needs at least two distinct arrival times", source=str(spec.trace.file))
    lin, out = trace.input_tokens.copy(), trace.output_tokens.copy()
    if context_window is not None:
        lc, oc = clip_to_window(lin.astype(float), out.astype(float), context_window)
        lin, out = lc.astype(np.int64), oc.astype(np.int64)
    return lin, out, arrival


def native_rate_rps(arrival_s: FloatArray) -> float:
    """The trace's own mean rate: N - 1 gaps over its span."""
    return float((arrival_s.size - 1) / (arrival_s[-1] - arrival_s[0]))


def scaled_arrivals_s(arrival_s: FloatArray, rate_rps: float) -> FloatArray:
    """The recorded arrivals with every gap scaled so that the mean rate is ``rate_rps``."""
    return np.asarray(arrival_s * (native_rate_rps(arrival_s) / rate_rps), dtype=np.float64)
