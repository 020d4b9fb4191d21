"""DualPath's optimal split: the simulated TTFT split into its parts against the closed form's (issue #24).

The case is ``benchmarks/dualpath_closed_form_vs_sim.py``'s ``optimal`` split with the uniform think time (the
example ``examples/agent-dualpath.yaml``, 0.7 × the closed form's goodput nominal, 5,000 requests), under one of
three decode steps (``--law``): ``law`` the tree's (the minimum of the step's two lines, in the closed form and per
iteration in the simulator's ``linear`` step, :mod:`pdplan.serving.decode_lines`); ``line`` the closed form on the
law, the simulator on the one line (:attr:`pdplan.serving.roles.DecodePerf.step`); ``off`` both on the one line
(:func:`pdplan.serving.roles.concave_lines` returning none: the tree before the law). ``--start``: the sessions
placed as if turns took no time (``zero``, that benchmark's start) or with the run's own mean turn latency (``own``,
:func:`pdplan.sim.reuse.simulate_reuse`'s ``turn_latency_s=None``: 2-4 runs).

Each counted request's simulated TTFT is cut at the times the simulator logs: the storage read into DRAM (its SNIC
wait and transfer, arrival to the buffer's fill), the prefill queue (fill to the prefill's start), the prefill
(start to end, the buffer's move to the GPU under it included), prefill end to decode admission (the exposed KV
transfer and the wait for the decode step boundary), the first decode step (admission to token 1) and the additions
the simulator applies after the run (``ttft_extra_s``: the engine's request time). The closed form's parts are
``evaluate(sc, rate=offered).ttft_parts`` (means; :class:`pdplan.serving.ttft.TtftParts`; its decode side the
exposed KV transfer and ``(1 + busy/2)·τ̄``, :func:`pdplan.serving.ttft.first_token_s`). Two diagnostics: the
Pollaczek-Khinchine wait of each prefill instance at its simulated rate and services (the simulated queue behind
Poisson arrivals), and the index of dispersion of the arrivals' counts over 1, 5 and 15 s windows (1 for Poisson).

Run: ``python benchmarks/dualpath_ttft_parts.py [--law law|line|off] [--seed S] [--start zero|own] [--requests N]
[--block TOKENS]`` (one law a process: ``off`` patches the decode fit); prints a Markdown table (means and P90s in
ms) and the CPU time, about 20 s (``own``: 70 s). docs/prefix_cache.md §10 records its output.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dualpath_closed_form_vs_sim import BLOCK_TOKENS, RATE_SHARE, SPLITS, scenario

import pdplan.serving.roles as roles
import pdplan.sim.deployment as sim_deployment
import pdplan.sim.reuse as sim_reuse
from pdplan.evaluation.evaluate import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.serving.build import build_model
from pdplan.serving.resolve import resolve
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import DecodePerf
from pdplan.sim.reuse import ReuseResult, simulate_reuse
from pdplan.sim.reuse_setup import reuse_inputs
from pdplan.sim.spec import StepTimeFn
from pdplan.specs.scenario import Scenario
from pdplan.types import FloatArray

N_REQUESTS = 5000
PARTS = ("read", "queue", "prefill", "to admit", "first step", "extra")


@dataclass
class Log:
    """Per-request times the tracker sees (indexed as the request draws, mapped by the run's ``order``)."""

    fetched_s: dict[int, float]
    start_s: dict[int, float]
    order: Any = None


@contextmanager
def logged(law: str) -> Iterator[Log]:
    """Record the storage read's fill and the prefill's start per request; ``law`` ``line``: the simulator's
    ``linear`` step on the one line (the decode step's ``step``) instead of the minimum of its lines."""
    log = Log({}, {})
    tracker = sim_reuse.ReuseTracker
    prefetch, start, result, step_fn = tracker.prefetch, tracker.start, sim_reuse._result, sim_deployment._step_fn

    def on_prefetch(self: Any, request: int, instance: int, now_s: float) -> float:
        ready = prefetch(self, request, instance, now_s)
        log.fetched_s[request] = ready
        return ready

    def on_start(self: Any, request: int, instance: int, now_s: float) -> Any:
        log.start_s[request] = now_s
        return start(self, request, instance, now_s)

    def on_result(run: Any, order: Any, *args: Any) -> Any:
        log.order = order
        return result(run, order, *args)

    def one_line(hw: RoleHardware, decode: DecodePerf, step: Any) -> StepTimeFn:
        return decode.step if step == "linear" else step_fn(hw, decode, step)

    def no_lines(*args: Any) -> tuple[tuple[Any, ...], tuple[float, float]]:
        return (), (0.0, 0.0)

    concave = roles.concave_lines
    tracker.prefetch, tracker.start = on_prefetch, on_start  # type: ignore[method-assign]
    sim_reuse._result = on_result  # type: ignore[assignment]
    if law == "line":
        sim_deployment._step_fn = one_line
    if law == "off":
        roles.concave_lines = no_lines  # type: ignore[assignment]
    try:
        yield log
    finally:
        tracker.prefetch, tracker.start = prefetch, start  # type: ignore[method-assign]
        sim_reuse._result, sim_deployment._step_fn, roles.concave_lines = result, step_fn, concave


def simulate(
    sc: Scenario, rate: float, requests: int, seed: int, start: str = "zero", block_tokens: int = BLOCK_TOKENS
) -> ReuseResult:
    """``benchmarks/dualpath_closed_form_vs_sim.py``'s simulation of ``sc`` at ``rate``, seeded ``seed``; ``start``
    ``own``: the sessions placed with the run's own mean turn latency (:func:`pdplan.sim.reuse.simulate_reuse`'s
    ``turn_latency_s=None``), ``zero`` as if turns took no time (that benchmark's start)."""
    model = build_model(resolve(sc, open_catalog()))
    inputs = reuse_inputs(model, rate)
    return simulate_reuse(
        model, sc.workload, inputs.layout, rate_rps=rate, routing=inputs.routing,
        exposed_load_s=inputs.exposed_load_s, n_requests=requests, seed=seed, block_tokens=block_tokens,
        turn_latency_s=None if start == "own" else 0.0,
    )  # fmt: skip


def pk_wait_s(result: ReuseResult, service_s: FloatArray) -> float:
    """The Pollaczek-Khinchine mean wait of each prefill instance at its counted requests' rate over the window and
    their simulated services (the start-to-end part), averaged over the requests: the M/G/1 queue the simulator's
    own prefills would form behind Poisson arrivals."""
    warm = result.run.warmup_count
    span = result.run.window_s[1] - result.run.window_s[0]
    inst, total = result.prefill_instance[warm:], 0.0
    for i in np.unique(inst):
        s = service_s[warm:][inst == i]
        rho = s.size / span * float(np.mean(s))
        total += s.size * rho / (1 - rho) * float(np.mean(s**2)) / (2 * float(np.mean(s)))
    return total / inst.size


def idc(arrival_s: FloatArray, window_s: float) -> float:
    """The index of dispersion (variance / mean) of the arrivals' counts in windows of ``window_s``: 1 for Poisson,
    above it for arrivals whose rate is modulated over the window."""
    edges = np.arange(arrival_s.min(), arrival_s.max(), window_s)
    counts = np.histogram(arrival_s, edges)[0]
    return float(np.var(counts) / np.mean(counts))


def _ms(values: FloatArray) -> str:
    """Mean / P90 of ``values`` in ms."""
    return f"{1e3 * float(np.mean(values)):.1f} / {1e3 * float(np.percentile(values, 90)):.1f}"


def run(
    law: str, requests: int, seed: int = 0, start: str = "zero", block_tokens: int = BLOCK_TOKENS
) -> list[tuple[str, str, str]]:
    """The rows of one step law: (part, simulated mean / P90, closed form's mean); ``block_tokens`` the cache's
    block (that benchmark's 256 by default)."""
    sc = scenario(SPLITS["optimal"], think="uniform")
    with logged(law) as log:
        rate = RATE_SHARE * evaluate(sc).goodput_rps
        result = simulate(sc, rate, requests, seed, start, block_tokens)
        closed = evaluate(sc, rate=result.offered_rps)
    sim, order = result.run, np.asarray(log.order)
    fetched_s = np.array([log.fetched_s.get(int(i), np.nan) for i in order])
    start_s = np.array([log.start_s[int(i)] for i in order])
    warm = slice(sim.warmup_count, None)
    cuts = [sim.arrival_s, fetched_s, start_s, sim.prefill_done_s, sim.decode_admit_s, sim.first_token_s]
    parts = [b - a for a, b in itertools.pairwise(cuts)] + [result.ttft_extra_s]
    tp, op = closed.ttft_parts, closed.operating_point
    assert tp is not None
    assert op is not None
    assert closed.cache is not None
    decode = next(p for p in sim.pools if "decode" in p.name)
    cf = [tp.cache_load_s, tp.queue_s, tp.prefill_s, np.nan, np.nan, tp.request_overhead_s]
    rows = [(name, _ms(v[warm]), f"{1e3 * c:.1f}") for name, v, c in zip(PARTS, parts, cf, strict=True)]
    decode_side = (sim.first_token_s - sim.prefill_done_s)[warm]
    prefill_side = (sim.prefill_done_s - sim.arrival_s + result.ttft_extra_s)[warm]
    idcs = " / ".join(f"{idc(sim.arrival_s[warm], w):.2f}" for w in (1.0, 5.0, 15.0))
    rows += [
        ("to admit + first step", _ms(decode_side), f"{1e3 * tp.decode_side_s:.1f}"),
        ("prefill side (arrival to prefill end + extra)", _ms(prefill_side), f"{1e3 * tp.prefill_side_s:.1f}"),
        ("closed form: KV transfer, first token", "", f"{1e3 * tp.kv_transfer_s:.1f}, {1e3 * tp.first_token_s:.1f}"),
        ("M/G/1 queue of the simulated prefills", f"{1e3 * pk_wait_s(result, parts[2]):.1f}", ""),
        ("TTFT", _ms(result.ttft_s[warm]), f"{1e3 * tp.total_s:.1f} / {1e3 * op.ttft_s.p90:.1f}"),
        ("offered (req/s)", f"{result.offered_rps:.2f}", f"{result.offered_rps:.2f}"),
        ("decode batch per instance", f"{decode.mean_batch_size:.1f}", ""),
        ("arrivals' IDC over 1 s / 5 s / 15 s", idcs, ""),
        ("token hit ratio", f"{result.token_hit_ratio:.4f}", f"{closed.cache.token_hit_ratio:.4f}"),
        ("mean turn latency (s)", f"{float(np.mean((sim.finish_s - sim.arrival_s)[warm])):.2f}", ""),
    ]
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=N_REQUESTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--block", type=int, default=BLOCK_TOKENS, help="the cache's block (tokens)")
    parser.add_argument("--start", default="zero", choices=("zero", "own"))
    parser.add_argument("--law", default="law", choices=("law", "line", "off"), help="the decode step (docstring)")
    args = parser.parse_args(argv)
    start = time.process_time()
    print("| step | part | simulated mean / P90 (ms) | closed form (ms) |")
    print("|---|---|---:|---:|")
    for part, sim, closed in run(args.law, args.requests, args.seed, args.start, args.block):
        print(f"| {args.law} | {part} | {sim} | {closed} |")
    print(f"CPU time: {time.process_time() - start:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
