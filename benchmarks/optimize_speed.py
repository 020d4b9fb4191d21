"""Speed of ``pdplan optimize`` (issue targets: the default scenario with >= 10,000 candidates in < 1 s wall on
2 cores; a heterogeneous search over 4 GPU types in < 3 s; an MoE search with EP/DP per role in < 3 s).

Times the library call (``pdplan.search.optimize``) in a warm process — the same work the CLI does after its
imports — as the best of 3 runs, with and without the capacity-review extras (sensitivity and latency-vs-rate curve,
computed only for Markdown/JSON/plot output). Run: ``python benchmarks/optimize_speed.py [EXAMPLE.yaml ...]``
(``--cpu``: the process's own CPU seconds instead of wall clock, for a machine shared with other jobs; examples named:
only those).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from timing import best_of

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.optimize import optimize

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


def main() -> None:
    catalog = open_catalog()
    clock = time.process_time if "--cpu" in sys.argv[1:] else time.perf_counter
    print("| scenario | candidates | table output (s) | with review extras (s) |\n|---|---|---|---|")
    asked = [a for a in sys.argv[1:] if not a.startswith("--")]
    for name in asked or CASES:
        scenario = load_scenario(ROOT / "examples" / name)
        result = optimize(scenario, catalog=catalog, analyse=False)
        plain = best_of(lambda: optimize(scenario, catalog=catalog, analyse=False), 3, clock=clock)  # noqa: B023
        full = best_of(lambda: optimize(scenario, catalog=catalog, analyse=True), 3, clock=clock)  # noqa: B023
        print(f"| {name} | {result.search.candidates:,} | {plain:.2f} | {full:.2f} |")


if __name__ == "__main__":
    main()
