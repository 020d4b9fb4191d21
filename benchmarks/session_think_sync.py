"""Why the grid's 4-turn sessions with a *fixed* 30 s think time read a higher P90 TTFT in the closed form than in
the simulator (docs/prefix_cache.md §9, "Fixed think times"): the prefill queue's arrivals, not its model.

The grid case ``sess-4turn-fixed-30s`` (``benchmarks/reuse_closed_form_vs_sim.py``: Llama-3.1-8B, H100, 2P1D over
IB NDR, affinity routing, HBM + 2 TiB host DRAM; 4 turns of 1,500 new and 200 output tokens, think time exactly 30 s)
is run as the grid runs it (0.7 × the closed form's goodput, 8,000 requests, seed 0), and then:

1. **The prefill wait, three ways, on each prefill instance.** The simulator's own wait (prefill end − arrival − the
   turn's service, which is one number per turn here: fixed lengths, the DRAM load hidden layer by layer); a Lindley
   recursion ``W_{k+1} = max(0, W_k + S_k − A_{k+1})`` (:func:`pdplan.sim.prefill.lindley_done_s`) on the
   simulator's own arrival times and services (it must reproduce the simulator: the instance is one FCFS server);
   the same recursion with the arrivals replaced by a Poisson stream of the same rate, which is what the closed
   form's M/G/1 queue assumes (Pollaczek–Khinchine).
2. **The same workload with an exponential think time of mean 30 s**, closed form against simulator.

What it shows (recorded in docs/prefix_cache.md §9): the instance's arrivals are Poisson-like in their counts (gap
c² 0.93–1.05) yet wait a third less than Poisson arrivals would. With a fixed think time and fixed output lengths,
two sessions whose turns collide at a prefill instance decode in the same decode batches (one decode instance), so
they finish their turns as far apart as their prefills ended, and return a fixed 30 s later *already spaced by the
first one's service*: the collision cancels itself at every later turn. A renewal (or QNA) description of the
arrivals cannot see this; an exponential think time breaks the synchrony and the closed form agrees again.

Run: ``python benchmarks/session_think_sync.py`` (about 10 s of CPU).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reuse_closed_form_vs_sim as grid

from pdplan.sim.prefill import lindley_done_s

CASE = "sess-4turn-fixed-30s"
EXPONENTIAL_CASE = "sess-4turn-exp-30s"
grid.WORKLOADS[EXPONENTIAL_CASE] = grid._sessions(
    grid._fixed(4), grid._fixed(1500), grid._fixed(200), {"dist": "exponential", "mean": "30s"}
)


def queue_check() -> None:
    """Step 1 of the module docstring, one line per prefill instance."""
    sc = grid.scenario(CASE, "affinity", True, "2P1D")
    rate = grid.RATE_SHARE * grid.evaluate(sc).goodput_rps
    sim = grid._reuse_run(sc, rate, 8000, rate)
    run, warm = sim.run, sim.run.warmup_count
    pre = run.prefill_done_s - run.arrival_s
    service = np.zeros(pre.size)
    counted = np.arange(pre.size) >= warm
    for t in np.unique(sim.turn):  # fixed lengths: one service per turn, the fastest counted prefill of that turn
        service[sim.turn == t] = pre[(sim.turn == t) & counted].min()
    rng = np.random.default_rng(1)
    print(f"{CASE} affinity hbm+dram 2P1D at {rate:.3g} req/s (offered {sim.offered_rps:.3g})")
    print("| instance | arrivals | gap c² | ρ | wait, simulator (ms) | Lindley, its arrivals | Lindley, Poisson |")
    print("|---|---|---|---|---|---|---|")
    for i in np.unique(sim.prefill_instance):
        idx = np.flatnonzero(sim.prefill_instance == i)
        idx = idx[np.argsort(run.arrival_s[idx], kind="stable")]
        a, s, keep = run.arrival_s[idx], service[idx], idx >= warm
        gaps = np.diff(a[keep])
        poisson = a[0] + np.cumsum(rng.exponential((a[-1] - a[0]) / a.size, a.size))
        own, pois = (lindley_done_s(a, s) - s - a)[keep], (lindley_done_s(poisson, s) - s - poisson)[keep]
        rho = s[keep].sum() / (a[keep][-1] - a[keep][0])
        cells = f"{1e3 * (pre[idx] - s)[keep].mean():.2f} | {1e3 * own.mean():.2f} | {1e3 * pois.mean():.2f}"
        print(f"| {i} | {keep.sum()} | {gaps.var() / gaps.mean() ** 2:.2f} | {rho:.3f} | {cells} |")


def think_time_check() -> None:
    """Step 2: both think-time laws, closed form against simulator (the grid's rows)."""
    print("\n| think time | quantity | closed form | simulated | error |")
    print("|---|---|---|---|---|")
    for name, label in ((CASE, "fixed 30 s"), (EXPONENTIAL_CASE, "exponential, mean 30 s")):
        case = grid.run_case(grid.scenario(name, "affinity", True, "2P1D"), 8000, False)
        for quantity, closed, sim in grid.rows(case):
            if quantity in ("ttft_p90_ms", "tpot_p90_ms") and closed and sim:
                print(f"| {label} | {quantity} | {closed:.4g} | {sim:.4g} | {100 * (closed / sim - 1):+.1f} % |")


if __name__ == "__main__":
    queue_check()
    think_time_check()
