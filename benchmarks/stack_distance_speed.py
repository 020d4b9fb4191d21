"""Speed of the exact prefix-cache curve and accuracy of the closed forms against it (pdplan/cache).

* **Speed**: :func:`pdplan.cache.stack_distance.hit_ratio_curve` on a Mooncake-like trace of 1,000,000 requests
  (about 15.8 blocks each: a Zipf-popular shared system prefix of 4 blocks, then the session's history, multi-turn
  sessions with geometric turns and appends, exponential think times), and on the Mooncake FAST'25 synthetic trace
  vendored in tests/data/mooncake. Wall: best of 3 after a warm-up; CPU: process time of one run; cold: the first
  call in this process (it also pays the first touch of ~1 GB of fresh memory). The machine is shared with other
  jobs, so the load average is printed beside the figures and the CPU column is the one to compare.
* **Accuracy**: the closed forms (pdplan/cache/lru_closed_form.py) against the exact LRU on traces drawn from the
  same workloads (pdplan/cache/synthetic.py): the largest absolute token-hit-ratio error over a sweep of capacities.

Run: ``python benchmarks/stack_distance_speed.py`` — rewrites the generated block of docs/prefix_cache.md.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from timing import best_of

from pdplan.cache.lru_closed_form import (
    SessionWorkload,
    SharedPrefixWorkload,
    ThinkTime,
    geometric_turns,
    session_cache,
    shared_prefix_cache,
    zipf_popularity,
)
from pdplan.cache.stack_distance import hit_ratio_curve, previous_access
from pdplan.cache.synthetic import session_traces, shared_prefix_trace
from pdplan.cache.trace import BlockTrace

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "prefix_cache.md"
TRACE = ROOT / "tests" / "data" / "mooncake" / "synthetic_trace.jsonl.gz"
BEGIN, END = "<!-- BEGIN stack_distance_speed -->", "<!-- END stack_distance_speed -->"
BLOCK = 16


def mooncake_like(n_requests: int, seed: int = 1) -> BlockTrace:
    """Requests of multi-turn sessions (geometric turns, mean 4; appends geometric, mean 3 blocks) that all start with
    one of 1,000 shared 4-block system prefixes (Zipf s = 1), sessions arriving at 50/s, think times exponential with
    mean 60 s; requests in arrival order."""
    rng = np.random.default_rng(seed)
    prefixes, prefix_blocks = 1000, 4
    n_sessions = int(n_requests / 4.0 * 1.1) + 10
    turns = rng.geometric(0.25, n_sessions)
    popularity = np.asarray(zipf_popularity(prefixes, 1.0))
    prefix = rng.choice(prefixes, n_sessions, p=popularity)
    start = np.sort(rng.uniform(0.0, n_sessions / 50.0, n_sessions))
    session = np.repeat(np.arange(n_sessions), turns)
    first = np.concatenate(([0], np.cumsum(turns)[:-1]))
    gaps = rng.exponential(60.0, len(session))
    gaps[np.arange(len(session)) == first[session]] = 0.0
    elapsed = np.cumsum(gaps)
    arrival = start[session] + elapsed - elapsed[first[session]]
    append = rng.geometric(1 / 3.0, len(session))
    total = np.cumsum(append)
    history = total - (total[first[session]] - append[first[session]])  # blocks appended so far in the session
    order = np.argsort(arrival, kind="stable")[:n_requests]
    lengths = prefix_blocks + history[order]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    within = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    owner = np.repeat(session[order], lengths)
    ids = np.where(
        within < prefix_blocks,
        prefix[owner] * prefix_blocks + within,
        prefixes * prefix_blocks + owner * 100_000 + within,
    )
    return BlockTrace(offsets, ids.astype(np.int64), 512)


def mooncake_synthetic() -> BlockTrace:
    with gzip.open(TRACE, "rt") as handle:
        rows = sorted((json.loads(line) for line in handle), key=lambda row: row["timestamp"])
    offsets = np.concatenate(([0], np.cumsum([len(r["hash_ids"]) for r in rows]))).astype(np.int64)
    ids = np.array([h for r in rows for h in r["hash_ids"]], dtype=np.int64)
    return BlockTrace(offsets, ids, 512, prompt_tokens=np.array([r["input_length"] for r in rows]))


def count_heads(ids: np.ndarray, offsets: np.ndarray) -> int:  # type: ignore[type-arg]
    """Reuses that start a run (pdplan/cache/stack_distance.py): the elements of the dominance count."""
    prev = previous_access(ids)
    continues = np.zeros(len(ids), bool)
    continues[1:] = (prev[1:] == prev[:-1] + 1) & (prev[:-1] >= 0)
    continues[offsets[:-1][offsets[:-1] < len(ids)]] = False
    return int(np.sum((prev >= 0) & ~continues))


def speed_rows() -> list[str]:
    rows = []
    cases = (
        ("Mooncake-like, 1,000,000 requests", mooncake_like(1_000_000)),
        ("Mooncake FAST'25 synthetic trace (3,993 requests)", mooncake_synthetic()),
    )
    for label, trace in cases:
        start = time.perf_counter()
        hit_ratio_curve(trace)
        cold = time.perf_counter() - start
        wall = best_of(lambda trace=trace: hit_ratio_curve(trace), repeats=3)
        cpu_start = time.process_time()
        hit_ratio_curve(trace)
        cpu = time.process_time() - cpu_start
        ids, offsets = np.asarray(trace.block_ids), np.asarray(trace.offsets)
        sort_cpu = best_of(lambda ids=ids: previous_access(ids), repeats=3, clock=time.process_time)
        heads = count_heads(ids, offsets)
        blocks = len(ids)
        rows.append(
            f"| {label} | {blocks:,} | {heads:,} ({heads / trace.n_requests:.2f} per request) | {cold:.2f} | "
            f"{wall:.2f} | {cpu:.2f} | {sort_cpu:.2f} |"
        )
    return rows


def session_errors() -> list[str]:
    rows = []
    laws = (ThinkTime("exponential", 60.0), ThinkTime("lognormal", 60.0, 1.0), ThinkTime("fixed", 60.0))
    for law in laws:
        workload = SessionWorkload(2.0, geometric_turns(4.0, 30), 2 * BLOCK, 2 * BLOCK, BLOCK, law, 5.0)
        for routing, instances, partial in (("session-affine", 1, True), ("random", 4, True), ("random", 4, False)):
            traces = session_traces(workload, 30_000, BLOCK, instances=instances, routing=routing, seed=1)  # type: ignore[arg-type]
            curves = [hit_ratio_curve(t) for t in traces]
            total = sum(c.total_tokens for c in curves)
            worst, where = 0.0, 0.0
            for blocks in (250, 500, 1000, 2000, 5000, 10000, 20000):
                exact = sum(c.hit_tokens_at(blocks).item() for c in curves) / total
                closed = session_cache(
                    workload,
                    blocks * BLOCK,
                    instances=instances,
                    routing=routing,
                    partial_hits=partial,  # type: ignore[arg-type]
                ).token_hit_ratio
                if abs(closed - exact) > worst:
                    worst, where = abs(closed - exact), blocks
            model = routing if routing == "session-affine" else ("random" if partial else "random, previous turn only")
            turns = sum(t.n_requests for t in traces)
            rows.append(
                f"| sessions, {law.kind} think | {model} (N = {instances}) | {turns:,} | {worst:.3f} | {where:,} |"
            )
    return rows


def prefix_errors() -> list[str]:
    rows = []
    for count, exponent in ((100, 0.0), (1000, 0.8), (1000, 1.2), (10000, 1.0)):
        lengths = tuple(float(BLOCK * (1 + j % 8)) for j in range(count))
        workload = SharedPrefixWorkload(10.0, lengths, zipf_popularity(count, exponent), BLOCK, BLOCK)
        curve = hit_ratio_curve(shared_prefix_trace(workload, 100_000, BLOCK, seed=2))
        everything = sum(lengths) / BLOCK
        worst, where = 0.0, 0.0
        for fraction in (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0):
            exact = curve.token_hit_ratio(fraction * everything).item()
            closed = shared_prefix_cache(workload, fraction * everything * BLOCK).token_hit_ratio
            if abs(closed - exact) > worst:
                worst, where = abs(closed - exact), fraction
        rows.append(f"| shared prefixes, P = {count:,}, Zipf s = {exponent:g} | 100,000 | {worst:.3f} | {where:g} |")
    return rows


def trace_rows() -> list[str]:
    curve = hit_ratio_curve(mooncake_synthetic())
    best = curve.compulsory_token_hit_ratio
    cells = [f"{curve.token_hit_ratio_at_tokens(t).item():.3f}" for t in (1e6, 3e6, 1e7, 5e7)]
    per_request = float(curve.mean_request_token_hit_ratio(np.inf).item())
    return [f"| {best:.3f} | {per_request:.3f} | " + " | ".join(cells) + " |"]


def render() -> str:
    load = os.getloadavg()
    lines = [
        BEGIN,
        f"Generated by `python benchmarks/stack_distance_speed.py` on {os.cpu_count()} cores, Python "
        f"{sys.version.split()[0]}, numpy {np.__version__}; load average {load[0]:.1f} / {load[1]:.1f} (1 / 5 min) "
        "while it ran: other jobs shared the cores.",
        "",
        "**Speed of the exact curve** (seconds; cold = first call in the process; wall = best of 3 after a warm-up; "
        "CPU = process time of one call; sort = CPU of the previous-access sort alone):",
        "",
        "| trace | accesses | heads (dominance elements) | cold | wall | CPU | sort |",
        "|---|---|---|---|---|---|---|",
        *speed_rows(),
        "",
        "**Closed form against the exact LRU** (largest absolute error of the token hit ratio over capacities of "
        "250 to 20,000 blocks of 16 tokens; 30,000 sessions, 2 sessions/s, geometric turns of mean 4, system 2, "
        "append 2 and output 1 blocks, turn duration 5 s, think mean 60 s, lognormal σ = 1):",
        "",
        "| workload | routing | turns | max abs error | at capacity (blocks) |",
        "|---|---|---|---|---|",
        *session_errors(),
        "",
        "| workload (10 requests/s, prefix 1-8 blocks, question 1 and output 1 block) | requests | max abs error | "
        "at capacity (x all prefix blocks) |",
        "|---|---|---|---|",
        *prefix_errors(),
        "",
        "**Mooncake FAST'25 synthetic trace** (token hit ratio of one LRU; the paper's Table 2 gives a cache ratio of "
        "66 %, §5.3.1 a 3M-token cache below half the maximum and 50M tokens near it):",
        "",
        "| compulsory bound (tokens) | mean per request | 1M tokens | 3M tokens | 10M tokens | 50M tokens |",
        "|---|---|---|---|---|---|",
        *trace_rows(),
        END,
    ]
    return "\n".join(lines)


def main() -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + render() + tail)
    print(render())


if __name__ == "__main__":
    main()
