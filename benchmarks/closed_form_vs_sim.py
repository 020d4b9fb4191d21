"""Closed form (``pdplan evaluate``) vs discrete-event simulation (``pdplan simulate``).

Grid: 3 workloads × 5 deployments × utilisation 0.3/0.5/0.7 of the deployment's stable limit;
per cell the relative error ``closed/sim − 1`` of P90/P99 TTFT and TPOT, and per (workload,
deployment) the goodput error (closed-form goodput vs the simulated goodput found by bisection on
rate with the same SLO). Seeds are fixed (seed 0, 20,000 requests per run, 10 % warm-up), so the
tables are deterministic; only the run time line changes between machines.

Run: ``python benchmarks/closed_form_vs_sim.py`` (≈ 4.5 min on one core); rewrites its section of
docs/accuracy_serving.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pdplan.io.overrides import apply_overrides
from pdplan.io.scenario import default_scenario_path, load_scenario, revalidate
from pdplan.sim.compare import Comparison, simulate_scenario
from pdplan.specs.command_line import ScenarioOverrides
from pdplan.specs.scenario import Scenario

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "accuracy_serving.md"
SECTION = "closed_form_vs_sim"
UTILISATIONS = (0.3, 0.5, 0.7)
REQUESTS = 20_000
WORKLOADS = {"chat": "2s", "splitwise-coding": "2s", "mooncake-arxiv": "8s"}
"""Workload preset → TTFT SLO (P90, 90 % attainment; TPOT SLO 100 ms except where noted)."""


@dataclass(frozen=True)
class Deployment:
    name: str
    describe: str
    scenario: Path
    overrides: ScenarioOverrides
    update: dict[str, object]


DEPLOYMENTS = (
    Deployment(
        "2P1D-LW",
        "Llama-3.1-70B, H100 TP4, 2P1D, least-work routing, layer transfer over IB NDR, convention A",
        default_scenario_path(),
        ScenarioOverrides(),
        {},
    ),
    Deployment(
        "1P2D-RND-B",
        "Llama-3.1-8B, 1× H100 prefill + 2× L40S decode, random routing, RoCE 100G, convention B, TPOT SLO 50 ms",
        ROOT / "examples" / "h100-prefill-l40s-decode.yaml",
        ScenarioOverrides(routing="random", tpot_slo="50ms"),
        {"ttft_convention": "B"},
    ),
    Deployment(
        "1P2D-RND-B-REQ",
        "as 1P2D-RND-B with request granularity: the whole KV is sent "
        "after the prefill, so the prefill NIC queues (tandem link chain)",
        ROOT / "examples" / "h100-prefill-l40s-decode.yaml",
        ScenarioOverrides(routing="random", tpot_slo="50ms", granularity="request"),
        {"ttft_convention": "B"},
    ),
    Deployment(
        "3x-CHUNKED",
        "Llama-3.1-70B, 3 colocated H100 TP4 instances, chunked prefill (C = 2048), random split",
        default_scenario_path(),
        ScenarioOverrides(colocated=3, scheduler="chunked"),
        {},
    ),
    Deployment(
        "3x-PREFILL-FIRST",
        "Llama-3.1-70B, 3 colocated H100 TP4 instances, prefill-first "
        "(each prompt stalls the running decodes, vanilla vLLM), random split",
        default_scenario_path(),
        ScenarioOverrides(colocated=3, scheduler="prefill-first"),
        {},
    ),
)


def scenario(dep: Deployment, workload: str, ttft_slo: str) -> Scenario:
    ov = ScenarioOverrides(**{**dep.overrides.__dict__, "workload": workload, "ttft_slo": ttft_slo})
    sc = apply_overrides(load_scenario(dep.scenario), ov)
    return revalidate(sc, dep.update) if dep.update else sc


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100.0 * x:+.1f}"


def cell_row(wl: str, name: str, util: float, cmp: Comparison) -> str:
    """One table row: workload, deployment name, load, rate, simulated percentiles and errors."""
    sim, err = cmp.simulated, cmp.relative_error()
    assert sim is not None
    t, p = err["ttft_s"], err["tpot_s"]
    return (
        f"| {wl} | {name} | {util:.1f} | {cmp.closed_form['rate_rps']:.3g} | "
        f"{sim.ttft_s.p90:.3f} / {sim.ttft_s.p99:.3f} | {pct(t['p90'])} / {pct(t['p99'])} | "
        f"{1e3 * sim.tpot_s.p90:.1f} / {1e3 * sim.tpot_s.p99:.1f} | "
        f"{pct(p['p90'])} / {pct(p['p99'])} |"
    )


def run_grid() -> tuple[list[str], list[str]]:
    cells, goods = [], []
    for wl, ttft_slo in WORKLOADS.items():
        for dep in DEPLOYMENTS:
            sc = scenario(dep, wl, ttft_slo)
            good = simulate_scenario(sc, goodput=True, n_requests=REQUESTS)
            limit = good.evaluation.stability_limit_rps
            for util in UTILISATIONS:
                cmp = simulate_scenario(sc, rate=util * limit, n_requests=REQUESTS)
                cells.append(cell_row(wl, dep.name, util, cmp))
                print(cells[-1], flush=True)
            ev = good.evaluation
            goods.append(
                f"| {wl} | {dep.name} | {ttft_slo} / {1e3 * sc.slo.tpot:.0f} ms | "
                f"{limit:.3g} ({ev.stability_binding}) | {good.goodput_closed_rps:.3g} "
                f"({ev.binding_constraint}) | {good.goodput_simulated_rps:.3g} | "
                f"{pct(good.relative_error().get('goodput_rps'))} |"
            )
            print(goods[-1], flush=True)
    return cells, goods


HEADER = (
    "| workload | deployment | load | rate (req/s) | sim TTFT P90 / P99 (s) | "
    "TTFT err P90 / P99 | sim TPOT P90 / P99 (ms) | TPOT err P90 / P99 |\n"
    "|---|---|---|---|---|---|---|---|"
)


def render(cells: list[str], goods: list[str], seconds: float) -> str:
    deps = "\n".join(f"* **{d.name}**: {d.describe}." for d in DEPLOYMENTS)
    return f"""## Closed form vs simulation

Generated by `benchmarks/closed_form_vs_sim.py` (`pdplan simulate` as a library call). The
simulator replays the same deployment request by request (`pdplan/sim/deployment.py`):
roofline prefill at each sampled prompt length, per-request KV transfer, the same linearised decode
step, seats and KV capacity — so the errors below are those of the queueing approximations
(plus the 24-bin workload histogram). {REQUESTS:,} requests per run, seed 0, 10 % warm-up; rates
are fractions of the closed form's stable limit. Errors are `closed/sim − 1` in %. SLO read at P90
with 90 % attainment. Run time: {seconds:.0f} s on one core.

{deps}

### Latency percentiles

{HEADER}
{chr(10).join(cells)}

### Goodput

| workload | deployment | SLO TTFT / TPOT | closed-form limit (req/s) | closed-form goodput | simulated goodput | err |
|---|---|---|---|---|---|---|
{chr(10).join(goods)}

Simulated goodput: bisection on the rate with common random numbers, to 1 % of the rate.
"""


def write_section(text: str, section: str = SECTION) -> None:
    """Replace (or append) the block between this section's markers in docs/accuracy_serving.md."""
    begin, end = f"<!-- BEGIN {section} -->", f"<!-- END {section} -->"
    doc = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Serving-model accuracy\n"
    block = f"{begin}\n{text}{end}\n"
    if begin in doc:
        head, rest = doc.split(begin, 1)
        doc = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        doc = doc.rstrip("\n") + "\n\n" + block
    DOC.write_text(doc, encoding="utf-8")


def main() -> None:
    start = time.perf_counter()
    cells, goods = run_grid()
    write_section(render(cells, goods, time.perf_counter() - start))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
