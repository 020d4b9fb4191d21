"""pdplan's colocated model against MLPerf Inference Server results: the held-out open-loop check (issue #23 item 4).

MLPerf's Server scenario issues Poisson arrivals at a submitter-chosen rate and is VALID when the P99 TTFT and the
P99 TPOT are each within their limit; the highest such rate is pdplan's goodput at percentile 99
(``benchmarks/data/mlperf_server.yaml`` explains the mapping and cites every number). For each published system this
script builds the same deployment as a pdplan scenario (colocated, the submission's GPUs, TP per engine instance,
batch cap, FP8 weights and KV, engine ``trtllm``, the ``chunked`` scheduler at the engine's 4,096-token step budget:
TensorRT-LLM's in-flight batching puts whole prompts of at most 1,023 tokens beside the decode tokens of one step,
which is the chunked model with every prompt in one chunk), the dataset's length histograms, and compares

* pdplan's closed-form goodput with the published rate (``result_scheduled_samples_per_sec``, the realised Poisson
  rate of the valid run), both per GPU, and the simulator's goodput (``pdplan simulate --goodput``);
* at the published rate, pdplan's TTFT and TPOT (closed form; the simulator where the closed form admits the rate)
  with the run's own P99 and mean figures;
* pdplan's step price at the occupancy the run measured. By Little's law a run holds ``N = λ_i W̄`` requests per
  instance (``λ_i`` the published rate per instance, ``W̄`` the run's mean latency); in pdplan's colocated mean field
  (pdplan/queueing/chunk_window.py, module docstring) a plain step with N decoding requests costs
  ``τ_p = t0 + t1 N + t2 K`` (``K = N E[nL + n(n−1)/2]/E[n]``, the KV context of the running requests), the prefill
  work takes the share ``u_p`` (linear in the rate) of the time, so the mean step is ``τ̄ = τ_p/(1 − u_p)``, which is
  the mean TPOT. Priced at the measured N this checks the step model apart from the occupancy it predicts. The
  occupancy feeds back (``N = λ_i E[n] τ̄``): with ``g = λ_i E[n] (t1 + t2 K/N)/(1 − u_p)`` a relative step error e
  becomes about ``e/(1 − g)`` in the closed form's own fixed point (our arithmetic);
* the closed form against the simulator on the same deployments at fractions of the closed form's stable limit
  (where the two part, apart from the measurements).

Nothing is fitted to these results. Output lengths are an assumption (the data file's ``output_law``): the reference
histogram stretched to each run's published mean. Run: ``python benchmarks/mlperf_server.py`` (about 25 s on one
core); it rewrites its section of docs/accuracy.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from doc_block import write_block
from scipy.optimize import brentq

from pdplan.errors import NoFeasiblePlanError
from pdplan.evaluation import evaluate
from pdplan.evaluation.evaluate import Evaluation
from pdplan.io.catalog import open_catalog
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.resolve import resolve
from pdplan.sim.compare import simulate_scenario
from pdplan.specs.scenario import Scenario

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data" / "mlperf_server.yaml"
DOC = REPO / "docs" / "accuracy.md"
SECTION = "mlperf-server"
SIM_REQUESTS = 20_000
"""Requests per simulation at the published rate (seed 0, the simulator's 10 % warm-up)."""
SIM_GOODPUT_REQUESTS = 6_000
"""Requests per rate of the simulated goodput bisection (as tests/reference/test_colocated_vs_sim.py)."""
LOAD_FRACTIONS = (0.5, 0.7, 0.85, 0.95, 0.999)
"""Fractions of the closed form's stable limit at which it is set beside the simulator (the last just inside it)."""


def load_data(path: Path = DATA) -> dict[str, Any]:
    """The published figures and the dataset's length histograms (the data file, with its sources)."""
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def output_histogram(bins: list[float], counts: list[float], mean_tokens: float, cap: float) -> list[float]:
    """Weights over ``bins`` of the reference output law stretched by the factor s whose capped histogram has mean
    ``mean_tokens``: ``F_s(x) = F_ref(x/s)`` (F_ref piecewise linear, uniform within the reference bins), mass above
    ``cap`` (the engine's output cap, the last edge) kept in the last bin. s solves mean(s) = mean_tokens by brentq;
    mean(s) increases with s (the law moves right), from below the reference mean at s = 1 (the target is above it)."""
    edges = np.asarray(bins, dtype=float)
    cum = np.concatenate([[0.0], np.cumsum(counts)]) / float(np.sum(counts))
    mids = (edges[:-1] + edges[1:]) / 2.0
    if edges[-1] != cap:
        raise ValueError(f"the last edge {edges[-1]} must be the output cap {cap}")

    def weights(s: float) -> np.ndarray:
        f = np.interp(edges / s, edges, cum)
        f[-1] = 1.0  # the mass stretched past the cap: truncated by the engine, counted in the last bin
        return np.diff(f)

    s = brentq(lambda s: float(weights(s) @ mids) - mean_tokens, 1.0, 4.0, xtol=1e-12)
    return [float(w) for w in weights(s)]


def scenario(system: dict[str, Any], data: dict[str, Any]) -> Scenario:
    """The published deployment as a pdplan scenario (module docstring)."""
    ds, slo = data["dataset"], data["slo"]
    output = output_histogram(
        ds["reference_output_bins"],
        ds["reference_output_counts"],
        system["generated_tokens_per_sample"],
        ds["max_output_tokens"],
    )
    return Scenario.model_validate(
        {
            "name": f"mlperf-v4.1-{system['name']}",
            "model": "llama-2-70b",
            "mode": "colocated",
            "colocated": {
                "gpu": system["gpu"],
                "tp": system["tp"],
                "count": system["instances"],
                "scheduler": "chunked",
                "chunk_tokens": system["max_num_tokens"],
            },
            "workload": {
                "name": "mlperf-openorca",
                "input_tokens": {"dist": "histogram", "bins": ds["input_bins"], "weights": ds["input_counts"]},
                "output_tokens": {"dist": "histogram", "bins": ds["reference_output_bins"], "weights": output},
            },
            # attainment 0.98: the two P99 terms bind first (data file); MLPerf reads each percentile on its own
            "slo": {"ttft": slo["ttft_s"], "tpot": slo["tpot_s"], "percentile": slo["percentile"], "attainment": 0.98},
            "dtype": system["dtype"],
            "kv_dtype": system["kv_dtype"],
            "max_num_seqs": system["max_num_seqs"],
            "engine": "trtllm",
        }
    )


@dataclass(frozen=True)
class Row:
    """One published system beside pdplan's figures for the same deployment."""

    system: dict[str, Any]
    scenario: Scenario
    goodput: Evaluation
    at_rate: Evaluation | None
    """The closed form at the published rate; None where that rate is beyond its stable limit."""
    sim_at_rate: dict[str, Any] | None
    sim_goodput_rps: float | None
    at_goodput: Evaluation | None = None
    """Where the published rate is beyond the stable limit: the closed form at its own goodput (what it prices
    nearest the published rate, against MLPerf's P99 limits)."""

    @property
    def published_rps(self) -> float:
        return float(self.system["scheduled_qps"])

    @property
    def goodput_error(self) -> float:
        """pdplan's closed-form goodput / published rate − 1 (per GPU alike: the same GPUs)."""
        return self.goodput.goodput_rps / self.published_rps - 1.0

    def step_check(self) -> StepCheck:
        """pdplan's mean step at the occupancy the run measured (module docstring, third bullet)."""
        s, ev = self.system, self.goodput
        a = ev.assumptions
        lam = self.published_rps / s["instances"]
        seqs = lam * float(s["latency_mean_s"])
        n1, n2 = _moments(self.scenario.workload.output_tokens)
        mean_input, _ = _moments(self.scenario.workload.input_tokens)
        context = (n1 * mean_input + (n2 - n1) / 2.0) / n1
        u_p = ev.utilisation_at_goodput["prefill"] * self.published_rps / ev.goodput_rps
        plain = a.decode_step_t0_s + (a.decode_step_t1_s_per_seq + a.decode_step_t2_s_per_token * context) * seqs
        gain = lam * n1 * (a.decode_step_t1_s_per_seq + a.decode_step_t2_s_per_token * context) / (1.0 - u_p)
        return StepCheck(seqs, context, plain / (1.0 - u_p), float(s["tpot_mean_s"]), gain)


@dataclass(frozen=True)
class StepCheck:
    """Little's law occupancy of the published run and pdplan's mean step priced there."""

    seqs: float
    """Requests in flight per instance: per-instance rate x the run's mean latency."""
    context_tokens: float
    """Mean KV tokens of a decoding request, E[nL + n(n-1)/2]/E[n] (pdplan/queueing/chunk_window.py)."""
    step_s: float
    """pdplan's mean step at that occupancy, (t0 + t1 N + t2 K)/(1 - u_p)."""
    measured_tpot_s: float
    gain: float
    """d(step)/d(N) x lambda E[n]: the feedback of the occupancy on itself; 1/(1 - gain) amplifies a step error."""

    @property
    def error(self) -> float:
        return self.step_s / self.measured_tpot_s - 1.0


def _moments(law: Any) -> tuple[float, float]:
    """(E[x], E[x^2]) of a histogram law, uniform within its bins."""
    e = np.asarray(law.bins, dtype=float)
    p = np.asarray(law.weights, dtype=float)
    p = p / p.sum()
    lo, hi = e[:-1], e[1:]
    return float(p @ ((lo + hi) / 2.0)), float(p @ ((lo * lo + lo * hi + hi * hi) / 3.0))


def compare(system: dict[str, Any], data: dict[str, Any], *, simulate: bool = True) -> Row:
    """Closed form (goodput, and latencies at the published rate), and with ``simulate`` the simulator."""
    sc = scenario(system, data)
    good = evaluate(sc)
    rate = float(system["scheduled_qps"])
    try:
        at_rate: Evaluation | None = evaluate(sc, rate=rate)
    except NoFeasiblePlanError:
        at_rate = None
    sim_at, sim_good = None, None
    if simulate:
        if at_rate is not None:  # simulate_scenario prices the closed form at the rate first
            point = simulate_scenario(sc, rate=rate, n_requests=SIM_REQUESTS).simulated
            sim_at = None if point is None else point.as_dict()
        sim_good = simulate_scenario(sc, goodput=True, n_requests=SIM_GOODPUT_REQUESTS).goodput_simulated_rps
    # the goodput is the stable limit itself where every SLO holds up to it, and the limit is never admitted
    at_good = min(good.goodput_rps, good.stability_limit_rps * (1.0 - 1e-9))
    at_goodput = evaluate(sc, rate=at_good) if at_rate is None else None
    return Row(system, sc, good, at_rate, sim_at, sim_good, at_goodput)


@dataclass(frozen=True)
class SweepPoint:
    """The closed form and the simulator at one rate, with the closed form's chunk queue there."""

    rate_rps: float
    closed: dict[str, Any]
    simulated: dict[str, Any]
    arrivals_per_plain_step: float
    """λ_i τ_p: prompts arriving per instance during one plain step."""
    rho_fluid: float
    rho: float
    """Chunk-queue utilisation without and with the drain waste (pdplan/queueing/chunk_window.py)."""


def load_sweep(system: dict[str, Any], data: dict[str, Any]) -> list[SweepPoint]:
    """:class:`SweepPoint` at :data:`LOAD_FRACTIONS` of the closed form's stable limit, same deployment."""
    sc = scenario(system, data)
    limit = evaluate(sc).stability_limit_rps
    model = build_model(resolve(sc, open_catalog()))
    assert isinstance(model, ColocatedModel)
    out = []
    for fraction in LOAD_FRACTIONS:
        rate = fraction * limit
        cmp = simulate_scenario(sc, rate=rate, n_requests=SIM_REQUESTS // 2)
        assert cmp.simulated is not None
        lam = np.array([rate / system["instances"]])
        q = model.chunk_queue_at(lam)
        tau_p = float(q.tau_plain_s[0])
        out.append(SweepPoint(rate, cmp.closed_form, cmp.simulated.as_dict(), float(lam[0]) * tau_p, *_rhos(q)))
    return out


def _rhos(q: Any) -> tuple[float, float]:
    return float(q.rho_fluid[0]), float(q.rho[0])


def sweep_lines(system: dict[str, Any], sweep: list[SweepPoint]) -> list[str]:
    lines = []
    for fraction, pt in zip(LOAD_FRACTIONS, sweep, strict=True):
        ct, st = pt.closed["ttft_s"], pt.simulated["ttft_s"]
        cp, sp = pt.closed["tpot_s"], pt.simulated["tpot_s"]
        lines.append(
            f"| {system['name']} | {fraction:.3g} | {pt.rate_rps:.1f} | {ct['p99']:.3f} / {st['p99']:.3f} "
            f"({_pct(ct['p99'] / st['p99'] - 1)}) | {1000 * cp['mean']:.0f} / {1000 * sp['mean']:.0f} "
            f"({_pct(cp['mean'] / sp['mean'] - 1)}) | {pt.arrivals_per_plain_step:.2f} | "
            f"{pt.rho_fluid:.2f} / {pt.rho:.2f} |"
        )
    return lines


def _pct(x: float) -> str:
    return f"{100.0 * x:+.1f} %"


def goodput_line(r: Row) -> str:
    s, ev = r.system, r.goodput
    n = s["gpus"]
    sim = (
        "—"
        if r.sim_goodput_rps is None
        else f"{r.sim_goodput_rps / n:.2f} ({_pct(r.sim_goodput_rps / r.published_rps - 1)})"
    )
    return (
        f"| {s['name']} | {n}× {s['gpu']}, {s['instances']}× TP{s['tp']}, batch {s['max_num_seqs']} | "
        f"{r.published_rps / n:.2f} | {ev.goodput_rps / n:.2f} | {_pct(r.goodput_error)} | "
        f"{ev.binding_constraint} | {sim} |"
    )


def latency_line(r: Row) -> str:
    s = r.system
    ms = 1000.0
    measured = (
        f"{s['ttft_p99_s']:.3f} / {s['ttft_mean_s']:.3f} | {s['tpot_p99_s'] * ms:.0f} / {s['tpot_mean_s'] * ms:.0f}"
    )
    if r.at_rate is None or r.at_rate.operating_point is None:
        g = r.goodput
        closed = f"beyond the closed form's stable limit ({g.stability_limit_rps:.1f} req/s, {g.stability_binding}) | —"
    else:
        op = r.at_rate.operating_point
        closed = f"{op.ttft_s.p99:.3f} / {op.ttft_s.mean:.3f} | {op.tpot_s.p99 * ms:.0f} / {op.tpot_s.mean * ms:.0f}"
    if r.sim_at_rate is None:
        sim = "— | —"
    else:
        t, p = r.sim_at_rate["ttft_s"], r.sim_at_rate["tpot_s"]
        sim = f"{t['p99']:.3f} / {t['mean']:.3f} | {p['p99'] * ms:.0f} / {p['mean'] * ms:.0f}"
    line = f"| {s['name']} | {r.published_rps:.2f} | {measured} | {closed} | {sim} |"
    if r.at_goodput is None or r.at_goodput.operating_point is None:
        return line
    op = r.at_goodput.operating_point
    own = f"{op.ttft_s.p99:.3f} / {op.ttft_s.mean:.3f} | {op.tpot_s.p99 * ms:.0f} / {op.tpot_s.mean * ms:.0f}"
    return f"{line}\n| {s['name']} at pdplan's goodput | {r.goodput.goodput_rps:.2f} | — | — | {own} | — | — |"


def step_line(r: Row) -> str:
    c = r.step_check()
    return (
        f"| {r.system['name']} | {c.seqs:.0f} | {c.context_tokens:.0f} | {1000 * c.step_s:.1f} | "
        f"{1000 * c.measured_tpot_s:.1f} | {_pct(c.error)} | {c.gain:.2f} | {1 / (1 - c.gain):.1f} |"
    )


LATENCY_HEADER = (
    "| system | rate (req/s) | measured TTFT | measured TPOT | closed-form TTFT | closed-form TPOT | simulated TTFT "
    "| simulated TPOT |\n|---|---|---|---|---|---|---|---|"
)
STEP_HEADER = (
    "| system | in flight per instance | context (tokens) | pdplan step (ms) | measured mean TPOT (ms) | step error "
    "| gain | 1/(1 − gain) |\n|---|---|---|---|---|---|---|---|"
)


SWEEP_HEADER = (
    "| system | fraction of the limit | rate (req/s) | TTFT P99, closed / simulated (s) | TPOT mean, closed / "
    "simulated (ms) | prompts per plain step | chunk-queue ρ, fluid / drain-corrected |\n|---|---|---|---|---|---|---|"
)


def render(rows: list[Row], sweeps: list[str], seconds: float) -> str:
    """The generated tables (between this section's markers in docs/accuracy.md)."""
    commit = load_data()["results"]["commit"]
    goods = "\n".join(goodput_line(r) for r in rows)
    lats = "\n".join(latency_line(r) for r in rows)
    steps = "\n".join(step_line(r) for r in rows)
    return f"""Generated by `python benchmarks/mlperf_server.py` from `benchmarks/data/mlperf_server.yaml`
(MLPerf Inference v4.1, closed division, NVIDIA, Llama-2-70B `llama2-70b-99`, Server;
mlcommons/inference_results_v4.1 at
`{commit[:12]}`, Apache-2.0) in {seconds:.0f} s. Rates per GPU; errors are pdplan / published − 1.

| system | deployment | published (req/s per GPU) | pdplan closed form | error | binding | pdplan simulator (error) |
|---|---|---|---|---|---|---|
{goods}

At the published rate (TTFT in s, TPOT in ms; P99 / mean; simulator: {SIM_REQUESTS:,} requests, seed 0):

{LATENCY_HEADER}
{lats}

pdplan's step price at the occupancy the run measured: requests in flight per instance by Little's law (published
rate per instance x the run's mean latency), the mean KV context of a decoding request, and pdplan's mean step
`(t0 + t1 N + t2 K)/(1 − u_p)` there (its colocated mean field, pdplan/queueing/chunk_window.py), against the measured
mean TPOT. `gain` is how much one more second of step adds to itself through the occupancy (`λ E[n] dτ/dN`); the
closed form's mean TPOT at the published rate is this step's error amplified by about `1/(1 − gain)`:

{STEP_HEADER}
{steps}

The closed form against pdplan's own simulator on the same deployments, from half the closed form's stable limit to
just inside it ({SIM_REQUESTS // 2:,} requests per point, seed 0), with the closed form's chunk queue at each rate:
prompts arriving per instance during one plain step (`λ τ_p`) and the queue's utilisation without and with the drain
waste (pdplan/queueing/chunk_window.py, `ρ_f` and `ρ = (ρ_f + κ)/(1 + κ)`):

{SWEEP_HEADER}
{chr(10).join(sweeps)}
"""


def write_section(text: str, section: str = SECTION) -> None:
    """Replace the block between this section's markers in docs/accuracy.md (the markers must be there)."""
    write_block(DOC, section, text)


def main() -> None:
    start = time.perf_counter()
    data = load_data()
    rows = [compare(system, data) for system in data["systems"]]
    sweeps = [line for system in data["systems"] for line in sweep_lines(system, load_sweep(system, data))]
    text = render(rows, sweeps, time.perf_counter() - start)
    print(text)
    write_section(text)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
