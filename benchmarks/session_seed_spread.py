"""How much one simulation's hit ratios move with its seed, against the closed form at each run's offered rate.

docs/prefix_cache.md §9 compares the closed form with one simulation per case (seed 0, 8,000 requests). A session
stream's sample is small for its cache: about 2,600 sessions of geometric turns (mean 3.1) whose new and output
tokens are lognormal (σ = 1), so the prompt tokens a run hits are a few hundred long histories' worth, and the
offered rate itself moves by several per cent with the seed (:mod:`pdplan.sim.reuse_sessions`, Common random
numbers). This script runs the spread long-history sessions on 2P1D (the grid's ``sess-geo-spread-long`` cases,
:mod:`reuse_closed_form_vs_sim`) at the grid's nominal rate (0.7 × the closed form's goodput) with seeds 0..S−1, each
run at its own turn latency (``turn_latency_s=None``), and evaluates the closed form at each run's offered rate, as
the grid does. Per case and tier it prints the simulated hit ratio, the closed form's and the error per seed, then
the mean error, the seeds' standard deviation of the simulated / closed ratio and the range. ``--law-stream``
instead replays the law's own stream through an exact LRU of whole histories (:func:`law_stream`): the
characteristic-time approximation's own error for this workload, without the simulator.

Run: ``python benchmarks/session_seed_spread.py [--seeds 4] [--rate-factors 1] [--requests 8000]`` (about 10 s a
run on one core), or ``--law-stream`` (a few seconds).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import OrderedDict

import numpy as np
from reuse_closed_form_vs_sim import RATE_SHARE, scenario

from pdplan.evaluation.evaluate import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.cache_domain import prefill_domain
from pdplan.serving.prefix_cache import cache_classes
from pdplan.serving.resolve import resolve
from pdplan.sim.compare import WARMUP_FRACTION
from pdplan.sim.reuse import simulate_reuse
from pdplan.sim.reuse_setup import reuse_inputs
from pdplan.specs.workload import WorkloadSpec
from pdplan.workload.bins import sample

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


def law_stream(rate_rps: float, turn_s: float, sessions: int, window_s: tuple[float, float]) -> tuple[float, float]:
    """(exact LRU, closed form): the token hit ratio of one prefill instance's HBM over the workload law's own stream.

    Sessions start as a Poisson process at ``rate_rps / E[T]``, each with the law's turns, new and output tokens (the
    simulator's sampler) and think times; turn k + 1 arrives ``turn_s`` + Z after turn k, on one of the 2 instances
    at random, and looks its prompt up in that instance's LRU of whole histories (each the session's last prompt
    there, in whole blocks of 16 tokens, of the cache domain's HBM), which it then replaces. Counted: the turns
    arriving within ``window_s`` (after the caches fill, before the stream drains past the last session's start).
    The closed form is :func:`pdplan.serving.prefix_cache.cache_classes` at the same rate and turn duration."""
    sc = scenario(WORKLOAD, "load-balance", False, "2P1D")
    spec = sc.workload.sessions
    assert spec is not None
    res = with_cache_rate(resolve(sc, open_catalog()), rate_rps)
    domain = prefill_domain(res)
    assert res.cache is not None
    closed = cache_classes(res.cache, domain, res.lengths.input_tokens, rate_rps, turn_s).token_hit_ratio
    rng = np.random.default_rng(1)
    turns = rng.geometric(1.0 / spec.mean_turns(), sessions)
    lengths = WorkloadSpec.model_validate({"input_tokens": spec.new_tokens, "output_tokens": spec.output_tokens})
    new, out = sample(lengths, int(turns.sum()), rng)
    think = spec.think_time.ppf(rng.random(int(turns.sum())))
    starts = np.cumsum(rng.exponential(spec.mean_turns() / rate_rps, sessions))
    events, i = [], 0
    for session, (n, t) in enumerate(zip(turns.tolist(), starts.tolist(), strict=True)):
        prompt = 0
        for _ in range(n):
            prompt += int(new[i])
            events.append((t, session, prompt // 16, int(rng.integers(2))))
            prompt += int(out[i])
            t += turn_s + float(think[i])
            i += 1
    events.sort()
    capacity = domain.hbm_tokens / 16
    caches: list[OrderedDict[int, int]] = [OrderedDict(), OrderedDict()]
    used, hit, total = [0, 0], 0, 0
    for t, session, blocks, instance in events:
        cache = caches[instance]
        found = cache.pop(session, 0)
        if window_s[0] <= t < window_s[1]:
            hit, total = hit + min(found, blocks), total + blocks
        cache[session] = blocks
        used[instance] += blocks - found
        while used[instance] > capacity:
            used[instance] -= cache.popitem(last=False)[1]
    return hit / total, closed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--rate-factors", default="1", help="nominal rates as factors of the grid's, comma-separated")
    parser.add_argument("--law-stream", action="store_true", help="only the exact LRU over the law's stream")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.law_stream:
        exact, closed = law_stream(13.7, 4.14, 20_000, (600.0, 4400.0))
        print(f"law's stream, 13.7 req/s, turn 4.14 s: exact LRU {exact:.4f}, closed form {closed:.4f}")
        print(f"{time.perf_counter() - start:.0f} s")
        return
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
