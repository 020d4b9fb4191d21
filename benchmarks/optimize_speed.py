"""Speed of ``pdplan optimize`` (issue targets: the default scenario with >= 10,000 candidates in < 1 s wall on 2 cores;
a heterogeneous search over 4 GPU types in < 3 s; an MoE search with EP/DP per role in < 3 s; issue #22: a
reuse-aware search within 1.5x the default's time).

Times the library call (``pdplan.search.optimize``) in a warm process — the same work the CLI does after its imports
— as the best of 3 runs, with and without the capacity-review extras (sensitivity and latency-vs-rate curve, computed
only for Markdown/JSON/plot output). Run: ``python benchmarks/optimize_speed.py [EXAMPLE.yaml ...]``. Each timed run
starts with nothing memoised (:func:`pdplan.search.memo.clear` and :func:`pdplan.queueing.exact_memo.clear_all`: a
search after another of the same scenario reuses its rate-independent parts, which a sweep gains and one ``pdplan
optimize`` does not), so the figure is one command's
search. (``--cpu``: the process's own CPU seconds instead of wall clock, for a machine shared with other jobs;
examples named: only those; ``--before DIR``: also time the pdplan package of an older checkout at DIR, e.g. ``git
archive main | tar -x -C DIR``, in a child process of the same run, each case alternating old and new, so that the
before and after columns share the machine's load).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from timing import best_of, forget

from pdplan.io.catalog import Catalog, open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.optimize import optimize
from pdplan.specs.scenario import Scenario

ROOT = Path(__file__).resolve().parents[1]
CASES = (
    "default.yaml",
    "mixed-fleet.yaml",
    "opt-13b-a100-distserve.yaml",
    "h100-prefill-l40s-decode.yaml",
    "long-context-summarisation.yaml",
    "fp8-h200.yaml",
    "deepseek-v3-wide-ep.yaml",  # MoE with EP/DP per role in the space (issue #13 target: < 3 s on 2 cores)
    "chat-sessions.yaml",  # KV reuse: sessions, search: cache: 7 settings (issue #22 target: <= 1.5x the default)
    "shared-system-prompt.yaml",
    "mooncake-trace.yaml",
)


def timed(name: str, clock_cpu: bool) -> tuple[int, float, float]:
    """(candidates, table-output seconds, with-extras seconds) of one example, best of 3 after a warm-up."""
    catalog = open_catalog()
    clock = time.process_time if clock_cpu else time.perf_counter
    scenario = load_scenario(ROOT / "examples" / name)
    result = optimize(scenario, catalog=catalog, analyse=False)
    plain = best_of(lambda: _cold(scenario, catalog, analyse=False), 3, clock=clock)
    full = best_of(lambda: _cold(scenario, catalog, analyse=True), 3, clock=clock)
    return result.search.candidates, plain, full


def _cold(scenario: Scenario, catalog: Catalog, *, analyse: bool) -> object:
    """One search with nothing memoised by an earlier one (an older checkout has no memo)."""
    forget()
    return optimize(scenario, catalog=catalog, analyse=analyse)


def _before(old: str, name: str, clock_cpu: bool) -> tuple[float, float]:
    """The same case timed on the pdplan package of the checkout ``old`` (a child process importing it first)."""
    env = {**os.environ, "PYTHONPATH": str(Path(old).resolve())}
    args = [sys.executable, __file__, "--row", name] + (["--cpu"] if clock_cpu else [])
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    return float(row[1]), float(row[2])


def main() -> None:
    argv = sys.argv[1:]
    clock_cpu = "--cpu" in argv
    if "--row" in argv:  # child of --before: one machine-readable row
        print(json.dumps(timed(argv[argv.index("--row") + 1], clock_cpu)))
        return
    old = argv[argv.index("--before") + 1] if "--before" in argv else None
    asked = [a for a in argv if not a.startswith("--") and a != old]
    if old is None:
        print("| scenario | candidates | table output (s) | with review extras (s) |\n|---|---|---|---|")
    else:
        print(
            "| scenario | candidates | table output, before (s) | table output, after (s) "
            "| with review extras, before (s) | with review extras, after (s) |\n|---|---|---|---|---|---|"
        )
    for name in asked or CASES:
        if old is None:
            n, plain, full = timed(name, clock_cpu)
            print(f"| {name} | {n:,} | {plain:.2f} | {full:.2f} |")
            continue
        plain_0, full_0 = _before(old, name, clock_cpu)
        n, plain, full = timed(name, clock_cpu)
        print(f"| {name} | {n:,} | {plain_0:.2f} | {plain:.2f} | {full_0:.2f} | {full:.2f} |")


if __name__ == "__main__":
    main()
