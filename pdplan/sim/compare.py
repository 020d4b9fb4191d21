"""``simulate_scenario``: the closed form of ``evaluate`` side by side with a discrete-event run.

The scenario is resolved and built once (:func:`pdplan.serving.build_model`); the closed form is
:func:`pdplan.evaluation.evaluate` at the same rate or concurrency; the simulation replays the same
deployment request by request (:mod:`pdplan.sim.deployment`) with ``n_requests`` sampled
lengths (:func:`pdplan.workload.bins.sample`) and the workload's arrivals (open loop, ``rate``:
:mod:`pdplan.sim.arrival_times`) or C clients
(closed loop, ``concurrency``). The first ``WARMUP_FRACTION`` of requests is discarded.

Seeds: lengths, arrival gaps and routing draws come from three generators derived from ``seed``
(``default_rng([seed, k])``), so runs are deterministic, and every rate of the goodput search sees
the same requests and the same unit-exponential gaps scaled by 1/λ (common random numbers: the
simulated attainment is then almost monotone in λ, which bisection needs).

A KV-reuse workload (sessions, shared prefixes, a Mooncake trace: :func:`pdplan.serving.cache_setup.reuses_kv`) is
simulated with its prefix caches instead (:func:`pdplan.sim.reuse.simulate_reuse`, the deployment's resolved cache
read by :mod:`pdplan.sim.reuse_setup`, open loop at a rate); its cache figures and the closed form's are the
document's ``cache`` block.

Simulated goodput (``goodput=True``): bisection on λ for ``A_sim(λ) = α*`` (same SLO), bracketed
around the closed-form goodput, to ``GOODPUT_REL_TOL``. Relative errors are ``closed/sim − 1``.

Simulated utilisations: prefill = busy fraction of the prefill pool; decode = ``1 − t0/τ_tok``
with τ_tok the token-weighted mean decode interval (Σ(finish − first token)/Σ(output − 1)), the
same definition as the closed form's u = 1 − t0/τ̄; ``decode_mean_seqs`` = time-averaged
sequences in a decode (or colocated) batch per instance.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdplan.errors import SpecError
from pdplan.evaluation.evaluate import evaluate
from pdplan.evaluation.record import Evaluation
from pdplan.io.catalog import Catalog, open_catalog
from pdplan.queueing import decode_fixed_point
from pdplan.serving.build import build_model, model_at_rate
from pdplan.serving.cache_setup import reuses_kv
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.decode_lines import line_count
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve
from pdplan.serving.snapshot import LatencySummary
from pdplan.sim import SimResult, simulate, simulate_closed_loop
from pdplan.sim.arrival_times import arrival_name, arrival_times_s
from pdplan.sim.deployment import STEP_MODELS, SimSetup, StepModel, sim_deployment
from pdplan.sim.reuse import ReuseResult
from pdplan.sim.reuse_setup import ReuseInputs, reuse_inputs
from pdplan.sim.trace_replay import native_rate_rps, replays_trace, scaled_arrivals_s, trace_requests
from pdplan.specs.arguments import check_count, check_positive, check_scenario
from pdplan.specs.arrivals import ArrivalProcess, PoissonArrival
from pdplan.specs.ceilings import MAX_CONCURRENCY, MAX_REQUESTS
from pdplan.specs.scenario import Scenario, SloSpec
from pdplan.specs.workload import WorkloadSpec
from pdplan.types import FloatArray, Int64Array
from pdplan.workload.bins import sample

DEFAULT_REQUESTS = 20_000
"""Requests per simulation: ~1 s per run on one core for the chat workload (P99 noise ≈ 3 %)."""
WARMUP_FRACTION = 0.1
GOODPUT_REL_TOL = 0.01
_MAX_BISECTIONS = 12


@dataclass(frozen=True, slots=True)
class SimulatedPoint:
    """Simulated latencies, attainment and utilisations at one rate (or concurrency)."""

    rate_rps: float
    ttft_s: LatencySummary
    tpot_s: LatencySummary
    attainment: float
    utilisation: dict[str, float]
    throughput_rps: float
    requests: int
    ttft_decode_side_s: float = math.nan
    """Mean time from the end of the prefill to token 1 (the decode side of :class:`pdplan.serving.ttft.TtftParts`;
    NaN where the deployment records no prefill end: colocated)."""

    @property
    def ttft_prefill_side_s(self) -> float:
        """Mean time from arrival to the end of the prefill (engine overhead included, as the closed form)."""
        return self.ttft_s.mean - self.ttft_decode_side_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "rate_rps": self.rate_rps,
            "ttft_s": self.ttft_s.as_dict(),
            "tpot_s": self.tpot_s.as_dict(),
            "attainment": self.attainment,
            "utilisation": self.utilisation,
            "throughput_rps": self.throughput_rps,
            "requests": self.requests,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Closed form vs simulation for one scenario (``to_document`` is the JSON contract)."""

    evaluation: Evaluation
    closed_form: dict[str, Any]
    simulated: SimulatedPoint | None
    goodput_closed_rps: float
    goodput_simulated_rps: float | None
    settings: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    reuse: dict[str, Any] | None = None
    """A KV-reuse workload's simulated cache figures (:meth:`pdplan.sim.reuse.ReuseResult.as_dict`); None otherwise.
    The document's ``cache`` block holds them beside the closed form's (``evaluate``'s ``cache``)."""

    def relative_error(self) -> dict[str, Any]:
        """``closed/sim − 1`` for every latency statistic, attainment, utilisation, goodput."""
        out: dict[str, Any] = {}
        if self.simulated is not None:
            sim = self.simulated.as_dict()
            for key in ("ttft_s", "tpot_s", "utilisation"):
                out[key] = {k: _rel(v, sim[key][k]) for k, v in self.closed_form[key].items() if k in sim[key]}
            out["attainment"] = _rel(self.closed_form["attainment"], sim["attainment"])
        if self.goodput_simulated_rps is not None:
            out["goodput_rps"] = _rel(self.goodput_closed_rps, self.goodput_simulated_rps)
        return out

    def to_document(self) -> dict[str, Any]:
        ev = self.evaluation
        doc: dict[str, Any] = {
            "name": ev.name,
            "mode": ev.mode,
            "model": ev.model,
            **ev.deployment,
            "num_gpus": ev.num_gpus,
            "slo": ev.slo,
            "convention": ev.convention,
            "simulation": self.settings,
        }
        if self.simulated is not None:
            doc.update({k: v for k, v in self.simulated.as_dict().items() if k != "requests"})
        doc["goodput_rps"] = self.goodput_closed_rps
        doc["goodput_simulated_rps"] = self.goodput_simulated_rps
        doc["closed_form"] = {**self.closed_form, "goodput_rps": self.goodput_closed_rps}
        doc["simulated"] = {
            **(self.simulated.as_dict() if self.simulated else {}),
            "goodput_rps": self.goodput_simulated_rps,
        }
        doc["relative_error"] = self.relative_error()
        if self.reuse is not None:
            cache = ev.cache
            closed = None if cache is None else cache.to_document(self.goodput_closed_rps)
            doc["cache"] = {"closed_form": closed, "simulated": self.reuse}
        doc["seconds"] = self.seconds
        doc["warnings"] = list(ev.warnings)
        return doc


def _rel(closed: float, sim: float) -> float | None:
    if not (math.isfinite(closed) and math.isfinite(sim)) or sim == 0.0:
        return None
    return closed / sim - 1.0


def _summary(values: np.ndarray[Any, Any], percentile: float, none: float = math.nan) -> LatencySummary:
    """Mean and percentiles of the defined (non-NaN) values; all ``none`` when there are none (TPOT
    with every output one token: 0, the closed form's convention, :func:`pdplan.serving.colocated.no_tpot`)."""
    v = values[~np.isnan(values)]
    if v.size == 0:
        return LatencySummary(none, none, none, none, none)
    q = np.percentile(v, [50.0, 90.0, 99.0, percentile])
    return LatencySummary(float(v.mean()), float(q[0]), float(q[1]), float(q[2]), float(q[3]))


def _utilisation(run: SimResult, t0_s: float) -> dict[str, float]:
    """Busy fraction of the prefill pool, decode u = 1 − t0/τ_tok, mean decode batch."""
    out: dict[str, float] = {}
    keep = run.counted & (run.output_tokens > 1)
    steps = float((run.output_tokens[keep] - 1).sum())
    names = {p.name for p in run.pools}
    if "prefill" in names:
        out["prefill"] = run.pool("prefill").utilisation
    if steps > 0 and "decode" in names:
        tau = float(np.nansum(run.finish_s[keep] - run.first_token_s[keep])) / steps
        out["decode"] = 1.0 - t0_s / tau
    pool = run.pool("decode" if "decode" in names else "colocated")
    out["decode_mean_seqs"] = pool.mean_active
    return out


@dataclass(frozen=True, slots=True)
class _Runner:
    """Seeded simulations of one setup at any rate (common random numbers across rates)."""

    setup: SimSetup
    seed: int
    slo: SloSpec
    trace_arrival_s: FloatArray | None = None
    """``arrival: trace``: the recorded arrivals, time-scaled to each rate (:mod:`pdplan.sim.trace_replay`)."""
    arrival: ArrivalProcess = field(default_factory=PoissonArrival)
    """The workload's arrival process otherwise (:mod:`pdplan.sim.arrival_times`)."""

    def run(self, rate: float | None, concurrency: int | None = None) -> SimResult:
        dep, req = self.setup.deployment, self.setup.requests
        route = np.random.default_rng([self.seed, 2])
        if concurrency is not None:
            return simulate_closed_loop(concurrency, req, dep, route, warmup_fraction=WARMUP_FRACTION)
        assert rate is not None
        if self.trace_arrival_s is not None:
            arrivals = scaled_arrivals_s(self.trace_arrival_s, rate)
        else:
            arrivals = arrival_times_s(self.arrival, rate, req.count, np.random.default_rng([self.seed, 1]))
        return simulate(arrivals, req, dep, route, warmup_fraction=WARMUP_FRACTION)

    def point(self, rate: float | None, concurrency: int | None = None) -> SimulatedPoint:
        return _point(self.run(rate, concurrency), self.setup.ttft_extra_s, self.setup.t0_s, self.slo, rate)

    def attainment(self, rate: float) -> float:
        run = self.run(rate)
        warm = run.warmup_count
        ttft = run.ttft_s + self.setup.ttft_extra_s
        return _attainment(ttft[warm:], run.tpot_s[warm:], self.slo)


def _point(run: SimResult, ttft_extra_s: FloatArray, t0_s: float, slo: SloSpec, rate: float | None) -> SimulatedPoint:
    """Latency summaries, attainment and utilisations of one run (its first ``warmup_count`` requests left out)."""
    ttft = run.ttft_s + ttft_extra_s
    warm = run.warmup_count
    pct = slo.percentile
    return SimulatedPoint(
        rate_rps=run.throughput_rps if rate is None else rate,
        ttft_s=_summary(ttft[warm:], pct),
        tpot_s=_summary(run.tpot_s[warm:], pct, none=0.0),
        attainment=_attainment(ttft[warm:], run.tpot_s[warm:], slo),
        utilisation=_utilisation(run, t0_s),
        throughput_rps=run.throughput_rps,
        requests=req_count(run),
        ttft_decode_side_s=_decode_side_s(run),
    )


@dataclass(frozen=True, slots=True)
class _ReuseRunner:
    """Seeded reuse simulations of one deployment at any rate (:func:`pdplan.sim.reuse.simulate_reuse`; the same
    sessions or requests at every rate; a colocated instance's HBM cache sized anew at each rate, as its resident KV
    depends on it, :mod:`pdplan.sim.reuse_setup`)."""

    model: DisaggregatedModel | ColocatedModel
    workload: WorkloadSpec
    inputs: ReuseInputs
    seed: int
    slo: SloSpec
    n_requests: int
    step: StepModel
    turn_latency_s: float | None = 0.0
    """The sessions' stationary start (:func:`pdplan.sim.reuse.simulate_reuse`): 0 zero-latency, None measured."""

    def run(self, rate: float) -> ReuseResult:
        inputs = self.inputs if isinstance(self.model, DisaggregatedModel) else reuse_inputs(self.model, rate)
        return inputs.simulate(
            self.model, self.workload, rate_rps=rate, n_requests=self.n_requests, seed=self.seed, step=self.step,
            warmup_fraction=WARMUP_FRACTION, turn_latency_s=self.turn_latency_s,
        )  # fmt: skip

    def point(self, rate: float) -> tuple[SimulatedPoint, ReuseResult]:
        res = self.run(rate)
        return _point(res.run, res.ttft_extra_s, self.model.decode.step.t0_s, self.slo, rate), res

    def attainment(self, rate: float) -> float:
        res = self.run(rate)
        warm = res.run.warmup_count
        return _attainment(res.ttft_s[warm:], res.run.tpot_s[warm:], self.slo)


def _decode_side_s(run: SimResult) -> float:
    """Mean first token − end of prefill over the counted requests (NaN when no prefill end is recorded)."""
    gap = (run.first_token_s - run.prefill_done_s)[run.warmup_count :]
    return float(np.mean(gap)) if gap.size and not bool(np.isnan(gap).any()) else math.nan


def req_count(run: SimResult) -> int:
    """Requests entering the statistics (after warm-up)."""
    return int(run.arrival_s.size - run.warmup_count)


def _attainment(ttft: np.ndarray[Any, Any], tpot: np.ndarray[Any, Any], slo: SloSpec) -> float:
    ok = (ttft <= slo.ttft) & (np.isnan(tpot) | (tpot <= slo.tpot))
    return float(np.mean(ok))


def simulated_goodput(
    attainment: Callable[[float], float], target: float, guess_rps: float, rel_tol: float = GOODPUT_REL_TOL
) -> float:
    """Bisection on λ for ``attainment(λ) = target``, bracketed around ``guess_rps``.

    The bracket widens geometrically (×1.25 up, ÷2 down); 0.0 if the target fails even at
    guess/1000. Returns the midpoint of the final bracket.
    """
    lo, hi = 0.8 * guess_rps, 1.2 * guess_rps
    while attainment(lo) < target:
        hi, lo = lo, lo / 2.0
        if lo < guess_rps * 1e-3:
            return 0.0
    for _ in range(_MAX_BISECTIONS):
        if attainment(hi) < target:
            break
        lo, hi = hi, hi * 1.25
    for _ in range(_MAX_BISECTIONS):
        if hi - lo <= rel_tol * lo:
            break
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if attainment(mid) >= target else (lo, mid)
    return 0.5 * (lo + hi)


def expected_goodput_runs(rel_tol: float = GOODPUT_REL_TOL) -> int:
    """Simulations a goodput search usually takes: two to bracket the rate (0.8 and 1.2 times the closed form's
    goodput), then bisections until the bracket is ``rel_tol`` wide, ``ceil(log2(0.4 / rel_tol))`` (6 at 1 %). More
    when the closed form is far off (the bracket widens first), never more than ``2 + 2·_MAX_BISECTIONS``."""
    return 2 + math.ceil(math.log2(0.4 / rel_tol))


def _counted(
    attainment: Callable[[float], float], tell: Callable[[str], None], n_requests: int
) -> Callable[[float], float]:
    """``attainment`` that tells, before each simulation, which run of the goodput search it is, at what rate, and the
    time left at the mean time per run so far (the progress line of ``pdplan simulate --goodput``)."""
    started, runs = time.perf_counter(), [0]
    expected = expected_goodput_runs()

    def run(rate_rps: float) -> float:
        done = runs[0]
        runs[0] += 1
        eta = ""
        if done:
            per_run_s = (time.perf_counter() - started) / done
            eta = f", about {per_run_s * max(expected - done, 1):.0f} s left"
        tell(
            f"simulated goodput: run {done + 1} (about {expected} in all) of {n_requests:,} requests at "
            f"{rate_rps:.4g} req/s{eta}"
        )
        return attainment(rate_rps)

    return run


def _closed_form(ev: Evaluation, model: DisaggregatedModel | ColocatedModel) -> dict[str, Any]:
    op = ev.operating_point
    assert op is not None
    # the closed form's utilisations, plus the simulator's own key, decode_mean_seqs
    util: dict[str, float] = {str(k): v for k, v in op.utilisation.items()}
    if "prefill_busy" in util:  # batched prefill: compare busy fractions, as the simulator
        util["prefill"] = util.pop("prefill_busy")
    if isinstance(model, DisaggregatedModel):
        fixed = decode_fixed_point([op.rate_rps / model.y], model.cells, model.decode.step)
        util["decode_mean_seqs"] = float(fixed.mean_seqs[0])
    else:  # N = λ_c E[n] τ̄ at the colocated token interval
        lam = op.rate_rps / model.z
        util["decode_mean_seqs"] = lam * model.cells.mean_steps * model.token_interval_s(lam)
    return {
        "rate_rps": op.rate_rps,
        "ttft_s": op.ttft_s.as_dict(),
        "tpot_s": op.tpot_s.as_dict(),
        "attainment": op.attainment,
        "utilisation": util,
    }


def simulate_scenario(
    scenario: Scenario,
    *,
    catalog: Catalog | None = None,
    rate: float | None = None,
    concurrency: int | None = None,
    n_requests: int = DEFAULT_REQUESTS,
    seed: int = 0,
    goodput: bool = False,
    step: StepModel = "linear",
    stage: Callable[[str], None] | None = None,
    turn_latency_s: float | None = 0.0,
) -> Comparison:
    """Closed form and simulation of one deployment at a rate or concurrency (module docstring); ``stage`` hears
    the name of each step as it starts (the CLI's progress line). ``arrival: trace`` replays the trace's requests
    at its recorded arrivals (:mod:`pdplan.sim.trace_replay`; without a rate, at the trace's own rate).
    ``turn_latency_s``: a sessions workload's stationary start (:func:`pdplan.sim.reuse.simulate_reuse`; None: each
    rate's run at its own mean turn latency)."""
    start = time.perf_counter()
    check_scenario(scenario)
    tell = stage or (lambda _name: None)
    replay = replays_trace(scenario.workload)
    if replay and rate is None and concurrency is None:
        rate = native_rate_rps(trace_requests(scenario.workload, None)[2])
    _check_arguments(rate, concurrency, goodput=goodput, step=step, n_requests=n_requests)
    reuse = reuses_kv(scenario)
    reuse_sessions = reuse and scenario.workload.sessions is not None
    if reuse and concurrency is not None:
        raise SpecError("a KV-reuse workload is simulated open loop at a rate; give --rate", field="concurrency")
    cat = catalog or open_catalog()
    tell("closed form")
    res = resolve(scenario, cat)
    model = build_model(res)
    ev = evaluate(scenario, catalog=cat, rate=rate, concurrency=concurrency)
    tell("building the simulated deployment")
    runner: _Runner | _ReuseRunner
    process = scenario.workload.arrival_process()
    if reuse:
        inputs = reuse_inputs(model, rate if rate is not None else max(ev.goodput_rps, 1e-9))
        runner = _ReuseRunner(model, scenario.workload, inputs, seed, scenario.slo, n_requests, step, turn_latency_s)
    else:
        lin, out, arrivals = _requests(scenario, res.model.max_position_embeddings, replay, n_requests, seed)
        n_requests = int(lin.size) if replay else n_requests
        runner = _Runner(sim_deployment(model, lin, out, step), seed, scenario.slo, arrivals, process)
    closed: dict[str, Any] = {}
    point, cache = None, None
    if ev.operating_point is not None:  # on the line of a concave decode law the rate runs on, as evaluate's
        line = model if line_count(res) == 0 else model_at_rate(res, ev.operating_point.rate_rps)
        closed = _closed_form(ev, line)
        tell(f"simulating {n_requests:,} requests")
        if isinstance(runner, _ReuseRunner):
            assert rate is not None
            point, reused = runner.point(rate)
            cache = reused.as_dict()
        else:
            point = runner.point(rate, concurrency)
    sim_good = None
    if goodput:
        sim_good = simulated_goodput(
            _counted(runner.attainment, tell, n_requests), scenario.slo.attainment, max(ev.goodput_rps, 1e-9)
        )
    settings = {
        "rate_rps": rate,
        "arrivals": _arrivals_name(scenario.workload, replay, reuse, process),
        "requests": n_requests,
        "seed": seed,
        "warmup_fraction": WARMUP_FRACTION,
        "step": step,
        "concurrency": concurrency,
        **({"session_start": _session_start(turn_latency_s)} if reuse_sessions else {}),
    }
    return Comparison(ev, closed, point, ev.goodput_rps, sim_good, settings, time.perf_counter() - start, cache)


def _session_start(turn_latency_s: float | None) -> str:
    """How a sessions run placed its sessions in progress at t = 0 (:mod:`pdplan.sim.reuse_sessions`): ``zero``
    (turns taking no time), ``measured`` (the run's own mean turn latency) or the latency given."""
    if turn_latency_s is None:
        return "measured"
    return "zero" if turn_latency_s == 0.0 else f"{turn_latency_s:g} s"


def _arrivals_name(workload: WorkloadSpec, replay: bool, reuse: bool, process: ArrivalProcess) -> str:
    """How the simulation's requests arrive: ``trace``, the process's name (:func:`pdplan.sim.arrival_times.
    arrival_name`), or for reuse ``sessions`` (an open stream of sessions, each turn released by the previous one's
    end) and ``shared-prefix``, with the process in brackets where it is not Poisson."""
    if replay:
        return "trace"
    name = arrival_name(process)
    kind = None
    if reuse:
        kind = "sessions" if workload.sessions is not None else "shared-prefix"
    if kind is None:
        return name
    return kind if isinstance(process, PoissonArrival) else f"{kind} ({name})"


def _check_arguments(rate: float | None, concurrency: int | None, *, goodput: bool, step: str, n_requests: int) -> None:
    """One of rate / concurrency (or the goodput search), a known step model, 100 to MAX_REQUESTS requests."""
    check_positive(rate, "rate")
    check_count(concurrency, "concurrency", ceiling=MAX_CONCURRENCY)
    check_count(n_requests, "requests", ceiling=MAX_REQUESTS, floor=100)
    if (rate is None) == (concurrency is None) and not goodput:
        raise SpecError("give a rate or a concurrency (or --goodput)", field="rate")
    if rate is not None and concurrency is not None:
        raise SpecError("give either a rate or a concurrency, not both", field="rate")
    if step not in STEP_MODELS:
        raise SpecError(f"{step!r} is not one of {', '.join(STEP_MODELS)}", field="step")
    if n_requests < 100:
        raise SpecError(f"must be >= 100, got {n_requests}", field="requests")


def _requests(
    scenario: Scenario, window: int, replay: bool, n_requests: int, seed: int
) -> tuple[Int64Array, Int64Array, FloatArray | None]:
    """(prompt lengths, output lengths, arrival times or None): the trace's requests when it is replayed, else
    ``n_requests`` sampled from the workload (seeded; lengths within the model's context ``window``)."""
    if replay:
        return trace_requests(scenario.workload, window)
    lin, out = sample(scenario.workload, n_requests, np.random.default_rng([seed, 0]), context_window=window)
    return lin, out, None
