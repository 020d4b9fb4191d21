"""PPD on the agent sessions: the closed form against the simulator at the simulator's own offered rate, and the
appends that share a mixed step (issue #24 item 6; docs/prefix_cache.md §11, *Appends that share a step*).

The case: ``examples/agent-dualpath.yaml`` with ``turn_placement: {policy: ppd}`` and its search dropped, the preset's
sessions (157 turns of 253 new and 176 output tokens) with the think time exponential of the preset's 11.6 s mean
(``--think fixed``: the preset's own). The simulator (:func:`pdplan.sim.reuse.simulate_reuse`) runs at the nominal
rate :data:`NOMINAL_RPS` with the sessions' stationary start at :data:`START_LATENCY_S` (the own-latency fixed point
that ``turn_latency_s=None`` finds for this case: D = 0, 4.43, 5.11 s over three runs; ``--own`` runs that search
instead, ~3× the time), 8,000 requests, seed 0; the closed form (its snapshot, the turn placement's report) at the
rate the simulation offered (``ReuseResult.offered_rps``), on the line of the decode step law that rate runs on
(:func:`pdplan.serving.build.model_at_rate`, as ``pdplan evaluate`` prices a rate). DeepSeek-V3's DP8/EP8 decode step
is concave in the batch, the minimum of two lines (:mod:`pdplan.serving.decode_lines`), and the simulator's ``linear``
step is that minimum at each iteration's batch; until 2026-12-07 this script built the closed form with
``build_model``, which without a decode line prices the law's one-line fit (16 % below the law at the batch these
runs hold): TPOT −15 / −17 % (docs/prefix_cache.md §11, *The agent's TPOT gap*). ``--one-line`` prices both sides on
that fit instead (the simulator's plain step replaced by it, :attr:`pdplan.sim.turn_placement.TurnPlacer.plain_step`;
the closed form ``build_model``'s), the control that isolates the step law.

Rows: TPOT mean and P90, TTFT P90 over all turns and Turn 1 / Turn 2+ (the simulator's turn index; Turn 1 is 1/157
of the requests, ~50 in a run: its P90 is noisy), TTFT P99. And the simulator's mixed steps, recorded as they are
planned (:meth:`pdplan.sim.decode_append.AppendDecodeInstance._plan`, wrapped here) in the counted window (the
run's ``window_s``: its tail, past the last counted arrival, runs at a falling load): how many appends each carries,
the share of appends that share their step with another and the mean number of others, against the closed form's
(:meth:`pdplan.serving.ppd_boundary.StepBoundary.carried`: the count Poisson(λ_a·s) over the step in flight s); and
the per-request TPOT's standard deviation against the closed form's added one
(:class:`pdplan.serving.ppd_decode.AppendNoise`). Last, the decode steps of the counted window against the closed
form's fixed point: the mean step (τ'), its part without the appends' work (τ_p = τ'·(1 − ρ_a)), the time-averaged
batch of an instance (E[B] = λE[n]τ'), the appends' share of the time (ρ_a) and their time per append (ρ_a/λ_a: the
closed form's with the appends of different ranks side by side, :mod:`pdplan.serving.ppd_ranks`), and a lone
append's work (the simulator's over the mixed steps that carry one append alone, the closed form's E[w]); the
simulator's per instance (recorded at each boundary, :meth:`pdplan.sim.decode_append.AppendDecodeInstance.fire`,
wrapped here: a mixed step's work beyond the decode step it carries is its appends').

Run: ``python benchmarks/agent_ppd_vs_sim.py [--think exponential|fixed] [--requests N] [--own] [--one-line]``
(one simulation, 1.5–3 min of CPU on this machine; prints Markdown tables).
"""

from __future__ import annotations

import argparse
import dataclasses
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
from pdplan.serving.build import build_model, model_at_rate, with_cache_rate
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.ppd_report import placement_of, ppd_report
from pdplan.serving.resolve import resolve
from pdplan.sim import Disaggregated, decode_append, turn_placement
from pdplan.sim.compare import WARMUP_FRACTION
from pdplan.sim.reuse import simulate_reuse
from pdplan.sim.reuse_setup import reuse_inputs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "agent-dualpath.yaml"
NOMINAL_RPS = 20.0
START_LATENCY_S = 5.11
N_REQUESTS = 8000
THINK = {"fixed": {"dist": "fixed", "value": "11.6s"}, "exponential": {"dist": "exponential", "mean": "11.6s"}}

_STEPS: dict[int, list[tuple[float, float, int, int, int, float]]] = {}
"""Per decode instance, each span between two boundaries it processed: (start, end, batch, steps, appends carried,
the appends' work: the span less the decode step of its batch; 0 for a plain segment)."""
_fire = decode_append.AppendDecodeInstance.fire


def _recording_fire(self: decode_append.AppendDecodeInstance) -> list[int]:
    start, end, batch = self.t, self.next_time, self.act.b
    if self.plan:  # a mixed step: the decode step it carries at the state it was planned on
        _STEPS.setdefault(id(self), []).append((start, end, batch, 1, len(self.plan), end - start - self.step_s()))
    elif batch > 0:
        _STEPS.setdefault(id(self), []).append((start, end, batch, self.next_k + 1, 0, 0.0))
    return _fire(self)


def _one_line_deployment(self: turn_placement.TurnPlacer, dep: Disaggregated) -> Disaggregated:
    """:meth:`~pdplan.sim.turn_placement.TurnPlacer.deployment` with the plain step the one-line fit whatever the
    law (``--one-line``)."""
    decode = dataclasses.replace(dep.decode, step_time_s=self.plain_step)
    return dataclasses.replace(dep, prefill=dataclasses.replace(dep.prefill, start=self.start), decode=decode)


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


def closed_form(sc: Any, rate: float, one_line: bool = False) -> dict[str, float]:
    """The closed form's rows at ``rate`` and its shared-step figures, on the line of the decode step law that rate
    runs on (:func:`~pdplan.serving.build.model_at_rate`, as ``pdplan evaluate`` prices a rate: module docstring)."""
    res = resolve(sc, open_catalog())
    at = with_cache_rate(res, rate)
    model = build_model(at) if one_line else model_at_rate(at, rate)
    snap = model.snapshot(np.array([rate]))
    report = ppd_report(res, model)
    p = placement_of(model)
    assert isinstance(model, DisaggregatedModel)
    assert report is not None
    assert p is not None
    lam = rate * p.share_on_decode / model.y
    fixed = decode_fixed_point(np.array([rate / model.y]), model.cells, model.decode.step)
    tau = float(fixed.tau_mean_s[0])
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
        "step": tau,
        "plain_step": plain,
        "batch": float(fixed.mean_seqs[0]),
        "rho_a": p.rho_append,
        "work": p.rho_append / lam,  # the appends' time per append: on D ranks side by side (pdplan.serving.ppd_ranks)
        "work_alone": p.work_s,
    }


def simulated(
    sc: Any, requests: int, own: bool, one_line: bool = False
) -> tuple[float, dict[str, float], np.ndarray, list[dict[str, float]]]:
    """(offered rate, the simulator's rows, appends per mixed step, each decode instance's steps) of one run
    (module docstring)."""
    model = build_model(resolve(sc, open_catalog()))
    inputs = reuse_inputs(model, NOMINAL_RPS)
    decode_append.AppendDecodeInstance.fire = _recording_fire  # type: ignore[method-assign]
    if one_line:
        turn_placement.TurnPlacer.deployment = _one_line_deployment  # type: ignore[method-assign]
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
    spans = [np.array(v, dtype=np.float64) for v in _STEPS.values()]
    spans = [a[(a[:, 0] >= low) & (a[:, 0] <= high)] for a in spans]  # the counted window's
    counts = np.concatenate([a[a[:, 4] > 0, 4] for a in spans])
    instances = [_instance_steps(a, high - low) for a in spans]
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
    return run.offered_rps, rows, counts, instances


def _instance_steps(spans: np.ndarray, window_s: float) -> dict[str, float]:
    """One instance's steps over the counted window (``spans``: :data:`_STEPS` rows; module docstring)."""
    length = spans[:, 1] - spans[:, 0]
    steps, added = spans[:, 3].sum(), spans[:, 5].sum()
    alone = spans[:, 4] == 1  # the mixed steps that carry one append
    if not alone.any():
        raise SystemExit("a decode instance ran no mixed step of one append in the counted window: run more requests")
    return {
        "step": length.sum() / steps,
        "plain_step": (length.sum() - added) / steps,
        "batch": float((spans[:, 2] * length).sum() / window_s),
        "rho_a": added / window_s,
        "work": added / max(spans[:, 4].sum(), 1.0),
        "work_alone": float(spans[alone, 5].mean()),
        "steps": steps,
        "appends": spans[:, 4].sum(),
        "alone": float(alone.sum()),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--think", default="exponential", choices=tuple(THINK))
    parser.add_argument("--requests", type=int, default=N_REQUESTS)
    parser.add_argument("--own", action="store_true", help="search the own-latency start (turn_latency_s=None)")
    parser.add_argument("--one-line", action="store_true", help="both sides on the decode law's one-line fit")
    args = parser.parse_args(argv)
    start = time.process_time()
    sc = scenario(args.think)
    offered, sim, counts, instances = simulated(sc, args.requests, args.own, args.one_line)
    closed = closed_form(sc, offered, args.one_line)
    step = "the one-line fit" if args.one_line else "the law (closed form on its line at the rate)"
    print(f"{args.think} think, nominal {NOMINAL_RPS:g} req/s, offered {offered:.4g} req/s, {args.requests} requests")
    print(f"decode step: {step}")
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
    _print_steps(closed, instances)
    print(f"CPU time: {time.process_time() - start:.1f} s")


def _print_steps(closed: dict[str, float], instances: list[dict[str, float]]) -> None:
    """The decode steps' table: the closed form's fixed point, the simulator's mean over its instances (time-weighted
    alike: each instance's window is the same), and each instance's."""
    print("\n| decode steps | closed form | simulator, mean | per instance |\n|---|---:|---:|---|")
    for key, label, scale in (
        ("step", "mean step τ' (ms)", 1e3), ("plain_step", "step less the appends' work τ_p (ms)", 1e3),
        ("batch", "batch per instance E[B]", 1.0), ("rho_a", "appends' share of the time ρ_a", 1.0),
        ("work", "time per append ρ_a/λ_a (ms)", 1e3), ("work_alone", "a lone append's work E[w] (ms)", 1e3),
    ):  # fmt: skip
        each = [i[key] * scale for i in instances]
        mean = float(np.mean(each)) if key in ("batch", "rho_a") else _pooled(instances, key) * scale
        print(f"| {label} | {closed[key] * scale:.4g} | {mean:.4g} | {', '.join(f'{v:.4g}' for v in each)} |")


def _pooled(instances: list[dict[str, float]], key: str) -> float:
    """A per-step or per-append mean over every instance: each instance's weighted by its steps or its appends."""
    weights = [i[{"work": "appends", "work_alone": "alone"}.get(key, "steps")] for i in instances]
    return float(np.average([i[key] for i in instances], weights=weights))


if __name__ == "__main__":
    main(sys.argv[1:])
