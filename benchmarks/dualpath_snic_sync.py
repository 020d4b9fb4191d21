"""Why DualPath's prefill-only split (``dual_split: 0``) reads a higher P90 TTFT in the closed form than in the
simulator under the agent preset's *fixed* think time (docs/prefix_cache.md §10, *The prefill-only row*): the storage
NICs' arrivals, not their model; and why a GI/G/1 correction by the arrivals' c² cannot price it.

The case is ``benchmarks/dualpath_closed_form_vs_sim.py``'s ``prefill-only`` (examples/agent-dualpath.yaml with
``read_paths: dual``, ``dual_split: 0``: every hit read over its prefill node's storage NIC, 0.7 × the closed form's
goodput nominal, 256-token cache blocks, seed 0), run with the think time fixed (the preset's 11.6 s) and uniform on
11.6 ± 2 s, each from two stationary starts (:func:`pdplan.sim.reuse.simulate_reuse`'s ``turn_latency_s``): ``zero``
(the benchmark's, sessions placed as if turns took no time) and ``own`` (placed with the run's mean turn latency,
:data:`OWN_LATENCY_S`, measured: the mean end-to-end latency of the zero-start runs, 3.33–3.35 s).

Per prefill node's SNIC (a FCFS server, the first hop of a read, :class:`pdplan.sim.storage_paths.StorageReads`; its
log holds each read's issue time and SNIC service), over the counted window:

* the arrivals: their count, the gaps' c², the index of dispersion of counts in 1 s and 5 s windows (IDC: 1 for a
  Poisson stream, above for bursts, below for a smoothed stream), and ρ;
* the wait: the simulator's (a Lindley recursion on its issue times and services, which is the server), P(W = 0)
  against 1 − ρ, the mean and P90; the window's services in their order behind a Poisson stream of the window's
  rate (Lindley again: what the closed form's M/G/1 assumes, with the same services); Pollaczek–Khinchine's mean
  ``ρ/(1 − ρ)·E[S²]/(2E[S])``; and the GI/G/1 mean a renewal correction would give, Kingman's
  ``PK·(c_a² + c_s²)/(1 + c_s²)`` with the measured gap c².

And the closed form's TTFT P90 at each run's offered rate against the simulator's.

Run: ``python benchmarks/dualpath_snic_sync.py [--requests N]`` (four simulations, ~2 min of CPU); prints a Markdown
table (docs/prefix_cache.md §10 records its output).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dualpath_closed_form_vs_sim as dp

import pdplan.sim.reuse as reuse_module
from pdplan.evaluation.evaluate import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.serving.build import build_model
from pdplan.serving.resolve import resolve
from pdplan.sim.prefill import lindley_done_s
from pdplan.sim.reuse import ReuseResult, simulate_reuse
from pdplan.sim.reuse_setup import reuse_inputs
from pdplan.sim.storage_paths import StorageReads

OWN_LATENCY_S = 3.34
"""The run's mean turn latency for the ``own`` start: the zero-start runs' mean end-to-end latency (3.33–3.35 s)."""
N_REQUESTS = 4000


class _Recorded(StorageReads):
    """The run's :class:`StorageReads`, kept for its log (the simulator builds one per run)."""

    last: StorageReads | None = None

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        _Recorded.last = self


def _run(think: str, start: str, requests: int) -> tuple[ReuseResult, StorageReads, float]:
    sc = dp.scenario(0.0, think=think)
    rate = dp.RATE_SHARE * evaluate(sc).goodput_rps
    model = build_model(resolve(sc, open_catalog()))
    inputs = reuse_inputs(model, rate)
    setattr(reuse_module, "StorageReads", _Recorded)  # noqa: B010 (the run builds its reads from this name)
    latency = 0.0 if start == "zero" else OWN_LATENCY_S
    run = simulate_reuse(
        model, sc.workload, inputs.layout, rate_rps=rate, routing=inputs.routing,
        exposed_load_s=inputs.exposed_load_s, n_requests=requests, seed=0, block_tokens=dp.BLOCK_TOKENS,
        turn_latency_s=latency,
    )  # fmt: skip
    assert _Recorded.last is not None
    closed = evaluate(sc, rate=run.offered_rps)
    assert closed.operating_point is not None
    return run, _Recorded.last, closed.operating_point.ttft_s.p90


def _idc(times: np.ndarray, window: tuple[float, float], width_s: float) -> float:
    counts = np.histogram(times, bins=np.arange(window[0], window[1], width_s))[0]
    return float(counts.var() / counts.mean())


def _node_rows(reads: StorageReads, window: tuple[float, float], rng: np.random.Generator) -> list[str]:
    rows = []
    log = [(t, i, s) for t, kind, i, s in reads.log if kind == "PE SNIC"]
    for node in sorted({i for _, i, _ in log}):
        a = np.array([t for t, i, _ in log if i == node])
        s = np.array([x for _, i, x in log if i == node])
        order = np.argsort(a, kind="stable")
        a, s = a[order], s[order]
        keep = (a >= window[0]) & (a < window[1])
        wait = (lindley_done_s(a, s) - s - a)[keep]
        sk, gaps = s[keep], np.diff(a[keep])
        poisson = window[0] + np.cumsum(rng.exponential((window[1] - window[0]) / sk.size, sk.size))
        wait_p = lindley_done_s(poisson, sk) - sk - poisson  # the window's services behind Poisson arrivals
        rho = float(sk.sum() / (window[1] - window[0]))
        cs2, ca2 = float(sk.var() / sk.mean() ** 2), float(gaps.var() / gaps.mean() ** 2)
        pk = rho / (1 - rho) * float((sk**2).mean() / (2 * sk.mean()))
        kingman = pk * (ca2 + cs2) / (1 + cs2)
        idc = f"{_idc(a[keep], window, 1.0):.2f} | {_idc(a[keep], window, 5.0):.2f}"
        waits = (
            f"{1e3 * wait.mean():.1f} / {1e3 * np.percentile(wait, 90):.0f} | "
            f"{1e3 * wait_p.mean():.1f} / {1e3 * np.percentile(wait_p, 90):.0f}"
        )
        zero = f"{(wait <= 1e-12).mean():.2f} ({1 - rho:.2f})"
        rows.append(
            f"{node} | {keep.sum()} | {ca2:.2f} | {idc} | {rho:.3f} | {zero} | {waits} | {1e3 * pk:.1f} | "
            f"{1e3 * kingman:.1f}"
        )
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=N_REQUESTS)
    args = parser.parse_args(argv)
    start_cpu = time.process_time()
    rng = np.random.default_rng(1)
    print(
        "| think | start | offered (req/s) | TTFT P90 closed / sim (ms) | node | reads | gap c² | IDC 1 s | IDC 5 s "
        "| ρ | P(W = 0) (1 − ρ) | wait mean / P90, sim (ms) | Poisson arrivals | PK mean | Kingman, c_a² |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for think in ("fixed", "uniform"):
        for start in ("zero", "own"):
            run, reads, closed_p90 = _run(think, start, args.requests)
            warm = run.run.warmup_count
            sim_p90 = float(np.percentile(run.ttft_s[warm:], 90))
            head = f"{think} | {start} | {run.offered_rps:.2f} | {1e3 * closed_p90:.0f} / {1e3 * sim_p90:.0f} |"
            for row in _node_rows(reads, run.run.window_s, rng):
                print(f"| {head} {row} |")
            sys.stdout.flush()
    print(f"\nCPU time: {time.process_time() - start_cpu:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
