"""Accuracy of ``evaluate --colocated 1 --concurrency C --engine E`` against measured H100 closed-loop benchmarks.

Data: the AIConfigurator 0.12.0 end-to-end sample, H100 rows (``aiconfigurator-silicon/h100_sxm.csv``, found by
``benchmarks/data_root.py``: vendored whole in tests/data/calibration/; NVIDIA AIConfigurator's silicon runs;
TensorRT-LLM, vLLM, SGLang; fixed ISL/OSL; the benchmark concurrency is the ``batch_size`` column). Rows used: mode
``agg`` (colocated) of models in pdplan's catalogue (MoE rows join automatically when their model is in the catalogue
and ``--moe`` is given). Each row is priced with the shipped profile of its engine (whatever version the row was
measured on; the profile's own version is printed) and AIConfigurator's benchmark recipe (aiperf, 20·C measured
requests after 2·C warm-up: docs/engines.md §2.5 [I: the recipe its data collection generates]).

Writes ``docs/accuracy_engines.md``: signed and absolute errors per engine, per concurrency band and per model, and
the ten worst rows. Run: ``python benchmarks/engine_accuracy.py [--csv PATH] [-o docs/accuracy_engines.md]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from client_connections import client_ttft_s
from data_root import SILICON_H100, SILICON_H100_NAME, calibration_path
from engine_accuracy_notes import MOE_NOTES, NOTES
from moe_report import moe_section  # benchmarks/moe_report.py and moe_rows.py: the script's own folder is on sys.path
from moe_rows import moe_rows, scenario_dict

from pdplan.benchmark.disaggregated_loop import disagg_loop_inputs
from pdplan.benchmark.loop_inputs import loop_inputs
from pdplan.benchmark.mva import closed_loop_throughput
from pdplan.calibrate import silicon_rows
from pdplan.errors import PdplanError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "Qwen/Qwen3-32B": "qwen3-32b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
}
BANDS = ((1, 4), (5, 16), (17, 64), (65, 256), (257, 100000))


def rows(path: Path, moe: bool = False) -> list[dict[str, Any]]:
    """The colocated rows of catalogue models, with pdplan's names and dtypes (:func:`silicon_rows.dense_rows`);
    ``moe`` adds Qwen3-235B's colocated rows to them (the main tables keep dense models only: the MoE section reads
    its rows with moe_rows.py)."""
    names = {**MODELS, **({"Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b"} if moe else {})}
    return silicon_rows.dense_rows(path, names)


def dense_scenario(row: dict[str, Any], gpu: str = "h100-sxm") -> dict[str, Any]:
    """The colocated scenario of one dense row on one ``gpu`` (default: the H100 the rows were measured on)."""
    return silicon_rows.dense_scenario(row, gpu)


def predict(row: dict[str, Any], catalog: Any) -> dict[str, Any]:
    """pdplan's benchmark prediction for one row (or the reason there is none)."""
    spec = scenario_dict(row) if "prefill" in row or "ep" in row else dense_scenario(row)
    try:
        sc = scenario_from_dict(spec, source=row["id"], base_dir=Path.cwd())
        model = build_model(resolve(sc, catalog))
    except PdplanError as err:
        return {"error": str(err)}
    c = row["concurrency"]
    n = min(c, row.get("client_connections") or c)  # the client's connection limit (benchmarks/client_connections.py)
    b = silicon_rows.aic_benchmark(model, c, n)
    if isinstance(model, ColocatedModel):
        inp = loop_inputs(model)
        prefill_s, delay_s = inp.prompt_s, inp.request_delay_s
        hw = model.res.hardware.colocated
    else:
        dinp = disagg_loop_inputs(model)
        prefill_s, delay_s = dinp.prefill_latency_s + dinp.transfer_s, dinp.request_delay_s
        hw = model.res.hardware.decode
    assert hw is not None
    host_s = hw.engine.overheads.step_overhead_s(hw.model.num_layers, hw.tp) if hw.engine is not None else 0.0
    out = {
        "pred_ttft_ms": client_ttft_s(c, n, row["osl"], b.mean_ttft_s, b.mean_tpot_s) * 1e3,
        "connections": n,
        "pred_tpot_ms": b.mean_tpot_s * 1e3,
        "c_eff": b.effective_concurrency,
        "queue_ms": b.server_queue_s * 1e3,
        "host_ms": host_s * 1e3,
        "prefill_ms": prefill_s * 1e3,
        "request_ms": delay_s * 1e3,
    }
    if isinstance(model, DisaggregatedModel):  # what evaluate --concurrency reported before: the open-model MVA
        loop = closed_loop_throughput(model, c)
        rate = loop.throughput_rps * (1.0 - 1e-6)
        snap = model.snapshot(np.array([rate]))
        out["mva_ttft_ms"] = float(snap.ttft_summary(50.0)[0].mean) * 1e3
        out["mva_tpot_ms"] = float(snap.tpot_summary(50.0)[0].mean) * 1e3
    return out


def _err(pred: float, meas: float) -> float:
    return (pred / meas - 1.0) * 100.0


def _stats(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):+.1f} / {statistics.median(abs(v) for v in values):.1f}"


def _table(title: str, groups: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| group | rows | TPOT median signed / abs % | TTFT median signed / abs % |",
        "|---|---|---|---|",
    ]
    for key in sorted(groups):
        g = groups[key]
        lines.append(
            f"| {key} | {len(g)} | {_stats([r['tpot_err'] for r in g])} | {_stats([r['ttft_err'] for r in g])} |"
        )
    return [*lines, ""]


def _band(c: int) -> str:
    for lo, hi in BANDS:
        if lo <= c <= hi:
            return f"C {lo}-{hi}" if hi < 100000 else f"C >= {lo}"
    return "?"


def _reason(r: dict[str, Any]) -> str:
    """A short diagnosis of one bad row from the numbers pdplan reports."""
    if r["queue_ms"] > 0:
        return f"engine admits {r['c_eff']} of C={r['concurrency']}: the rest queue (Little's law)"
    if abs(r["tpot_err"]) > 40:
        return "TPOT and TTFT both far off: the run's serving configuration is not the profile's (not in the CSV)"
    if abs(r["ttft_err"]) > abs(r["tpot_err"]) and r["ttft_err"] < 0:
        return "TTFT under-predicted: more start-up excess than the fitted transient, or a wait the admission misses"
    if abs(r["ttft_err"]) > abs(r["tpot_err"]):
        return "TTFT over-predicted: arrivals found no prefill in flight (random phase: about one step + one prompt)"
    if r["tpot_err"] < 0:
        return "TPOT under-predicted: step time above the kernel roofline + profile overhead (host/launch cost)"
    return "TPOT over-predicted: the kernel tables are pessimistic for this shape"


def report(data: list[dict[str, Any]], skipped: list[tuple[dict[str, Any], str]], seconds: float) -> str:
    lines = [
        "# Engine accuracy: closed-loop benchmarks on H100 (generated by benchmarks/engine_accuracy.py)",
        "",
        f"Measured: {SILICON_H100_NAME},",
        "colocated (`agg`) rows of catalogue",
        "models. Predicted: `evaluate --colocated 1 --tp T --concurrency C --engine E`, the shipped profile of each",
        "row's engine (`pdplan/data/engines/`), benchmark recipe aiperf 20·C requests after 2·C warm-up",
        "(AIConfigurator's generated bench_run.sh, docs/engines.md §2.5). Errors are predicted/measured − 1; cells "
        "give the",
        "median signed / median",
        f"absolute error in %. {len(data)} rows priced, {len(skipped)} skipped, {seconds:.0f} s.",
        "",
        "Targets (issue #11 item 5): TPOT median |error| ≤ 8 % and TTFT ≤ 20 % per engine.",
        "",
    ]
    by = lambda f: {k: [r for r in data if f(r) == k] for k in {f(r) for r in data}}  # noqa: E731
    lines += _table("Per engine", by(lambda r: r["engine"]))
    lines += _table("Per engine and version", by(lambda r: f"{r['engine']} {r['version']}"))
    lines += _table("Per concurrency band", by(lambda r: _band(r["concurrency"])))
    lines += _table("Per model", by(lambda r: f"{r['model']} {r['dtype']}"))
    lines += _table("Per engine and TP", by(lambda r: f"{r['engine']} TP{r['tp']}"))
    worst = sorted(data, key=lambda r: -max(abs(r["ttft_err"]), abs(r["tpot_err"])))[:10]
    lines += [
        "### Ten worst rows",
        "",
        "| row | C | TP | ISL/OSL | TTFT meas / pred ms | TPOT meas / pred ms | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in worst:
        lines.append(
            f"| {r['engine']} {r['version']} {r['model']} {r['dtype']} | {r['concurrency']} | {r['tp']} | "
            f"{r['isl']}/{r['osl']} | {r['ttft_ms']:.0f} / {r['pred_ttft_ms']:.0f} | "
            f"{r['tpot_ms']:.1f} / {r['pred_tpot_ms']:.1f} | {_reason(r)} |"
        )
    lines += ["", NOTES]
    if skipped:
        lines += ["", "### Skipped rows", ""]
        reasons: dict[str, int] = defaultdict(int)
        for _, why in skipped:
            reasons[why.split(";")[0][:160]] += 1
        lines += [f"- {n} × {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines) + "\n"


def price(todo: list[dict[str, Any]], catalog: Any) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """Predict every row; (priced rows with their errors, skipped rows with the reason)."""
    data, skipped = [], []
    for row in todo:
        out = predict(row, catalog)
        if "error" in out:
            skipped.append((row, out["error"]))
            continue
        row.update(out)
        row["ttft_err"] = _err(row["pred_ttft_ms"], row["ttft_ms"])
        row["tpot_err"] = _err(row["pred_tpot_ms"], row["tpot_ms"])
        if not (math.isfinite(row["ttft_err"]) and math.isfinite(row["tpot_err"])):
            skipped.append((row, "non-finite prediction"))
            continue
        data.append(row)
    return data, skipped


def moe_text(path: Path, catalog: Any) -> str:
    """The "MoE and disaggregated rows" section (benchmarks/moe_report.py)."""
    start = time.perf_counter()
    todo, skipped = moe_rows(path)
    data, more = price(todo, catalog)
    profiles = {name: catalog.engine(name).version for name in ("vllm", "sglang", "trtllm")}
    lines = moe_section(data, skipped + more, time.perf_counter() - start, profiles)
    return "\n".join([*lines, MOE_NOTES])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, help=f"default: {SILICON_H100} (benchmarks/data_root.py)")
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "accuracy_engines.md")
    ap.add_argument("--moe", action="store_true", help="add the MoE and disaggregated rows' section")
    ap.add_argument("--moe-only", action="store_true", help="print only that section (nothing written)")
    ap.add_argument("--limit", type=int, default=0, help="price only every k-th row (quick look)")
    args = ap.parse_args()
    args.csv = args.csv or calibration_path(SILICON_H100)
    catalog = open_catalog()
    if args.moe_only:
        print(moe_text(args.csv, catalog))
        return
    start = time.perf_counter()
    todo = rows(args.csv)
    if args.limit:
        todo = todo[:: args.limit]
    data, skipped = price(todo, catalog)
    text = report(data, skipped, time.perf_counter() - start)
    if args.moe:
        text += "\n" + moe_text(args.csv, catalog)
    args.output.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
