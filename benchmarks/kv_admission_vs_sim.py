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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--only", default="", help="run only the cases whose label contains this text")
    args = parser.parse_args()
    print("| case | P99 KV limit | mean KV limit | goodput closed | goodput simulated | error | "
          "P90 TTFT closed / sim at closed goodput (ms) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for label, sc in cases():
        if args.only not in label:
            continue
        start = time.perf_counter()
        ev = evaluate(sc)
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
