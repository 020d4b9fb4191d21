"""PPD on the agent sessions: the closed form against the simulator at the simulator's own offered rate, and the
appends that share a mixed step (issue #24 item 6; docs/prefix_cache.md §11, *Appends that share a step*).

The case: ``examples/agent-dualpath.yaml`` with ``turn_placement: {policy: ppd}`` and its search dropped, the preset's
sessions (157 turns of 253 new and 176 output tokens) with the think time exponential of the preset's 11.6 s mean
(``--think fixed``: the preset's own). The simulator (:func:`pdplan.sim.reuse.simulate_reuse`) runs at the nominal
rate :data:`NOMINAL_RPS` with the sessions' stationary start at :data:`START_LATENCY_S` (the own-latency fixed point
that ``turn_latency_s=None`` finds for this case: D = 0, 4.43, 5.11 s over three runs; ``--own`` runs that search
instead, ~3× the time), 8,000 requests, seed 0; the closed form (``build_model`` and its snapshot, the turn
placement's report) at the rate the simulation offered (``ReuseResult.offered_rps``).

Rows: TPOT mean and P90, TTFT P90 over all turns and Turn 1 / Turn 2+ (the simulator's turn index; Turn 1 is 1/157
of the requests, ~50 in a run: its P90 is noisy), TTFT P99. And the simulator's mixed steps, recorded as they are
planned (:meth:`pdplan.sim.decode_append.AppendDecodeInstance._plan`, wrapped here) in the counted window (the
run's ``window_s``: its tail, past the last counted arrival, runs at a falling load): how many appends each carries,
the share of appends that share their step with another and the mean number of others, against the closed form's
(:meth:`pdplan.serving.ppd_boundary.StepBoundary.carried`: the count Poisson(λ_a·s) over the step in flight s); and
the per-request TPOT's standard deviation against the closed form's added one
(:class:`pdplan.serving.ppd_decode.AppendNoise`).

Run: ``python benchmarks/agent_ppd_vs_sim.py [--think exponential|fixed] [--requests N] [--own]`` (one simulation,
~3 min of CPU on this machine; prints a Markdown table).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.queueing import decode_fixed_point
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.ppd_report import placement_of, ppd_report
from pdplan.serving.resolve import resolve
from pdplan.sim import decode_append
from pdplan.sim.compare import WARMUP_FRACTION
from pdplan.sim.reuse import simulate_reuse
from pdplan.sim.reuse_setup import reuse_inputs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "agent-dualpath.yaml"
NOMINAL_RPS = 20.0
START_LATENCY_S = 5.11
N_REQUESTS = 8000
THINK = {"fixed": {"dist": "fixed", "value": "11.6s"}, "exponential": {"dist": "exponential", "mean": "11.6s"}}

_STEPS: list[tuple[float, int]] = []
"""(start time, appends) of each mixed step planned in the run."""
_plan = decode_append.AppendDecodeInstance._plan


def _recording_plan(self: decode_append.AppendDecodeInstance, admitted: list[int]) -> None:
    _plan(self, admitted)
    if self.plan:
        _STEPS.append((self.t, len(self.plan)))


def scenario(think: str) -> Any:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc.pop("search", None)
    doc["cache"]["turn_placement"] = {"policy": "ppd"}
    doc["workload"] = {
        "sessions": {
            "turns": {"dist": "fixed", "value": 157},
            "new_tokens": {"dist": "fixed", "value": 253},
            "output_tokens": {"dist": "fixed", "value": 176},
            "think_time": THINK[think],
            "system_prompt_tokens": 0,
        }
    }
    return scenario_from_dict(doc, source=str(EXAMPLE), base_dir=EXAMPLE.parent)


def closed_form(sc: Any, rate: float) -> dict[str, float]:
    """The closed form's rows at ``rate`` and its shared-step figures."""
    res = resolve(sc, open_catalog())
    model = build_model(with_cache_rate(res, rate))
    snap = model.snapshot(np.array([rate]))
    report = ppd_report(res, model)
    p = placement_of(model)
    assert isinstance(model, DisaggregatedModel)
    assert report is not None
    assert p is not None
    lam = rate * p.share_on_decode / model.y
    tau = float(decode_fixed_point(np.array([rate / model.y]), model.cells, model.decode.step).tau_mean_s[0])
    q = -math.expm1(-lam * tau)
    plain = tau * (1.0 - p.rho_append)
    mixed = plain + p.rho_append * tau / q
    pi_m = q * mixed / tau
    tpot = snap.tpot_summary(90)[0]
    noise = model.append_noise
    steps = float(model.cells.prob @ model.cells.decode_steps)
    extra = 0.0 if noise is None else float(noise.var_s2(np.array([rate]), np.array([tau]), np.array([steps]))[0, 0])
    return {
        "tpot_mean": tpot.mean,
        "tpot_p90": tpot.at_percentile,
        "ttft_p90": float(snap.ttft_at_percentile_s(90)[0]),
        "ttft_t1": report.ttft_turn1_p90_s,
        "ttft_t2": report.ttft_turn2_p90_s,
        "ttft_p99": float(snap.ttft_at_percentile_s(99)[0]),
        "shared": 1.0 - ((1 - pi_m) * math.exp(-lam * plain) + pi_m * math.exp(-lam * mixed)),
        "others": lam * ((1 - pi_m) * plain + pi_m * mixed),
        "tpot_sd_appends": math.sqrt(extra),
    }


def simulated(sc: Any, requests: int, own: bool) -> tuple[float, dict[str, float], np.ndarray]:
    """(offered rate, the simulator's rows, appends per mixed step) of one run (module docstring)."""
    model = build_model(resolve(sc, open_catalog()))
    inputs = reuse_inputs(model, NOMINAL_RPS)
    decode_append.AppendDecodeInstance._plan = _recording_plan  # type: ignore[method-assign]
    _STEPS.clear()
    run = simulate_reuse(
        model, sc.workload, inputs.layout, rate_rps=NOMINAL_RPS, routing=inputs.routing,
        exposed_load_s=inputs.exposed_load_s, n_requests=requests, seed=0, warmup_fraction=WARMUP_FRACTION,
        placement=inputs.placement, turn_latency_s=None if own else START_LATENCY_S,
    )  # fmt: skip
    warm = run.run.warmup_count
    ttft, tpot, turn = run.ttft_s[warm:], run.run.tpot_s[warm:], run.turn[warm:]
    tpot = tpot[~np.isnan(tpot)]
    first = turn == turn.min()
    low, high = run.run.window_s
    counts = np.array([k for t, k in _STEPS if low <= t <= high], dtype=np.float64)  # the counted window's steps
    rows = {
        "tpot_mean": float(tpot.mean()),
        "tpot_p90": float(np.percentile(tpot, 90)),
        "ttft_p90": float(np.percentile(ttft, 90)),
        "ttft_t1": float(np.percentile(ttft[first], 90)),
        "ttft_t2": float(np.percentile(ttft[~first], 90)),
        "ttft_p99": float(np.percentile(ttft, 99)),
        "shared": float((counts * (counts > 1)).sum() / counts.sum()),
        "others": float((counts * (counts - 1)).sum() / counts.sum()),
        "tpot_sd": float(tpot.std()),
    }
    return run.offered_rps, rows, counts


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--think", default="exponential", choices=tuple(THINK))
    parser.add_argument("--requests", type=int, default=N_REQUESTS)
    parser.add_argument("--own", action="store_true", help="search the own-latency start (turn_latency_s=None)")
    args = parser.parse_args(argv)
    start = time.process_time()
    sc = scenario(args.think)
    offered, sim, counts = simulated(sc, args.requests, args.own)
    closed = closed_form(sc, offered)
    print(f"{args.think} think, nominal {NOMINAL_RPS:g} req/s, offered {offered:.4g} req/s, {args.requests} requests")
    print("\n| figure | closed form | simulator | error |\n|---|---:|---:|---:|")
    for key, label, scale in (
        ("tpot_mean", "TPOT mean (ms)", 1e3), ("tpot_p90", "TPOT P90 (ms)", 1e3), ("ttft_p90", "TTFT P90 (s)", 1.0),
        ("ttft_t1", "TTFT P90 Turn 1 (s)", 1.0), ("ttft_t2", "TTFT P90 Turn 2+ (s)", 1.0),
        ("ttft_p99", "TTFT P99 (s)", 1.0), ("shared", "appends sharing their step", 1.0),
        ("others", "other appends in an append's step", 1.0),
    ):  # fmt: skip
        c, s = closed[key], sim[key]
        print(f"| {label} | {c * scale:.4g} | {s * scale:.4g} | {c / s - 1:+.1%} |")
    values, n = np.unique(counts, return_counts=True)
    share = ", ".join(f"{int(v)}: {k / counts.size:.1%}" for v, k in zip(values, n, strict=True))
    print(f"\nmixed steps by appends carried: {share}")
    print(
        f"per-request TPOT sd: simulator {sim['tpot_sd'] * 1e3:.2f} ms; closed form's added sd from the appends "
        f"{closed['tpot_sd_appends'] * 1e3:.2f} ms"
    )
    print(f"CPU time: {time.process_time() - start:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
