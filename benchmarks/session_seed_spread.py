"""How much one simulation's hit ratios move with its seed, against the closed form at each run's offered rate.

docs/prefix_cache.md §9 compares the closed form with one simulation per case (seed 0, 8,000 requests). A session
stream's sample is small for its cache: about 2,600 sessions of geometric turns (mean 3.1) whose new and output
tokens are lognormal (σ = 1), so the prompt tokens a run hits are a few hundred long histories' worth, and the
offered rate itself moves by several per cent with the seed (:mod:`pdplan.sim.reuse_sessions`, Common random
numbers). This script runs the spread long-history sessions on 2P1D (the grid's ``sess-geo-spread-long`` cases,
:mod:`reuse_closed_form_vs_sim`) at the grid's nominal rate (0.7 × the closed form's goodput) with seeds 0..S−1, each
run at its own turn latency (``turn_latency_s=None``), and evaluates the closed form at each run's offered rate, as
the grid does. Per case and tier it prints the simulated hit ratio, the closed form's and the error per seed, then
the mean error, the seeds' standard deviation of the simulated / closed ratio and the range.

Run: ``python benchmarks/session_seed_spread.py [--seeds 4] [--rate-factors 1] [--requests 8000]`` (about 10 s a
run on one core).
"""

from __future__ import annotations

import argparse
import statistics
import time

from reuse_closed_form_vs_sim import RATE_SHARE, scenario

from pdplan.evaluation.evaluate import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.serving.build import build_model
from pdplan.serving.resolve import resolve
from pdplan.sim.compare import WARMUP_FRACTION
from pdplan.sim.reuse import simulate_reuse
from pdplan.sim.reuse_setup import reuse_inputs

CASES = (("affinity", False), ("affinity", True), ("load-balance", False), ("load-balance", True))
WORKLOAD = "sess-geo-spread-long"


Row = tuple[str, float, dict[str, float], dict[str, float]]


def case_rows(routing: str, dram: bool, seeds: int, factors: list[float], requests: int) -> list[Row]:
    """(run label, offered rate, simulated hit ratio per tier and ``all``, closed form's at that offered rate) per
    seed and nominal-rate factor."""
    sc = scenario(WORKLOAD, routing, dram, "2P1D")
    model = build_model(resolve(sc, open_catalog()))
    rate = RATE_SHARE * evaluate(sc).goodput_rps
    inputs = reuse_inputs(model, rate)
    out = []
    for seed, factor in ((s, f) for s in range(seeds) for f in factors):
        run = simulate_reuse(model, sc.workload, inputs.layout, rate_rps=rate * factor, routing=inputs.routing,
                             exposed_load_s=inputs.exposed_load_s, n_requests=requests, seed=seed, step="linear",
                             warmup_fraction=WARMUP_FRACTION, placement=inputs.placement,
                             turn_latency_s=None)  # fmt: skip
        offered = run.offered_rps
        cache = evaluate(sc, rate=offered).cache
        assert cache is not None
        sim = {t.name: t.token_hit_ratio for t in run.tiers} | {"all": run.token_hit_ratio}
        closed = {t.name: t.token_hit_ratio for t in cache.tiers} | {"all": cache.token_hit_ratio}
        out.append((f"{seed}" + ("" if factor == 1.0 else f" ×{factor:g}"), offered, sim, closed))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--rate-factors", default="1", help="nominal rates as factors of the grid's, comma-separated")
    args = parser.parse_args()
    start = time.perf_counter()
    print("| case | tier | seed (× nominal rate) | offered req/s | simulated | closed form | error |")
    print("|---|---|---|---|---|---|---|")
    summary = []
    for routing, dram in CASES:
        factors = [float(f) for f in args.rate_factors.split(",")]
        rows = case_rows(routing, dram, args.seeds, factors, args.requests)
        name = f"{WORKLOAD} {routing} {'hbm+dram' if dram else 'hbm'} 2P1D"
        for tier in rows[0][2]:
            if tier == "all" and len(rows[0][2]) == 2:
                continue  # HBM only: the tier is the whole
            errors = [closed[tier] / sim[tier] - 1.0 for _, _, sim, closed in rows]
            ratios = [sim[tier] / closed[tier] for _, _, sim, closed in rows]
            for (seed, offered, sim, closed), err in zip(rows, errors, strict=True):
                cells = f"{offered:.2f} | {sim[tier]:.4f} | {closed[tier]:.4f} | {err:+.1%}"
                print(f"| {name} | {tier} | {seed} | {cells} |")
            sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
            summary.append(f"| {name} | {tier} | {statistics.mean(errors):+.1%} | {min(errors):+.1%} … "
                           f"{max(errors):+.1%} | {sd:.1%} |")  # fmt: skip
    print("\n| case | tier | mean error | range over seeds | sd of simulated / closed |")
    print("|---|---|---|---|---|")
    print("\n".join(summary))
    runs = f"{args.seeds} seeds × rate factors {args.rate_factors} × {args.requests:,} requests"
    print(f"\n{runs}, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
