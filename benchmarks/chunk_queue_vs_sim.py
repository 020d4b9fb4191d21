"""The colocated chunked-prefill queue, closed form against the simulator from half its stable limit to near it.

Measures, on the MLPerf Server H100 deployment (benchmarks/mlperf_server.py) and the chunked colocated cases of
tests/reference/test_colocated_vs_sim.py (3x the default instance, ``kernels`` engine, 2,048-token budget), at
:data:`FRACTIONS` of the closed form's stable limit:

* the chunk-busy fraction: simulated, the share of instance time spent in steps that carry prefill tokens (after
  the simulator's warm-up, up to the last arrival); closed form, the chunk queue's utilisation ρ
  (pdplan/queueing/chunk_window.py ``chunk_queue``) and its fluid ρ_f;
* the prefill wait, P50 and P99: simulated, from a prompt's arrival to the start of the step that carries its first
  chunk; closed form, the fluid M/G/1 wait of ``colocated_chunked`` (pdplan/queueing/colocated_queue.py) plus the
  rest of the step in progress (its gated step less the other prompts' work in the prompt's own step);
* the prompt's own steps, P99: simulated, from the start of its first chunk step to its first token (the whole step
  that carries its last token, with every other prompt's chunk in it); closed form, the largest TTFT offset of
  ``colocated_chunked`` (``S_L + P_d w_L``), which is deterministic per cell;
* the mean TTFT less the engine's request term: simulated, and the *gated bulk* step law below, priced once at the
  closed form's plain step τ_p and once at the τ_p of the simulator's own mean decode batch;
* P99 TTFT of both (``pdplan simulate``'s figures).

Gated bulk law (for a budget that never binds: every step takes all the prompts that arrived during the step before,
an M/G/1 with gated service and multiple vacations, the class of Takagi, *Queueing Analysis* Vol. 1, 1991, with the
plain part τ_p of every step as the vacation; the moments below are our derivation). Step k lasts ``T_k = τ_p +
Σ_{j ∈ G_k} s_j``, G_k the arrivals during ``T_{k−1}``, ``s = t_p L + A_L`` a prompt's own prefill work, ``ρ_p =
λE[s]`` (= u_p). Stationarity gives ``E[T] = τ_p/(1 − ρ_p)`` (the mean field's τ̄ when τ_p is its plain step) and, by
the compound-Poisson variance, ``Var T = λE[T]E[s²] + ρ_p² Var T``, so ``Var T = λE[T]E[s²]/(1 − ρ_p²)``. A Poisson
arrival lands in a length-biased step T* (``E[T*] = E[T] + Var T/E[T]``), waits its residual (mean ``E[T*]/2``), and
its token 1 comes at the end of the next step, which holds its own work and that of the ``λT*`` others that arrived in
the same step: ``E[TTFT] = τ_p + E[s] + E[T*](1/2 + ρ_p)``. Reported only where the largest prompt fits the closed
form's chunk c (else "—").

The simulator is observed, not changed: the script wraps ``ColocatedInstance.submit``, ``_plan_chunked`` and
``_prefilled`` to log arrivals, step spans and first tokens. Run: ``python benchmarks/chunk_queue_vs_sim.py`` (about
35 s on one core); it rewrites its block of docs/accuracy.md §6.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.overrides import apply_overrides
from pdplan.io.scenario import default_scenario_path, load_scenario
from pdplan.queueing.colocated_queue import _chunk_wait, _landing_step, _with_gated_step
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.resolve import resolve
from pdplan.serving.ttft import GRID_CELLS
from pdplan.sim import colocated_instance as ci
from pdplan.sim.compare import simulate_scenario
from pdplan.specs.command_line import ScenarioOverrides
from pdplan.specs.scenario import Scenario

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mlperf_server

FRACTIONS = (0.5, 0.7, 0.85, 0.95)
SECTION = "chunk-queue"
"""The marker block of docs/accuracy.md this script rewrites."""
REQUESTS = 40_000
"""Requests per simulation (seed 0, the simulator's 10 % warm-up). Near the limit the decode batch builds up over more
than a request's life (about 20 s at MLPerf's 0.95): with 10,000 requests the warm-up was 14 s and the simulated batch
324 at 0.95, busy 0.770, against 424 and 0.823 at 40,000 and 80,000 requests alike."""


class _Log:
    """Arrivals, first-chunk starts and chunk-carrying step spans, logged from the simulator's instances."""

    def __init__(self) -> None:
        self.arrival: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.spans: list[tuple[float, float]] = []
        self.instances: set[int] = set()
        self.done: dict[int, float] = {}
        self.batch: list[int] = []

    def install(self) -> tuple[Any, Any, Any]:
        submit, plan = ci.ColocatedInstance.submit, ci.ColocatedInstance._plan_chunked
        prefilled = ci.ColocatedInstance._prefilled
        log = self

        def submit_logged(inst: Any, req: int, now_s: float) -> None:
            log.arrival[req] = now_s
            log.instances.add(id(inst))
            submit(inst, req, now_s)

        def plan_logged(inst: Any) -> None:
            plan(inst)
            if inst.plan:
                log.spans.append((inst.t, inst.next_time))
                log.batch.append(inst.act.b)
                for req, _ in inst.plan:
                    log.first.setdefault(req, inst.t)

        def prefilled_logged(inst: Any, req: int, now: float, done: list[int]) -> None:
            log.done[req] = now
            prefilled(inst, req, now, done)

        ci.ColocatedInstance.submit = submit_logged  # type: ignore[method-assign]
        ci.ColocatedInstance._plan_chunked = plan_logged  # type: ignore[method-assign]
        ci.ColocatedInstance._prefilled = prefilled_logged  # type: ignore[method-assign]
        return submit, plan, prefilled


def _simulate(sc: Scenario, rate: float) -> tuple[dict[str, float], dict[str, Any]]:
    log = _Log()
    saved = log.install()
    try:
        cmp = simulate_scenario(sc, rate=rate, n_requests=REQUESTS)
    finally:
        ci.ColocatedInstance.submit, ci.ColocatedInstance._plan_chunked, ci.ColocatedInstance._prefilled = saved  # type: ignore[method-assign]
    reqs = np.array(sorted(log.arrival))
    arr = np.array([log.arrival[r] for r in reqs])
    warm = reqs[int(0.1 * reqs.size) :]
    wait = np.array([log.first[r] - log.arrival[r] for r in warm])
    lo, hi = float(np.sort(arr)[int(0.1 * arr.size)]), float(arr.max())
    spans = np.array(log.spans)
    busy = float(np.sum(np.clip(np.minimum(spans[:, 1], hi) - np.maximum(spans[:, 0], lo), 0.0, None)))
    assert cmp.simulated is not None
    own = np.array([log.done[r] - log.first[r] for r in warm])
    ttft = np.array([log.done[r] - log.arrival[r] for r in warm])
    sim = {
        "busy": busy / ((hi - lo) * len(log.instances)),
        "own_p99": float(np.quantile(own, 0.99)),
        "ttft_mean": float(ttft.mean()),
        "batch": float(np.mean(log.batch[len(log.batch) // 10 :])),
        "wait_p50": float(np.quantile(wait, 0.5)),
        "wait_p99": float(np.quantile(wait, 0.99)),
        "ttft_p99": cmp.simulated.as_dict()["ttft_s"]["p99"],
    }
    return sim, cmp.closed_form


def _closed(model: ColocatedModel, rate: float) -> dict[str, float]:
    lam = np.array([rate / model.z])
    q = model.chunk_queue_at(lam)
    out = model._queue(np.array([rate]))
    b1, b2, _, _ = _landing_step(q, model.cells)  # E[T*], E[T*²]: the rest of the step in progress is U·T*
    residual = (b1 / 2.0, b2 / 3.0 - b1**2 / 4.0)
    busy = np.exp(-lam * model.cells.mean_steps * q.tau_mean_s)
    wait = _with_gated_step(_chunk_wait(lam, model.cells, q.fluid_service_s, GRID_CELLS), busy, *residual, GRID_CELLS)
    w50, w99 = wait.quantile(np.array([0.5, 0.99]))[0]
    fits = float(model.cells.computed_tokens.max()) <= float(q.chunk_tokens[0])
    return {
        "fits": float(fits),
        "offset_max": float(np.max(out.ttft.offsets_s)),
        "busy": float(q.rho[0]),
        "busy_fluid": float(q.rho_fluid[0]),
        "wait_p50": float(w50),
        "wait_p99": float(w99),
        "per_step": float(lam[0] * q.tau_plain_s[0]),
        "tau_plain": float(q.tau_plain_s[0]),
    }


def gated_mean_ttft_s(model: ColocatedModel, rate: float, tau_plain_s: float) -> float:
    """``E[TTFT] = τ_p + E[s] + E[T*](1/2 + ρ_p)`` of the gated bulk law (module docstring), per-instance rate."""
    lam, p = rate / model.z, model.cells.prob
    s = model.prefill_s_per_token * model.cells.computed_tokens + model.attention_cell_s
    rho_p = lam * float(p @ s)
    step = tau_plain_s / (1.0 - rho_p)
    var = lam * step * float(p @ s**2) / (1.0 - rho_p**2)
    return float(tau_plain_s + p @ s + (step + var / step) * (0.5 + rho_p))


def plain_step_s(model: ColocatedModel, batch: float) -> float:
    """``τ_p = t0 + (t1 + t2 K/n̄)·B`` at a decode batch B (mean KV context per decoding request ``E[work]/E[n]``)."""
    st, wl = model.decode.step, model.cells
    return float(st.t0_s + (st.t1_s_per_seq + st.t2_s_per_token * wl.mean_work / wl.mean_steps) * batch)


@dataclass(frozen=True)
class Case:
    name: str
    scenario: Scenario


def cases() -> list[Case]:
    data = mlperf_server.load_data()
    h100 = next(s for s in data["systems"] if s["gpu"] == "h100-sxm")
    out = [Case("MLPerf DGX-H100", mlperf_server.scenario(h100, data))]
    for workload in ("chat", "splitwise-coding"):
        sc = apply_overrides(
            load_scenario(default_scenario_path()),
            ScenarioOverrides(workload=workload, colocated=3, scheduler="chunked", engine="kernels"),
        )
        out.append(Case(f"3x {workload}", sc))
    return out


@dataclass(frozen=True)
class Point:
    """Simulated and closed-form figures of one case at one fraction of its stable limit (module docstring)."""

    fraction: float
    rate_rps: float
    sim: dict[str, float]
    closed: dict[str, float]
    closed_ttft_p99_s: float
    gated_closed_s: float | None
    """The gated bulk mean TTFT at the closed form's τ_p; None where the largest prompt exceeds the chunk."""
    gated_sim_s: float | None
    """The same at the τ_p of the simulator's own mean decode batch."""


def point(case: Case, fraction: float) -> Point:
    limit = evaluate(case.scenario).stability_limit_rps
    model = build_model(resolve(case.scenario, open_catalog()))
    assert isinstance(model, ColocatedModel)
    rate = fraction * limit
    sim, closed_form = _simulate(case.scenario, rate)
    cf = _closed(model, rate)
    at_closed = at_sim = None
    if cf["fits"]:
        at_closed = gated_mean_ttft_s(model, rate, cf["tau_plain"])
        at_sim = gated_mean_ttft_s(model, rate, plain_step_s(model, sim["batch"]))
    return Point(fraction, rate, sim, cf, closed_form["ttft_s"]["p99"], at_closed, at_sim)


def row(case: Case, pt: Point) -> str:
    sim, cf, ms = pt.sim, pt.closed, 1000.0
    gated = "—"
    if pt.gated_closed_s is not None and pt.gated_sim_s is not None:
        gated = f"{pt.gated_closed_s * ms:.0f} / {pt.gated_sim_s * ms:.0f}"
    return (
        f"| {case.name} | {pt.fraction:.2f} | {pt.rate_rps:.2f} | {cf['per_step']:.2f} | {sim['busy']:.3f} | "
        f"{cf['busy']:.3f} ({cf['busy_fluid']:.3f}) | {sim['wait_p50'] * ms:.0f} / {cf['wait_p50'] * ms:.0f} | "
        f"{sim['wait_p99'] * ms:.0f} / {cf['wait_p99'] * ms:.0f} | "
        f"{sim['own_p99'] * ms:.0f} / {cf['offset_max'] * ms:.0f} | {sim['ttft_mean'] * ms:.0f} | {gated} | "
        f"{sim['ttft_p99']:.3f} / {pt.closed_ttft_p99_s:.3f} |"
    )


def rows(case: Case) -> list[str]:
    lines = []
    for fraction in FRACTIONS:
        lines.append(row(case, point(case, fraction)))
        print(lines[-1], flush=True)
    return lines


HEADER = (
    "| case | fraction of the limit | rate (req/s) | prompts per plain step (λτ_p) | chunk-busy, simulated | "
    "chunk-busy, closed ρ (fluid ρ_f) | prefill wait P50, sim / closed (ms) | prefill wait P99, sim / closed (ms) | "
    "own steps P99, sim / closed max (ms) | TTFT mean less request term, sim (ms) | gated bulk law at closed / "
    "simulated τ_p (ms) | TTFT P99, sim / closed (s) |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    """Print the table; without arguments also rewrite its block in docs/accuracy.md (arguments: case names to run)."""
    start = time.perf_counter()
    print(HEADER, flush=True)
    only = sys.argv[1:]
    lines = [line for case in cases() if not only or any(o in case.name for o in only) for line in rows(case)]
    if not only:
        seconds = time.perf_counter() - start
        text = (
            f"Generated by `python benchmarks/chunk_queue_vs_sim.py` in {seconds:.0f} s ({REQUESTS:,} requests per "
            f"point, seed 0; times in ms unless marked).\n\n{HEADER}\n" + "\n".join(lines) + "\n"
        )
        mlperf_server.write_section(text, SECTION)
        print(f"wrote {mlperf_server.DOC}")


if __name__ == "__main__":
    main()
