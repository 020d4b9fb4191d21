"""The closed-loop benchmark replayed event by event: C clients start together at t = 0, each sends its next request
when its last one ends, until N measured requests are done (docs/engines.md §3). The tools run their W warm-up
requests to
completion first, so the measured phase starts from an idle engine with its own C-wide burst: a warm-up changes
nothing in a deterministic replay and is not replayed.

It checks :mod:`pdplan.benchmark.colocated_loop` without sharing its cohort, burst or fixed-point arithmetic: the
colocated instance of :mod:`pdplan.sim.colocated_instance` schedules every step itself (token budget, seats, KV
reservation, decode-first mixed steps or prefill-only steps), and prices chunks by its own roofline tables
(:func:`pdplan.sim.deployment.sim_chunk_price`). Lengths are fixed at the workload's means (rounded), as in the
benchmarks. The engine's per-request overhead and overlap step are constants outside the steps; they are added to
every simulated TTFT exactly as the closed form adds them (``extra_s``), so comparisons may leave them out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pdplan.benchmark.colocated_loop import admitted, decode_s
from pdplan.benchmark.loop_inputs import loop_inputs
from pdplan.serving.colocated import ColocatedModel
from pdplan.sim.deployment import StepModel, sim_deployment
from pdplan.sim.event_loop import simulate_closed_loop
from pdplan.sim.spec import Colocated


@dataclass(frozen=True, slots=True)
class SimulatedBenchmark:
    """Means over the measured requests of one simulated benchmark run (seconds, req/s)."""

    mean_ttft_s: float
    mean_tpot_s: float
    throughput_rps: float
    extra_s: float
    """Per-request overhead and overlap step added to every TTFT (the same constants as the closed form's)."""


def simulate_benchmark(
    model: ColocatedModel, concurrency: int, requests: int, warmup: int, *, step: StepModel = "roofline", seed: int = 0
) -> SimulatedBenchmark:
    """One instance's benchmark at C clients (module docstring)."""
    inp = loop_inputs(model)
    del warmup  # drained before the measured phase (module docstring)
    isl, osl = max(round(inp.input_tokens), 1), max(round(inp.output_tokens), 1)
    setup = sim_deployment(model, np.full(requests, isl), np.full(requests, osl), step)
    dep = setup.deployment
    assert isinstance(dep, Colocated)
    # the overlap step is the closed loop's constant here (extra below), not the replay's own lag (sim.overlap_lag)
    dep = dataclasses.replace(dep, instances=1, mixed=inp.mixed, overlap_steps=0)
    run = simulate_closed_loop(
        concurrency,
        setup.requests,
        dep,
        np.random.default_rng(seed),
        warmup_fraction=0.0,
    )
    extra = inp.request_delay_s + inp.overlap_steps * decode_s(inp, admitted(inp, concurrency))
    ttft = run.values("ttft")
    tpot = run.values("tpot")
    return SimulatedBenchmark(
        float(np.nanmean(ttft)) + extra, float(np.nanmean(tpot)), float(run.throughput_rps), extra
    )
