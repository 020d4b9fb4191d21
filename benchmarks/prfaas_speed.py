"""Speed of the PrfaaS model and of the PrfaaS search (``optimize`` with a ``prfaas:`` block).

Cases, on examples/prfaas-h200-h20.yaml (the paper's case-study shape, measured profiles) and
examples/prfaas-h200-h100.yaml (Qwen3-Next on pdplan's roofline):

* ``threshold search``: one goodput-maximising threshold (a log-spaced scan, then bounded Brent over log t, each
  step a goodput root on the per-path queueing model) — what the search pays per candidate it evaluates exactly;
* ``Eq. 8 split search``: the capacity-only N_p/N_d split over 8 local instances, each with its Eq. 7 threshold;
* ``evaluate_prfaas``: the whole evaluate section (searched threshold, Eq. 7 optimum, both baselines, link x0.5/x2);
* ``optimize``: the PrfaaS search with the threshold searched, as the table view runs it (``analyse=False``) and
  as Markdown/JSON run it (``analyse=True``: the pick's link x0.5/x2 re-searches too);
* ``pdplan optimize`` end to end: the CLI in a subprocess, its CPU seconds (user + sys, imports included).

Issue target: a PrfaaS optimize with the threshold searched under 2 s on 2 cores. The helper machine is shared
(several agents on 2 cores), so wall-clock times there are inflated: the CPU column (process time of one run) is
the figure to compare. Run: ``python benchmarks/prfaas_speed.py`` — rewrites docs/prfaas.md.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

from timing import best_of

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.search.optimize import optimize
from pdplan.serving.prfaas.build import prfaas_setup
from pdplan.serving.prfaas.capacity import search_split
from pdplan.serving.prfaas.evaluate import THRESHOLD_XATOL_TOKENS, evaluate_prfaas
from pdplan.serving.prfaas.queue import search_goodput_threshold
from pdplan.serving.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "prfaas.md"
REPEATS = 3
H20, H100 = (ROOT / "examples" / f"prfaas-h200-{g}.yaml" for g in ("h20", "h100"))


def cpu_s(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def cli_cpu_s(path: Path) -> float:
    """User + sys seconds of ``pdplan optimize PATH`` in a fresh interpreter (imports included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "pdplan", "optimize", str(path)], check=True, capture_output=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cases() -> list[tuple[str, Callable[[], object]]]:
    catalog = open_catalog()
    sc = load_scenario(H20)
    res = resolve(sc, catalog)
    setup = prfaas_setup(res)
    slo = sc.slo
    sc100 = load_scenario(H100)
    return [
        (
            "threshold search (h20)",
            lambda: search_goodput_threshold(setup, slo.ttft, slo.attainment, THRESHOLD_XATOL_TOKENS),
        ),
        ("Eq. 8 split search, 8 local (h20)", lambda: search_split(setup.capacity, 8)),
        ("evaluate_prfaas, whole section (h20)", lambda: evaluate_prfaas(res)),
        ("optimize, table view (h20)", lambda: optimize(sc, catalog=catalog, analyse=False)),
        ("optimize, Markdown/JSON view (h20)", lambda: optimize(sc, catalog=catalog, analyse=True)),
        ("optimize, table view (h100, roofline)", lambda: optimize(sc100, catalog=catalog, analyse=False)),
        ("optimize, Markdown/JSON view (h100, roofline)", lambda: optimize(sc100, catalog=catalog, analyse=True)),
    ]


def main() -> None:
    lines = [
        "# PrfaaS model and search speed",
        "",
        "`python benchmarks/prfaas_speed.py` (one process, numpy threads as configured). Wall: best of 3 after a",
        "warm-up; CPU: process time of one run. Each run re-resolves nothing but what the case names (the catalogue",
        "and scenario are loaded once); `optimize` cases include resolving the scenario and the whole search.",
        "",
        "| case | wall s | CPU s |",
        "|---|---|---|",
    ]
    for name, fn in cases():
        wall = best_of(fn, REPEATS)
        lines.append(f"| {name} | {wall:.3f} | {cpu_s(fn):.3f} |")
        print(lines[-1])
    cli_s: dict[str, float] = {}
    for path in (H20, H100, ROOT / "examples" / "default.yaml"):
        cli = cli_s[str(path.relative_to(ROOT))] = min(cli_cpu_s(path) for _ in range(REPEATS))
        lines.append(f"| `pdplan optimize {path.relative_to(ROOT)}` end to end (subprocess) | — | {cli:.3f} |")
        print(lines[-1])
    lines += ["", *notes(cli_s)]
    DOC.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {DOC}")


def notes(cli_s: dict[str, float]) -> list[str]:
    """The hand-written reading of the run, with the end-to-end figures it was written against filled in."""
    h20, default = cli_s["examples/prfaas-h200-h20.yaml"], cli_s["examples/default.yaml"]
    verdict = "within" if h20 < 2.0 else "over"
    return [
        f"Recorded {date.today().isoformat()} on a 2-core machine; the CPU column is the figure to compare. The",
        "search itself (the `optimize` rows, table view) is well within the 2 s target; the end-to-end CLI rows add",
        "the interpreter start and the imports (SciPy's optimize package, pydantic, the serving model: about 1.1 s",
        "that every `pdplan optimize` pays; the dense default's row is there for comparison). End to end the",
        f"measured-profile example (h20) takes {h20:.2f} s of CPU, {verdict} the 2 s target (the dense default",
        f"{default:.2f} s). The Markdown/JSON view adds the pick's link x0.5/x2 threshold re-searches.",
        "",
        "What the search costs: every candidate (local split x remote count) is screened by its Eq. 7 capacity (no",
        "queueing); the best two (`pdplan.search.prfaas.EXACT_PLANS`) get the goodput-maximising threshold search:",
        "none when the SLO holds at t*'s capacity ceiling (decode binds: no threshold can do better), else a 6-point",
        "log-spaced scan and a bounded Brent search in log t (about 15 goodput roots, each bracketed around a",
        "neighbour's goodput); homogeneous PD's split is searched too only when homogeneous PD (one goodput root per",
        "split, branch and bound on capacity) beats both. Roofline prefill curves are memoised per token array, so",
        "the quadrature points a goodput root revisits at every rate are priced once.",
        "",
        "Accuracy (tests/reference/test_prfaas_published.py, arXiv 2604.15039 Table 6): t* 19,488 tokens (paper",
        "19.4K, +0.5 %), 49.4 % offloaded (49.6 %), E[L | L > t] 45.1K (≈ 44K), Λ_max 3.234 / 2.109 / 2.428 req/s",
        "(3.24 / 2.11 / 2.45), egress 12.1 Gb/s (≈ 13, −7 %). Table 3 (tests/reference/test_prfaas_kv_throughput.py),",
        "KV throughput ratios at 32K on 8×H200 from pdplan's own roofline: Qwen3-235B over Qwen3.5-397B 3.36× (paper",
        "4.04×, −17 %), MiniMax-M2.5 over MiMo-V2-Flash 11.98× (paper 12.86×, −7 %; both checkpoints priced in their",
        "FP8 block-scaled weights, MiniMax at EP 8 as the engines must load it), each within the ± 25 % tolerance.",
        "Nothing is tuned to Table 3.",
    ]


if __name__ == "__main__":
    main()
