"""The four cross-GPU misses of docs/cross_gpu_accuracy.md §9.3 that had no cause: their rows, one by one (issue #23).

Rows: both GPUs of AIConfigurator 0.12.0's end-to-end sample as ``benchmarks/cross_gpu_rows.py`` reads them, each
priced with its shipped profile (``cross_gpu_rows.price``'s benchmark: aiperf's 20·C measured requests after 2·C
warm-up). Errors are signed, ``pred/meas − 1``; a cell is median |error| / signed median in % over its rows. Four
tables, each for one miss, and the checks that find its cause:

1. **TensorRT-LLM MoE TPOT**: the rows per engine version, model, dump and recorded deployment; the Qwen3-235B rows
   per TP, ISL and C; and the twin check: rows of one file that record the same measurement (same ISL, OSL, C, TTFT
   and TPOT to every digit) under different deployments; the H200 DeepSeek-R1 TP8 runs by measured date (one
   engine version, two dates); and what a step carrying a prompt adds to the decodes riding beside it, from the
   Qwen3-235B TPOT at two OSLs (:func:`prompt_step_excess`), checked on the dense rows of the same harness.
2. **TensorRT-LLM disaggregated TPOT on H200**: the rows per decode worker layout (TP8 or attention DP8).
3. and 4. **Llama-3.1-70B TTFT, TensorRT-LLM (H200) and vLLM (both GPUs)**, the only rows of the 2026-04-06 dump
   among the dense groups: the TTFT at C ≤ 8 in units of the row's own prefill step S (one prompt's step beside
   the C_eff − 1 decodes riding, :func:`pdplan.benchmark.colocated_loop._context_step_s`), measured and priced, per
   harness, engine, model and ISL/OSL. The profiles' ``steady_arrivals: spread`` prices phase-locked clients: each
   arrival waits for the step in flight, its predecessor's prefill (plus the overlap scheduler's step on
   TensorRT-LLM), then its own, ≈ 2 S (vLLM) or 3 S (TensorRT-LLM). The *unlocked* column prices instead arrivals
   that fall at random in the cycle, as a harness whose clients are not phase-locked (varying lengths, a ramp)
   would give: the wait is the residual of the step in flight, E[S²]/(2·E[S]) over a cycle of C_eff prefill steps
   of length S and n + 1 − C_eff decode steps of length τ_d (n = OSL − 1; renewal theory's length-biased residual
   life), plus the overlap scheduler's extra decode step; the start-up burst, request overhead and server queue
   are the loop's own. It is a what-if, not a model: it names the regime these rows are in.

Writes ``docs/cross_gpu_misses.md``. Run: ``PDPLAN_CALIBRATION_DIR=... python benchmarks/cross_gpu_misses.py``
(≈20 s of CPU).
"""

from __future__ import annotations

import argparse
import csv
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from client_connections import client_ttft_s
from cross_gpu_rows import SILICON, read_gpu, row_scenario
from data_root import calibration_path

from pdplan.benchmark import colocated_loop as cl
from pdplan.benchmark.loop_inputs import loop_inputs
from pdplan.calibrate import silicon_rows
from pdplan.errors import PdplanError
from pdplan.io.catalog import Catalog, open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cross_gpu_misses.md"
OVERLAP_STEPS = {"trtllm": 1.0}
"""Extra steps an arrival misses under the overlap scheduler (the profiles' ``overlap_extra_steps``)."""


def priced(row: dict[str, Any], catalog: Catalog) -> dict[str, Any] | None:
    """The row with its shipped-profile prediction (``pttft``, ``ptpot`` ms) and, for a colocated row, the loop's
    pieces the checks need (ms); None where pdplan cannot price it."""
    try:
        sc = scenario_from_dict(row_scenario(row), source=row["id"], base_dir=Path.cwd())
        model = build_model(resolve(sc, catalog))
    except PdplanError:
        return None
    c = row["concurrency"]
    n = min(c, row.get("client_connections") or c)
    b = silicon_rows.aic_benchmark(model, c, n)
    out = {**row, "pttft": client_ttft_s(c, n, row["osl"], b.mean_ttft_s, b.mean_tpot_s) * 1e3}
    out["ptpot"] = b.mean_tpot_s * 1e3
    if isinstance(model, ColocatedModel):
        inp = loop_inputs(model)
        c_eff = cl.admitted(inp, n)
        out.update(
            c_eff=c_eff,
            own_ms=cl._context_step_s(inp, c_eff, 1.0) * 1e3,
            tau_ms=cl.decode_s(inp, c_eff) * 1e3,
            burst_ms=b.burst_ttft_s * 1e3,
            extra_ms=b.request_overhead_s * 1e3,
            queue_ms=b.server_queue_s * 1e3,
            w=cl.startup_weight(inp, c_eff, b.requests),
        )
    return out


def unlocked_ttft_ms(r: dict[str, Any]) -> float:
    """Mean TTFT with arrivals at random points of the steady cycle (module docstring, 3 and 4)."""
    c, n, s, tau = r["c_eff"], r["osl"] - 1, r["own_ms"], r["tau_ms"]
    m = OVERLAP_STEPS.get(r["engine"], 0.0)
    decode_steps = max(n + 1 - c, 0)
    residual = (c * s * s + decode_steps * tau * tau) / (2.0 * (c * s + decode_steps * tau))
    steady = residual + m * tau + s
    burst = r["burst_ms"] - r["extra_ms"] + m * tau  # the loop's burst without its request overhead
    return float(r["extra_ms"] - m * tau + r["queue_ms"] + (1.0 - r["w"]) * steady + r["w"] * burst)


def _err(pred: float, meas: float) -> float:
    return (pred / meas - 1.0) * 100.0


def _cell(errors: Iterable[float]) -> str:
    e = np.array(list(errors))
    return f"{np.median(np.abs(e)):.1f} / {np.median(e):+.1f}"


def group_table(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], tuple[Any, ...]], head: str) -> list[str]:
    """Median |error| / signed median of TPOT and TTFT per ``key`` value."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    out = [f"| {head} | rows | TPOT | TTFT |", "|---|---|---|---|"]
    for k in sorted(groups, key=str):
        g = groups[k]
        tpot = _cell(_err(r["ptpot"], r["tpot_ms"]) for r in g)
        ttft = _cell(_err(r["pttft"], r["ttft_ms"]) for r in g)
        out.append(f"| {' '.join(map(str, k))} | {len(g)} | {tpot} | {ttft} |")
    return out


def phase_lock_table(rows: list[dict[str, Any]]) -> list[str]:
    """TTFT at C ≤ 8 in own prefill steps, and the unlocked what-if, per harness, engine, model, GPU and ISL/OSL."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if "own_ms" in r and r["concurrency"] <= 8 and r["queue_ms"] < 1.0:
            groups[(r["harness"], r["engine"], r["model"], r["gpu"], f"{r['isl']}/{r['osl']}")].append(r)
    out = [
        "| harness | engine | model | GPU | ISL/OSL | rows | TTFT/S measured | TTFT/S priced | TTFT shipped | "
        "TTFT unlocked |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in sorted(groups):
        g = groups[k]
        meas = np.array([r["ttft_ms"] / r["own_ms"] for r in g])
        pred = np.array([r["pttft"] / r["own_ms"] for r in g])
        shipped = _cell(_err(r["pttft"], r["ttft_ms"]) for r in g)
        unlocked = _cell(_err(unlocked_ttft_ms(r), r["ttft_ms"]) for r in g)
        span = f"{np.median(meas):.2f} ({meas.min():.2f}-{meas.max():.2f})"
        out.append(
            f"| {' | '.join(map(str, k))} | {len(g)} | {span} | {np.median(pred):.2f} | {shipped} | {unlocked} |"
        )
    return out


def unlocked_table(rows: list[dict[str, Any]]) -> list[str]:
    """Shipped against unlocked TTFT error at every C, per harness, engine, model and GPU (colocated dense rows)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if "own_ms" in r and r["kind"] == "dense" and r["engine"] != "sglang":  # SGLang: prefill-first, not mixed
            groups[(r["harness"], r["engine"], r["model"], r["gpu"])].append(r)
    out = ["| harness | engine | model | GPU | rows | TTFT shipped | TTFT unlocked |", "|---|---|---|---|---|---|---|"]
    for k in sorted(groups):
        g = groups[k]
        shipped = _cell(_err(r["pttft"], r["ttft_ms"]) for r in g)
        unlocked = _cell(_err(unlocked_ttft_ms(r), r["ttft_ms"]) for r in g)
        out.append(f"| {' | '.join(map(str, k))} | {len(g)} | {shipped} | {unlocked} |")
    return out


def twins(gpu: str) -> list[str]:
    """Rows of one CSV recording the same measurement (ISL, OSL, C, TTFT, TPOT) under different deployments."""
    path = calibration_path(SILICON[gpu][0])
    seen: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for r in csv.DictReader(path.open(newline="")):
        c = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
        if r["mode"] == "agg" and c:
            seen[(r["isl"], r["osl"], c.group(1), r["silicon_ttft_ms"], r["silicon_tpot_ms"])].append(r)
    out = ["| model | ISL/OSL | C | TPOT ms | deployments recorded (tp / attention DP / MoE TP / EP: dump) |"]
    out.append("|---|---|---|---|---|")
    for k, rs in sorted(seen.items(), key=lambda kv: (kv[0][0], kv[0][1], int(kv[0][2]))):
        layouts = {(r["tp_size"], r["attention_dp_size"], r["moe_tp_size"], r["moe_ep_size"]) for r in rs}
        if len(layouts) > 1:
            cells = "; ".join(
                f"{r['tp_size']} / {r['attention_dp_size'] or 1} / {r['moe_tp_size']} / {r['moe_ep_size']}: "
                f"{r['silicon_data_source'].split(';')[0].replace('source_file=', '')}"
                for r in rs
            )
            model = rs[0]["model_path"].split("/")[-1]
            out.append(f"| {model} | {k[0]}/{k[1]} | {k[2]} | {float(k[4]):.2f} | {cells} |")
    return out


def regimes(rows: list[dict[str, Any]]) -> list[str]:
    """H200 TensorRT-LLM DeepSeek-R1/V3 colocated TP8 rows (EP 8 or MoE TP 8) by measured date: TPOT per C."""
    by: dict[tuple[str, str, str], dict[tuple[int, int, int], dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        deepseek = r["model"].startswith("deepseek")
        if r["engine"] == "trtllm" and deepseek and r["gpu"] == "h200" and r["tp"] == 8 and r["dp"] == 1:
            date = re.search(r"measured=(\d{4}-\d{2}-\d{2})", r["source"] or "")
            key = (date.group(1) if date else "?", r["version"], f"EP {r['ep']}")
            by[key].setdefault((r["isl"], r["osl"], r["concurrency"]), r)
    points = sorted({p for g in by.values() for p in g})
    out = ["| measured | version | MoE | " + " | ".join(f"{i}/{o} C={c}" for i, o, c in points) + " |"]
    out.append("|---|---|---|" + "---|" * len(points))
    for key in sorted(by):
        cells = [_regime_cell(by[key].get(p)) for p in points]
        out.append(f"| {' | '.join(key)} | " + " | ".join(cells) + " |")
    return out


def _regime_cell(r: dict[str, Any] | None) -> str:
    return "" if r is None else f"{r['tpot_ms']:.1f} ({_err(r['ptpot'], r['tpot_ms']):+.0f} %)"


def prompt_step_excess(rows: list[dict[str, Any]]) -> list[str]:
    """What one prompt adds to the decodes riding beside it, from TPOT at OSL 128 and 512 (same TP, ISL and C).

    A closed loop of C clients with fixed lengths prefills C prompts per cycle of OSL − 1 decode steps, so
    TPOT ≈ τ_d + C·E/(OSL − 1), E the time a step carrying a prompt adds to the riding decodes; two OSLs give
    ``E = (TPOT_128 − TPOT_512)/(C·(1/127 − 1/511))`` (τ_d's growth with the context, 64 to 256 tokens more, is
    neglected: it biases E low). Measured and priced (the loop's own TPOTs put through the same formula)."""
    by = {(r["tp"], r["isl"], r["osl"], r["concurrency"]): r for r in rows}
    isls = sorted({k[1] for k in by if k[2] == 128})
    out = ["| TP | C | " + " | ".join(f"ISL {i}: measured / priced ms" for i in isls) + " |"]
    out.append("|---|---|" + "---|" * len(isls))
    for tp, c in sorted({(k[0], k[3]) for k in by if k[2] == 128}):
        cells = []
        for isl in isls:
            a, b = by.get((tp, isl, 128, c)), by.get((tp, isl, 512, c))
            k = c * (1.0 / 127 - 1.0 / 511)
            cells.append(
                ""
                if a is None or b is None
                else f"{(a['tpot_ms'] - b['tpot_ms']) / k:.1f} / {(a['ptpot'] - b['ptpot']) / k:.1f}"
            )
        out.append(f"| {tp} | {c} | " + " | ".join(cells) + " |")
    return out


def load(catalog: Catalog) -> list[dict[str, Any]]:
    """Every priced row of both GPUs, with its ``silicon_data_source`` as ``source``."""
    out = []
    for gpu in SILICON:
        path = calibration_path(SILICON[gpu][0])
        sources = {r["id"]: r["silicon_data_source"] for r in csv.DictReader(path.open(newline=""))}
        rows, _ = read_gpu(gpu)
        for r in rows:
            p = priced({**r, "source": sources[r["id"]]}, catalog)
            if p is not None:
                out.append(p)
    return out


def report(rows: list[dict[str, Any]]) -> str:
    trt_moe = [r for r in rows if r["engine"] == "trtllm" and r["kind"] == "moe"]
    qwen = [r for r in trt_moe if r["model"] == "qwen3-235b-a22b" and r["version"] == "1.0.0rc3"]
    disagg = [r for r in rows if r["engine"] == "trtllm" and r["kind"] == "disagg"]
    dense_trt = [r for r in rows if r["engine"] == "trtllm" and r["kind"] == "dense" and r["version"] == "1.0.0rc3"]
    lines = [
        "# The four cross-GPU misses without a cause, row by row (issue #23)",
        "",
        "Generated by `benchmarks/cross_gpu_misses.py` (method in its docstring); findings in "
        "docs/cross_gpu_accuracy.md §9.3. Cells: median |error| / signed median, %, shipped profiles.",
        "",
        "## 1. TensorRT-LLM MoE TPOT",
        "",
        *group_table(
            trt_moe,
            lambda r: (r["gpu"], r["version"], r["model"], r["harness"], f"TP{r['tp']} EP{r['ep']}"),
            "GPU, version, model, dump, deployment",
        ),
        "",
        "Qwen3-235B-A22B on 1.0.0rc3 (H100), per TP, ISL and C:",
        "",
        *group_table(qwen, lambda r: (f"TP{r['tp']}", f"ISL {r['isl']}"), "TP, ISL"),
        "",
        *group_table(qwen, lambda r: (f"TP{r['tp']}", f"C={r['concurrency']:03d}"), "TP, C"),
        "",
        "What a step carrying one prompt adds to the riding decodes, E (ms), from the OSL 128 and 512 pairs "
        "(`prompt_step_excess`); pdplan's eager floor makes every such step at least "
        "94 MoE layers × 0.62 ms = 58 ms:",
        "",
        *prompt_step_excess(qwen),
        "",
        "The same check on the dense rows of the same harness and version (no MoE layer, so no eager floor), "
        "Qwen3-32B then Llama-3.1-8B:",
        "",
        *prompt_step_excess([r for r in dense_trt if r["model"] == "qwen3-32b"]),
        "",
        *prompt_step_excess([r for r in dense_trt if r["model"] == "llama-3.1-8b"]),
        "",
        "Rows recording one measurement under different deployments (H200):",
        "",
        *twins("h200"),
        "",
        "H200 DeepSeek-R1/V3 TP8 rows by measured date: measured TPOT ms (shipped error):",
        "",
        *regimes(trt_moe),
        "",
        "## 2. TensorRT-LLM disaggregated TPOT",
        "",
        *group_table(
            disagg,
            lambda r: (r["gpu"], r["version"], f"decode TP{r['decode']['tp']} DP{r['decode']['dp']}"),
            "GPU, version, decode worker",
        ),
        "",
        "## 3-4. Llama-3.1-70B TTFT: the clients' phase lock",
        "",
        "TTFT at C ≤ 8 in units of the row's own prefill step S, and the TTFT error priced phase-locked (shipped) and "
        "unlocked:",
        "",
        *phase_lock_table(rows),
        "",
        "Every C (dense colocated rows):",
        "",
        *unlocked_table(rows),
        "",
        "Llama-3.1-70B per engine, GPU and ISL/OSL:",
        "",
        *group_table(
            [r for r in rows if r["model"] == "llama-3.1-70b"],
            lambda r: (r["engine"], r["gpu"], f"{r['isl']}/{r['osl']}", f"TP{r['tp']}"),
            "engine, GPU, ISL/OSL, TP",
        ),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=DOC)
    args = ap.parse_args()
    args.output.write_text(report(load(open_catalog())), encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
