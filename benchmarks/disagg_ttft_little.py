"""Where the disaggregated rows' TTFT goes (issue #23): Little's law on the measured numbers, the prefill pool's load,
the decode pool's seats and the decode routing, row by row.

For a closed loop of C clients with zero think time (aiperf ``--concurrency C``, docs/engines.md §3) every request
is either before its first token or decoding, so with D = (OSL − 1)·TPOT (aiperf's ITL definition, TPOT =
(latency − TTFT)/(OSL − 1)) Little's law gives, from the measured TTFT and TPOT alone:

* throughput ``X = C/(TTFT + D)``;
* requests decoding at once ``N_s = X·D`` and requests before their first token ``C − N_s = X·TTFT``;
* the prefill pool's utilisation ``X·S_p/m`` (S_p and m, the prefill servers, as pdplan prices them), which says
  whether the queue in front of the prefill, the one the closed loop models (:mod:`pdplan.benchmark.
  disaggregated_loop`), can carry the TTFT;
* ``TTFT/D``: a wait that scales with the decode time (the same ratio in two runs whose TPOT differs 2x) is a wait
  for a resource held for a whole decode, i.e. a decode seat, not a prefill or transfer time.

Then two checks that need no fitted term:

* **Decode routing** (TensorRT-LLM rows): pdplan pools the y decode workers' seats into one queue, which is what a
  router that keeps the workers balanced gives. A discrete-event run of the closed loop with y separate workers of B
  seats each (C = y·B, AIConfigurator's benchmark concurrency, ``generator/rule_plugin/benchmark/trtllm.rule`` at
  ai-dynamo/aiconfigurator 71bb3d00e), the measured decode time D and the priced prefill, routes each request
  round-robin (Dynamo's frontend default, ``--router-mode round-robin``) or uniformly at random, and reports the mean
  TTFT of the measured requests (after 2·C warm-up, 20·C measured; deterministic seeds, ±5 % uniform service
  jitter).
* **The prefill queue at the measured service time** (SGLang rows, one prefill server): the machine-repairman queue
  the loop uses (:func:`pdplan.benchmark.disaggregated_loop.finite_source`) with the measured TTFT at C ≤ 4 as the
  server's busy time per prompt (an upper bound: that TTFT also holds the hand-off and the first decode step), the
  rest of the cycle as the away time. If the measured TTFT at higher C follows, the queue is modelled and the miss is
  the priced service time; if it does not, something else waits.

Writes ``docs/disagg_ttft_little.md``. Run: ``python benchmarks/disagg_ttft_little.py`` (≈10 s).
"""

from __future__ import annotations

import argparse
import csv
import heapq
import random
import re
import statistics
import time
from pathlib import Path
from typing import Any

from data_root import SILICON_H100, calibration_path
from moe_rows import moe_rows, scenario_dict

from pdplan.benchmark.disaggregated_loop import batch_max, disagg_benchmark_of, disagg_loop_inputs, finite_source
from pdplan.errors import PdplanError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]
SILICON_H200 = "aiconfigurator-silicon/h200_sxm.csv"


def little(concurrency: int, osl: int, ttft_s: float, tpot_s: float) -> tuple[float, float, float]:
    """(X, N_s, TTFT/D) of a closed loop from its measured TTFT and TPOT (module docstring). Example: C = 6, OSL =
    1,024, TTFT = 12.345 s, TPOT = 14.014 ms: D = 14.336 s, X = 6/26.681 = 0.2249 req/s, N_s = 3.224, TTFT/D = 0.861.
    """
    decode_s = (osl - 1) * tpot_s
    rate = concurrency / (ttft_s + decode_s)
    return rate, rate * decode_s, ttft_s / decode_s


def routed_ttft_s(
    workers: int, seats: int, decode_s: float, prefill_s: float, servers: int, policy: str, seed: int
) -> float:
    """Mean TTFT (requests 2·C to 22·C) of C = workers·seats closed-loop clients: a prefill pool of ``servers`` FCFS
    servers (``prefill_s`` each), then a decode worker chosen round-robin (``rr``) or uniformly (``random``) with
    ``seats`` seats, FCFS behind them, decoding ``decode_s``; services jittered ±5 % (uniform). TTFT = send → seat."""
    rng = random.Random(seed)
    clients = workers * seats
    free_at = [0.0] * servers
    events: list[tuple[float, int, int, float]] = []  # (time, kind 0 = arrival at decode / 1 = departure, worker, sent)
    waiting: list[list[float]] = [[] for _ in range(workers)]
    busy = [0] * workers
    ttfts: list[float] = []
    turn = 0

    def send(now: float) -> None:
        nonlocal turn
        k = min(range(servers), key=free_at.__getitem__)
        free_at[k] = max(now, free_at[k]) + prefill_s * rng.uniform(0.95, 1.05)
        worker = turn % workers if policy == "rr" else rng.randrange(workers)
        turn += 1
        heapq.heappush(events, (free_at[k], 0, worker, now))

    def seat(worker: int, now: float, sent: float) -> None:
        busy[worker] += 1
        ttfts.append(now - sent)
        heapq.heappush(events, (now + decode_s * rng.uniform(0.95, 1.05), 1, worker, sent))

    for _ in range(clients):
        send(0.0)
    while len(ttfts) < 22 * clients:
        now, kind, worker, sent = heapq.heappop(events)
        if kind == 0:
            (seat(worker, now, sent) if busy[worker] < seats else waiting[worker].append(sent))
            continue
        busy[worker] -= 1
        if waiting[worker]:
            seat(worker, now, waiting[worker].pop(0))
        send(now)
    return statistics.fmean(ttfts[2 * clients : 22 * clients])


def priced(row: dict[str, Any], catalog: Any) -> dict[str, float] | None:
    """pdplan's prefill service S_p, servers m, decode seats y·B_max and benchmark TTFT for one row (None: not
    priceable)."""
    try:
        sc = scenario_from_dict(scenario_dict(row), source=row["id"], base_dir=ROOT)
        model = build_model(resolve(sc, catalog))
    except PdplanError:
        return None
    assert isinstance(model, DisaggregatedModel)
    inp = disagg_loop_inputs(model)
    bench = disagg_benchmark_of(model, row["concurrency"], None, None)
    return {
        "s_p": inp.prefill_service_s,
        "m": float(inp.servers),
        "seats": batch_max(inp) * inp.decode_instances,
        "ttft": bench.mean_ttft_s,
    }


def _distinct(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for r in sorted(rows, key=lambda r: (r["isl"], r["osl"], r["concurrency"], r["ttft_ms"])):
        key = (r["engine"], r["isl"], r["osl"], r["concurrency"], round(r["ttft_ms"], 3), round(r["tpot_ms"], 3))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def trtllm_section(rows: list[dict[str, Any]], catalog: Any) -> list[str]:
    """The TensorRT-LLM rows: Little's law, prefill load, seats, and the routing check."""
    out = [
        "## TensorRT-LLM DeepSeek-R1/V3, H100 (1 prefill worker TP1 DP16 EP16, 2-3 decode workers TP16 EP16)",
        "",
        "B is the CSV's `decode_batch_size` (the decode workers' `max_batch_size`, `benchmarks/moe_rows.py`). "
        "ρ_p = X·S_p/m at pdplan's prefill service.",
        "",
        "| ISL/OSL | C | y × B | TTFT meas / pred ms | TPOT ms | D s | X req/s | N_s (per worker) | C − N_s | "
        "TTFT/D | ρ_p | RR / random TTFT ms (DES) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = priced(r, catalog)
        ttft_s, tpot_s, c = r["ttft_ms"] / 1e3, r["tpot_ms"] / 1e3, r["concurrency"]
        x, n_s, ratio = little(c, r["osl"], ttft_s, tpot_s)
        y, b = r["decode"]["count"], r.get("decode_seats", 0)
        des = "-"
        if p is not None and b and y * b == c:
            d_s = (r["osl"] - 1) * tpot_s
            rr = routed_ttft_s(y, b, d_s, p["s_p"], int(p["m"]), "rr", 1)
            rand = statistics.fmean(routed_ttft_s(y, b, d_s, p["s_p"], int(p["m"]), "random", s) for s in (1, 2, 3))
            des = f"{rr * 1e3:,.0f} / {rand * 1e3:,.0f}"
        pred = f"{p['ttft'] * 1e3:,.0f}" if p else "-"
        rho = f"{x * p['s_p'] / p['m']:.3f}" if p else "-"
        out.append(
            f"| {r['isl']}/{r['osl']} | {c} | {y} × {b} | {r['ttft_ms']:,.0f} / {pred} | {r['tpot_ms']:.1f} | "
            f"{(r['osl'] - 1) * tpot_s:.1f} | {x:.3f} | {n_s:.1f} ({n_s / y:.2f}) | {c - n_s:.1f} | {ratio:.2f} | "
            f"{rho} | {des} |"
        )
    return out


def measured_only(path: Path, engine: str, title: str) -> list[str]:
    """Little's law on every disaggregated ``engine`` row of ``path`` that records worker counts (no pricing)."""
    out = [
        title,
        "",
        "Last column: the seat wait uniform random routing alone would add (the DES above with no prefill time; "
        "workers without attention DP only).",
        "",
        "| ISL/OSL | C | deployment: prefill, decode y × B × DP | TTFT ms | TPOT ms | N_s / C | N_s per decode "
        "worker (of B × DP) | TTFT/D | random-routing wait ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    table = {}
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            found = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
            if r["mode"] != "disagg" or r["backend"] != engine or not r["decode_num_workers"] or not found:
                continue
            c, osl = int(found.group(1)), int(r["osl"])
            y, b, dp = int(r["decode_num_workers"]), int(r["decode_batch_size"]), int(r["decode_attention_dp_size"])
            ttft_s, tpot_s = float(r["silicon_ttft_ms"]) / 1e3, float(r["silicon_tpot_ms"]) / 1e3
            _, n_s, ratio = little(c, osl, ttft_s, tpot_s)
            prefill = f"{r['prefill_num_workers']}P(TP{r['prefill_tp_size']} DP{r['prefill_attention_dp_size']})"
            key = (int(r["isl"]), osl, c, prefill, round(ttft_s, 2))
            rand = "-"
            if dp == 1 and y > 1:
                rand = f"{routed_ttft_s(y, b, (osl - 1) * tpot_s, 0.0, 1, 'random', 1) * 1e3:,.0f}"
            table[key] = (
                f"| {r['isl']}/{osl} | {c} | {prefill}, {y} × {b} × {dp} | {ttft_s * 1e3:,.0f} | {tpot_s * 1e3:.1f} | "
                f"{n_s / c:.2f} | {n_s / y:.1f} (of {b * dp}) | {ratio:.2f} | {rand} |"
            )
    return out + [table[k] for k in sorted(table)]


def sglang_section(rows: list[dict[str, Any]], catalog: Any) -> list[str]:
    """The SGLang 1P1D TP16 rows: Little's law and the prefill queue at the measured C ≤ 4 service time."""
    out = [
        "## SGLang DeepSeek-R1, H100, 1P1D TP16",
        "",
        "S_meas = the smallest measured TTFT at C ≤ 4 for that ISL/OSL (an upper bound on the prefill server's busy "
        "time per prompt). 'queue at S_meas' = S_meas + the machine-repairman wait with one server of S_meas and "
        "away time D (module docstring); ρ = X·S at pdplan's S_p and at S_meas.",
        "",
        "| ISL/OSL | C | TTFT meas / pred ms | N_s / C | ρ at S_p / S_meas | queue at S_meas ms |",
        "|---|---|---|---|---|---|",
    ]
    floor: dict[tuple[int, int], float] = {}
    for r in rows:
        if r["concurrency"] <= 4:
            key = (r["isl"], r["osl"])
            floor[key] = min(floor.get(key, 1e9), r["ttft_ms"] / 1e3)
    for r in rows:
        p = priced(r, catalog)
        c, ttft_s, tpot_s = r["concurrency"], r["ttft_ms"] / 1e3, r["tpot_ms"] / 1e3
        x, n_s, _ = little(c, r["osl"], ttft_s, tpot_s)
        s_meas = floor.get((r["isl"], r["osl"]))
        queue = "-"
        if s_meas is not None:
            _, wait = finite_source(1, c, s_meas, (r["osl"] - 1) * tpot_s)
            queue = f"{(wait + s_meas) * 1e3:,.0f}"
        rho_p = f"{x * p['s_p'] / p['m']:.2f}" if p else "-"
        rho_m = f"{x * s_meas:.2f}" if s_meas is not None else "-"
        pred = f"{p['ttft'] * 1e3:,.0f}" if p else "-"
        out.append(
            f"| {r['isl']}/{r['osl']} | {c} | {r['ttft_ms']:,.0f} / {pred} | {n_s / c:.2f} | {rho_p} / {rho_m} | "
            f"{queue} |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "disagg_ttft_little.md")
    args = ap.parse_args()
    start = time.perf_counter()
    catalog = open_catalog()
    todo, _ = moe_rows(calibration_path(SILICON_H100))
    disagg = _distinct([r for r in todo if r["mode"] == "disagg" and r["model"].startswith("deepseek")])
    trt = [r for r in disagg if r["engine"] == "trtllm"]
    sgl = [r for r in disagg if r["engine"] == "sglang"]
    lines = [
        "# Disaggregated TTFT: Little's law on the measured rows (issue #23)",
        "",
        "Generated by `benchmarks/disagg_ttft_little.py` (method in its docstring). Rows: the DeepSeek "
        "disaggregated rows of `aiconfigurator-silicon/h100_sxm.csv` that `benchmarks/moe_rows.py` prices, "
        "repeated measurements once; the H200 TensorRT-LLM rows with worker counts, measured only. "
        "Findings: docs/accuracy_engines.md (issue #23 bullet).",
        "",
        *trtllm_section(trt, catalog),
        "",
        *measured_only(
            calibration_path(SILICON_H200),
            "trtllm",
            "## TensorRT-LLM DeepSeek-R1, H200 (measured only; the same harness, one node per worker)",
        ),
        "",
        *sglang_section(sgl, catalog),
        "",
        f"Total {time.perf_counter() - start:.0f} s.",
    ]
    args.output.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
