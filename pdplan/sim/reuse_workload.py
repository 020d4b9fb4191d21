"""The requests of a KV-reuse workload for the simulator at a rate (:mod:`pdplan.sim.reuse_requests`).

A workload reuses KV when it has ``sessions``, a ``shared_prefix`` block, or a Mooncake trace (block hashes;
:func:`pdplan.serving.cache_setup.reuses_kv`). A Mooncake trace with ``arrival: trace`` arrives at its timestamps
scaled to the rate (:func:`pdplan.sim.trace_replay.scaled_arrivals_s`); with another process, at that process's gaps
in file order.
"""

from __future__ import annotations

import numpy as np

from pdplan.errors import SpecError
from pdplan.io.traces_mooncake import load_mooncake_trace
from pdplan.sim.reuse_requests import (
    DEFAULT_BLOCK_TOKENS,
    ReuseRequests,
    mooncake_requests,
    shared_prefix_requests,
    unit_gaps,
)
from pdplan.sim.reuse_sessions import session_requests
from pdplan.sim.trace_replay import scaled_arrivals_s
from pdplan.specs.workload import WorkloadSpec


def reuse_requests(
    workload: WorkloadSpec,
    rate_rps: float,
    n_requests: int,
    block_tokens: int | None,
    seed: int,
    context_window: int | None,
    stationary_start: bool = True,
    turn_latency_s: float = 0.0,
) -> ReuseRequests:
    """The requests of a reuse workload at ``rate_rps`` (about ``n_requests`` counted; a trace gives its own)."""
    blocks = DEFAULT_BLOCK_TOKENS if block_tokens is None else block_tokens
    if workload.sessions is not None:
        return session_requests(
            workload.sessions, workload.arrival, rate_rps, n_requests, block_tokens=blocks, seed=seed,
            context_window=context_window, stationary_start=stationary_start,
            turn_latency_s=turn_latency_s,
        )  # fmt: skip
    if workload.shared_prefix is not None:
        return shared_prefix_requests(
            workload.shared_prefix, workload.arrival, rate_rps, n_requests, block_tokens=blocks, seed=seed,
            context_window=context_window,
        )  # fmt: skip
    trace_spec = workload.trace
    if trace_spec is None or trace_spec.format != "mooncake" or trace_spec.block_tokens is None:
        raise SpecError("not a reuse workload: give sessions, shared_prefix or a Mooncake trace", field="workload")
    if block_tokens is not None and block_tokens != trace_spec.block_tokens:
        raise SpecError(
            f"a Mooncake trace's blocks are its own {trace_spec.block_tokens} tokens, not {block_tokens}",
            field="block_tokens",
        )
    trace = load_mooncake_trace(trace_spec.file, trace_spec.block_tokens)
    if workload.arrival == "trace":
        if trace.requests < 2 or trace.arrival_s[-1] <= trace.arrival_s[0]:
            raise SpecError("arrival: trace needs at least two distinct timestamps", source=str(trace_spec.file))
        arrival = scaled_arrivals_s(trace.arrival_s - trace.arrival_s[0], rate_rps)
    else:
        arrival = np.cumsum(unit_gaps(workload.arrival, trace.requests, np.random.default_rng([seed, 21]))) / rate_rps
    return mooncake_requests(trace, trace_spec.block_tokens, arrival, context_window)
