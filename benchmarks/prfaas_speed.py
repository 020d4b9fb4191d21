"""Speed of the PrfaaS model on examples/prfaas-h200-h20.yaml (the paper's case-study shape).

* ``threshold search``: one goodput-maximising threshold (bounded Brent over t, each step a goodput root on the
  per-path queueing model) — the core an optimizer pays per candidate deployment;
* ``Eq. 8 split search``: the capacity-only N_p/N_d split over 8 local instances, each with its Eq. 7 threshold;
* ``evaluate_prfaas``: the whole report section (searched threshold, Eq. 7 optimum, both baselines, link ×0.5/×2).

Issue target: a PrfaaS search with the threshold searched under 2 s on 2 cores. Best of ``REPEATS`` wall-clock
runs after a warm-up, and the CPU seconds of one run (the machine may be shared). Run:
``python benchmarks/prfaas_speed.py`` — rewrites docs/prfaas.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from timing import best_of

from pdplan.io.catalog import open_catalog
from pdplan.serving import load_scenario
from pdplan.serving.inputs import resolve
from pdplan.serving.prfaas.build import prfaas_setup
from pdplan.serving.prfaas.capacity import search_split
from pdplan.serving.prfaas.evaluate import THRESHOLD_XATOL_TOKENS, evaluate_prfaas
from pdplan.serving.prfaas.queue import search_goodput_threshold

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "prfaas.md"
REPEATS = 3


def cpu_s(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    sc = load_scenario(ROOT / "examples" / "prfaas-h200-h20.yaml")
    res = resolve(sc, open_catalog())
    setup = prfaas_setup(res)
    slo = sc.slo
    cases: list[tuple[str, Callable[[], object]]] = [
        ("threshold search", lambda: search_goodput_threshold(setup, slo.ttft, slo.attainment, THRESHOLD_XATOL_TOKENS)),
        ("Eq. 8 split search (8 local)", lambda: search_split(setup.capacity, 8)),
        ("evaluate_prfaas (whole section)", lambda: evaluate_prfaas(res)),
    ]
    lines = [
        "# PrfaaS model speed",
        "",
        "`python benchmarks/prfaas_speed.py` on examples/prfaas-h200-h20.yaml (one process, numpy threads as",
        "configured). Wall: best of 3 after a warm-up; CPU: process time of one run.",
        "",
        "| case | wall s | CPU s |",
        "|---|---|---|",
    ]
    for name, fn in cases:
        wall = best_of(fn, REPEATS)
        lines.append(f"| {name} | {wall:.3f} | {cpu_s(fn):.3f} |")
        print(lines[-1])
    DOC.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
