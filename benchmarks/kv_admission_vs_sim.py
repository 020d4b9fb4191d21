"""The decode KV admission queue against the simulator (issue #23 item 5; docs/queueing.md §7).

xPyD cases whose decode pool binds on its KV: three cases of the reuse grid (``benchmarks/reuse_closed_form_vs_sim.py``,
whose docstring defines them; affinity routing, HBM only unless ``+dram``) and one without reuse (the DistServe OPT-13B
example, ``examples/opt-13b-a100-distserve.yaml``, convention B), with its default engine vLLM (whose footprint grows),
with TensorRT-LLM (which reserves L + n at admission, as the simulator does) and with SGLang (whose decode server
counts each request's context plus 512 reserved tokens; the simulator runs that rule, retraction included,
:mod:`pdplan.sim.pd_decode_rule`). Per case: the closed form's
comfortable (P99) KV limit, its stability (mean KV) limit and its goodput (:func:`pdplan.evaluation.evaluate.evaluate`),
and the simulated goodput (:func:`pdplan.sim.compare.simulate_scenario`, bisection on the rate at the same SLO), with
P90 TTFT of both at the closed form's goodput. Error = closed / simulated − 1.

**Sessions** (the two ``sess-*`` cases): a session stream's simulation offers its counted requests at a rate of its
own, below the nominal one, and its stationary start must be placed with the run's own turn latency, or it counts too
few late, long-history turns (``benchmarks/reuse_closed_form_vs_sim.py``, *Offered rate*; docs/prefix_cache.md §9).
So these rows run the simulator as the reuse grid does (``turn_latency_s=None``) and report the simulated goodput as
the rate offered at the bisected nominal rate, and the P90 TTFT of the closed form at the rate the simulation at the
closed form's goodput offered. ``--nominal`` keeps the former comparison (zero-latency start, nominal rates).

Run: ``python benchmarks/kv_admission_vs_sim.py [--requests N] [--only TEXT]``; prints a Markdown table
(docs/queueing.md §7).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pdplan.evaluation.evaluate import evaluate
from pdplan.io.scenario import load_scenario, revalidate
from pdplan.sim.compare import simulate_scenario
from pdplan.specs.scenario import Scenario

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import reuse_closed_form_vs_sim as grid  # noqa: E402


def cases() -> list[tuple[str, Scenario]]:
    """(label, scenario) of each case (module docstring)."""
    out = [
        (f"{w} affinity {'hbm+dram' if dram else 'hbm'} {dep}", grid.scenario(w, "affinity", dram, dep))
        for w, dram, dep in (
            ("sess-geo-spread-long", False, "2P1D"),
            ("sess-geo-fixed-short-system", True, "2P1D"),
            ("prefix-uniform-1", False, "2P1D"),
        )
    ]
    distserve = load_scenario(ROOT / "examples" / "opt-13b-a100-distserve.yaml")
    out.append(("opt-13b-a100-distserve 1P1D (no reuse)", distserve))
    out.append(("same, engine trtllm (reserves L + n)", revalidate(distserve, {"engine": "trtllm"})))
    out.append(("same, engine sglang (context + 512, its PD decode rule)", revalidate(distserve, {"engine": "sglang"})))
    return out


def sessions_row(sc: Scenario, requests: int) -> tuple[float, float | None, float, float | None]:
    """(closed goodput, simulated goodput offered, closed P90 TTFT at the offered rate, simulated P90 TTFT) of a
    sessions case (module docstring, Sessions)."""
    good = evaluate(sc).goodput_rps
    cmp = simulate_scenario(sc, rate=good, n_requests=requests, goodput=True, turn_latency_s=None)
    offered = grid._reuse_run(sc, good, requests, good).offered_rps
    point = evaluate(sc, rate=offered).operating_point
    assert point is not None  # evaluated at a rate
    closed_ttft = point.ttft_s.p90
    sim_ttft = None if cmp.simulated is None else cmp.simulated.ttft_s.p90
    nominal = cmp.goodput_simulated_rps
    sim = grid._reuse_run(sc, nominal, requests, good).offered_rps if nominal else nominal
    return good, sim, closed_ttft, sim_ttft


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--only", default="", help="run only the cases whose label contains this text")
    parser.add_argument("--nominal", action="store_true", help="sessions at nominal rates, zero-latency start")
    args = parser.parse_args()
    print("| case | P99 KV limit | mean KV limit | goodput closed | goodput simulated | error | "
          "P90 TTFT closed / sim at closed goodput (ms) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for label, sc in cases():
        if args.only not in label:
            continue
        start = time.perf_counter()
        ev = evaluate(sc)
        if sc.workload.sessions is not None and not args.nominal:
            good, offered_sim, closed_ttft, sim_ttft = sessions_row(sc, args.requests)
            err = "" if offered_sim is None else f"{good / offered_sim - 1:+.1%}"
            ttft = "" if sim_ttft is None else f"{1e3 * closed_ttft:.0f} / {1e3 * sim_ttft:.0f}"
            print(
                f"| {label} | {ev.kv_comfort_limit_rps or 0:.3g} | {ev.stability_limit_rps:.3g} "
                f"({ev.stability_binding}) | {good:.4g} | {'' if offered_sim is None else f'{offered_sim:.4g}'} "
                f"(offered) | {err} | {ttft} (closed at the offered rate) |",
                flush=True,
            )
            print(f"<!-- {label}: {time.perf_counter() - start:.0f} s -->", file=sys.stderr)
            continue
        cmp = simulate_scenario(sc, rate=ev.goodput_rps, n_requests=args.requests, goodput=True)
        sim = cmp.goodput_simulated_rps
        err = "" if sim is None else f"{ev.goodput_rps / sim - 1:+.1%}"
        ttft = (
            ""
            if cmp.simulated is None
            else (f"{1e3 * cmp.closed_form['ttft_s']['p90']:.0f} / {1e3 * cmp.simulated.ttft_s.p90:.0f}")
        )
        comfort = ev.kv_comfort_limit_rps
        print(
            f"| {label} | {'—' if comfort is None else f'{comfort:.3g}'} | {ev.stability_limit_rps:.3g} "
            f"({ev.stability_binding}) | {ev.goodput_rps:.4g} | {'' if sim is None else f'{sim:.4g}'} | {err} | "
            f"{ttft} |",
            flush=True,
        )
        print(f"<!-- {label}: {time.perf_counter() - start:.0f} s -->", file=sys.stderr)


if __name__ == "__main__":
    main()
