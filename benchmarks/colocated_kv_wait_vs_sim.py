"""A colocated vLLM instance's KV admission wait past its comfortable limit against the simulator (issue #23 item 5;
docs/queueing.md §2.6, *The colocated wait*).

Cases: the two colocated picks the reference tests use (``tests/reference/test_vllm_recompute_vs_sim.py``: Llama-3.1-70B
on one 2x H100 chunked instance, chat workload, the default example's colocated baseline; and
``tests/reference/test_colocated_kv_knee_vs_sim.py``: the OPT-13B DistServe pick, 1x A100 TP2 chunked, with its
200-token outputs and with 400-token outputs and a 1 s TTFT), under vLLM, at rates between the comfortable limit and
the pinned limit λ_pin. Per rate the closed form's ``(P_w, mean wait P_w·E[W | W > 0])`` of three queues:

* *pinned*: the model's (:func:`pdplan.queueing.kv_admission._pinned_wait`, drained at λ_pin);
* *stretched*: the decode instance's queue (:func:`pdplan.queueing.kv_admission._recompute_wait`) on the same
  colocated admission (``recompute_in_occupancy=True``, its own comfortable rate), what the disaggregated fix would
  give here;
* *pinned at sat*: the pinned queue drained at the simulated saturated throughput in place of λ_pin (a diagnosis,
  not a model: it reads the simulator).

Simulated (pdplan's simulator, vLLM's preemption and prefix-cache hits on the recompute; Poisson, seeds 0…S − 1,
10 % warm-up left out), with counters the simulator does not keep, added here by wrapping three methods of
:class:`pdplan.sim.colocated_instance.ColocatedInstance` for the run: a boundary *stands the line still* when a waiting
request is not admitted although the iteration's chunk budget has room (its KV does not fit, or the boundary preempted;
boundaries held by the seat cap are counted apart and are none here); a request's wait is the time the line stood still
between its arrival and its admission (the start of its prefill), so requests queued behind a held head wait too, as
they do in the closed form's FCFS queue; P_w the share with a positive wait. Also the preemptions per request against
π = f·P_w, and the time-weighted KV occupancy (prompts in prefill plus the decode batch's next step, between the first
counted and the last arrival) against K̄ = λτ̄W. The saturated throughput is a run offered far past λ_pin.

Run: ``python benchmarks/colocated_kv_wait_vs_sim.py [--requests N] [--seeds S] [--only TEXT]``; prints a Markdown
table (50,000 requests and 4 seeds: about 4 s a run, 4 minutes in all).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from pdplan.io.catalog import open_catalog
from pdplan.queueing.kv_admission import RidingKvAdmission, _pinned_wait, pinned_comfort_rate
from pdplan.serving import build_model, resolve
from pdplan.serving.colocated import ColocatedModel
from pdplan.sim import simulate
from pdplan.sim.colocated_instance import _DECODE, ColocatedInstance
from pdplan.sim.deployment import sim_deployment
from pdplan.specs.scenario import Scenario
from pdplan.workload.bins import sample

WARMUP = 0.1
SATURATION_RUN = 20_000  # requests of the overloaded run that reads the saturated throughput

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the reference tests' scenarios, one source
from support.llama70b_colocated import llama70b_chat  # noqa: E402
from support.opt13b_colocated import opt13b_colocated  # noqa: E402

CASES: dict[str, tuple[Scenario, tuple[float, ...], float]] = {  # scenario, rates, overload rate
    "llama70b-chat": (llama70b_chat(), (1.15, 1.20, 1.25, 1.30, 1.40, 1.60, 1.80), 3.0),
    "opt13b-400-1s": (opt13b_colocated("vllm", 400, "1s"), (5.40, 5.45, 5.50, 5.55), 6.5),
    "opt13b-200": (opt13b_colocated("vllm", 200, "250ms"), (9.65, 9.80, 9.90), 12.0),
}


@dataclasses.dataclass
class Probe:
    """What the wrapped instance records: the intervals the line stood still, each request's admission time, the
    time-weighted occupancy and the instance itself (one instance per run)."""

    still: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    admitted_s: dict[int, float] = dataclasses.field(default_factory=dict)
    seat_held: int = 0
    occupancy_area: float = 0.0
    occupancy_time_s: float = 0.0
    mark: tuple[float, float, int, int, int] | None = None
    standing: bool = False
    window_s: tuple[float, float] = (0.0, float("inf"))
    instance: ColocatedInstance | None = None


@contextmanager
def instrumented() -> Iterator[Probe]:
    """Wrap ``fire``, ``_plan_chunked`` and ``_reserve`` of :class:`ColocatedInstance` for one run (module
    docstring); restored on exit."""
    probe = Probe()
    fire, plan, reserve = ColocatedInstance.fire, ColocatedInstance._plan_chunked, ColocatedInstance._reserve

    def fire_probe(self: ColocatedInstance) -> list[int]:
        now = self.next_time
        if probe.mark is not None and probe.window_s[0] <= probe.mark[0] and now <= probe.window_s[1]:
            start, held, kind, batch, last = probe.mark  # since the last boundary: a decode segment grows b a step
            growth = batch * (last + 1) / 2.0 if kind == _DECODE else 0.0
            probe.occupancy_area += (now - start) * (held + growth)
            probe.occupancy_time_s += now - start
        probe.standing = False
        done = fire(self)
        if probe.standing:
            probe.still.append((self.t, self.next_time))
        probe.instance = self
        probe.mark = (self.t, self.kv_used + self._decode_need(), self.kind, self.act.b, self.next_k)
        return done

    def plan_probe(self: ColocatedInstance) -> None:
        plan(self)
        budget = self.budget - self.act.b if self.mixed else self.budget
        if self.admitted < len(self.queue) and sum(t for _, t in self.plan) < budget:
            if self.act.b + self.prefilling >= self.max_batch:
                probe.seat_held += 1
            else:
                probe.standing = True

    def reserve_probe(self: ColocatedInstance, req: int) -> bool:
        ok = reserve(self, req)
        if ok and req not in probe.admitted_s:
            probe.admitted_s[req] = self.t
        return ok

    setattr(ColocatedInstance, "fire", fire_probe)  # noqa: B010
    setattr(ColocatedInstance, "_plan_chunked", plan_probe)  # noqa: B010
    setattr(ColocatedInstance, "_reserve", reserve_probe)  # noqa: B010
    try:
        yield probe
    finally:
        setattr(ColocatedInstance, "fire", fire)  # noqa: B010
        setattr(ColocatedInstance, "_plan_chunked", plan)  # noqa: B010
        setattr(ColocatedInstance, "_reserve", reserve)  # noqa: B010


def still_time(probe: Probe) -> Callable[[np.ndarray], np.ndarray]:
    """B(t): the time the line stood still before t (piecewise linear over the recorded intervals)."""
    iv = np.array(probe.still, dtype=np.float64).reshape(-1, 2)
    edges = np.concatenate(([0.0], iv.ravel()))
    rises = np.stack([np.zeros(len(iv)), iv[:, 1] - iv[:, 0]], axis=1).ravel()
    cum = np.concatenate(([0.0], np.cumsum(rises)))
    return lambda t: np.interp(t, edges, cum)


def run(sc: Scenario, model: ColocatedModel, rate: float, n: int, seed: int) -> dict[str, float]:
    """One simulated run at ``rate`` with the probe: P_w, the mean wait, preemptions per request, mean occupancy and
    the throughput."""
    window = model.res.model.max_position_embeddings
    lin, out = sample(sc.workload, n, np.random.default_rng([seed, 0]), context_window=window)
    setup = sim_deployment(model, lin, out)
    arrivals = np.cumsum(np.random.default_rng([seed, 1]).exponential(1.0 / rate, n))
    first = int(n * WARMUP)
    with instrumented() as probe:
        probe.window_s = (float(arrivals[first]), float(arrivals[-1]))
        result = simulate(arrivals, setup.requests, setup.deployment, np.random.default_rng([seed, 2]))
    assert probe.instance is not None
    stood = still_time(probe)
    admitted = np.array([probe.admitted_s[r] for r in range(first, n)])
    wait = stood(admitted) - stood(arrivals[first:])
    return {
        "p_w": float(np.mean(wait > 1e-9)),
        "mean_ms": 1e3 * float(wait.mean()),
        "preemptions": probe.instance.preemptions / n,
        "occupancy": probe.occupancy_area / probe.occupancy_time_s,
        "seat_held": float(probe.seat_held),
        "throughput": result.throughput_rps,
    }


def closed_queues(model: ColocatedModel, rate: float, saturated: float) -> list[tuple[float, float]]:
    """``(P_w, mean wait s)`` of the pinned, the stretched and the pinned-at-saturation queues (module docstring)."""
    queue = model.kv_admission()
    stretched = dataclasses.replace(queue, recompute_in_occupancy=True)
    stretched = dataclasses.replace(
        stretched, comfort_rate_per_s=pinned_comfort_rate(stretched, model.bound_rates().kv_rate_per_s)
    )
    lam = np.array([rate / model.z])
    rows = [_mean(*q.wait(lam)) for q in (queue, stretched)]
    tau, factor = queue.tau_s(lam), queue.feedback(lam)
    rows.append(_mean(*_pinned_wait(lam, tau, factor, queue.held, queue.kv_capacity_tokens, saturated / model.z)))
    return rows


def _mean(prob: np.ndarray, cond: np.ndarray) -> tuple[float, float]:
    return float(prob[0]), float(prob[0] * cond[0])


def _span(values: list[float], fmt: str) -> str:
    return f"{fmt % min(values)}–{fmt % max(values)}" if len(values) > 1 else fmt % values[0]


def case_rows(name: str, requests: int, seeds: int) -> list[str]:
    """The table rows of one case."""
    sc, rates, overload = CASES[name]
    model = build_model(resolve(sc, open_catalog()))
    assert isinstance(model, ColocatedModel)
    queue: RidingKvAdmission = model.kv_admission()
    saturated = run(sc, model, overload, SATURATION_RUN, 0)["throughput"]
    rows = [
        f"| {name}: comfortable {queue.comfort_rate_per_s * model.z:.3f}, λ_pin {queue.mean_rate_per_s * model.z:.3f}, "
        f"simulated saturation {saturated:.3f} req/s, f = {queue.overflow_share:.3f} | | | | | | |"
    ]
    for rate in rates:
        sims = [run(sc, model, rate, requests, seed) for seed in range(seeds)]
        (pp, pm), (sp, sm), (ap, am) = closed_queues(model, rate, saturated)
        lam = np.array([rate / model.z])
        kbar = float(lam[0] * queue.tau_s(lam)[0] * queue.held.work)
        assert all(s["seat_held"] == 0 for s in sims), "a seat-held boundary: the wait is not the KV's alone"
        rows.append(
            f"| {rate:.2f} | {_span([s['p_w'] for s in sims], '%.3f')} / "
            f"{_span([s['mean_ms'] for s in sims], '%.0f')} ms | {pp:.3f} / {1e3 * pm:.0f} ms | "
            f"{sp:.3f} / {1e3 * sm:.0f} ms | {ap:.3f} / {1e3 * am:.0f} ms | "
            f"{_span([s['preemptions'] for s in sims], '%.4f')} / {queue.overflow_share * pp:.4f} / "
            f"{queue.overflow_share * sp:.4f} | {np.mean([s['occupancy'] for s in sims]):,.0f} / {kbar:,.0f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    print(
        "| rate, req/s | simulated P_w / mean wait | pinned queue | stretched queue | pinned at saturation | "
        "preemptions per request: simulated / π pinned / π stretched | occupancy simulated / K̄, tokens |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in CASES:
        if args.only in name:
            for row in case_rows(name, args.requests, args.seeds):
                print(row, flush=True)


if __name__ == "__main__":
    main()
