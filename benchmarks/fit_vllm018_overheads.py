"""Fit the ``vllm-0.18`` profile's per-step host time and per-layer request time on the vLLM 0.18 rows of the H100
silicon CSV (held out too).

Rows: the colocated vLLM 0.18.0 rows of the AIConfigurator 0.12.0 end-to-end sample, H100 rows
(``aiconfigurator-silicon/h100_sxm.csv`` via ``benchmarks/data_root.py``; gpt-oss-120b
MXFP4 TP2/4/8, MiniMax-M2.5 FP8 TP4 EP4; read by ``benchmarks/moe_rows.py``), priced with the profile's step term set
to 0. As ``benchmarks/fit_engine_overheads.py`` does, each row's TPOT deficit (measured − predicted) is regressed on
``[1]`` with a non-negative coefficient and relative weights 1/measured (scipy ``nnls``); the collective term stays 0
(TP <= 8 inside one node, as for the 0.12 fit). Held-out checks: fitted on one model, the median |TPOT error| on the
other; fitted on TP2+TP8 gpt-oss rows, checked on TP4; uncertainty: the spread of 200 bootstrap refits over rows.

Per-layer request time (``request_s_per_layer``, TTFT only): AIConfigurator's 0.8 ms per layer (calibrated on H200
with its own step model) is scanned over 0 to 0.8 ms in 0.1 ms steps (the bounds: non-negative, at most the value it
replaces), each value priced on every row with the fitted step time; the value with the lowest median |TTFT error|
over both models is taken, with its bootstrap spread. A bound from one row that needs no loop model: at C = 4 the
TP8 1024/1024 gpt-oss run measures TTFT = 32 ms, which must hold at least the prompt's prefill, one decode step (the
async scheduler returns the token one step later), the 5 ms per request and the tokeniser, so the per-layer term is
at most (32 − those)/36 layers (printed). Run: ``python benchmarks/fit_vllm018_overheads.py``.

Issue #23 item 2 (2026-12-07): the shipped step_s is now the joint fit on the H100 and H200 rows
(``benchmarks/fit_shipped_profile.py``: 0.179 ms); this H100-only fit is kept as a study of that GPU's rows.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import nnls

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data_root import SILICON_H100, calibration_path
from engine_accuracy import predict
from moe_rows import moe_rows

from pdplan.io.catalog import open_catalog
from pdplan.io.engines import ENGINE_DIR

PROFILE = "vllm-0.18"


def _deficits(folder: Path, step_s: float = 0.0, per_layer_s: float | None = None) -> list[dict[str, Any]]:
    """The vLLM 0.18 rows priced with the profile's step time set to ``step_s`` (and ``request_s_per_layer``)."""
    data = yaml.safe_load((ENGINE_DIR / f"{PROFILE}.yaml").read_text())
    data["overheads"]["step_s"]["value"] = step_s
    if per_layer_s is not None:
        data["overheads"]["request_s_per_layer"]["value"] = per_layer_s
    (folder / "engines").mkdir(parents=True, exist_ok=True)
    (folder / "engines" / f"{PROFILE}.yaml").write_text(yaml.safe_dump(data))
    catalog = open_catalog([folder])
    silicon = calibration_path(SILICON_H100)
    todo = [r for r in moe_rows(silicon)[0] if r["engine"] == "vllm" and r["version"].startswith("0.18")]
    out = []
    for row in todo:
        pred = predict(row, catalog)
        if "error" not in pred:
            out.append({**row, "kernel_tpot_ms": pred["pred_tpot_ms"], **pred})
    return out


def _fit(rows: list[dict[str, Any]]) -> float:
    meas = np.array([r["tpot_ms"] for r in rows])
    deficit = meas - np.array([r["kernel_tpot_ms"] for r in rows])
    coef, _ = nnls(np.ones((len(rows), 1)) / meas[:, None], deficit / meas)
    return float(coef[0])


def _abs_err(rows: list[dict[str, Any]], step_ms: float) -> float:
    return statistics.median(abs((r["kernel_tpot_ms"] + step_ms) / r["tpot_ms"] - 1.0) * 100.0 for r in rows)


def _bootstrap(rows: list[dict[str, Any]], fit: Any, draws: int = 200) -> float:
    """Standard deviation of ``fit`` over ``draws`` resamples of the rows (fixed seed)."""
    rng = np.random.default_rng(0)
    picks = (rng.integers(0, len(rows), len(rows)) for _ in range(draws))
    return float(np.std([fit([rows[i] for i in idx]) for idx in picks]))


PER_LAYER_GRID_S = tuple(i * 1e-4 for i in range(9))
"""request_s_per_layer values scanned: 0 to 0.8 ms (module docstring)."""


def _ttft_scan(step_ms: float) -> None:
    """Median |TTFT error| per model for each per-layer request time; the best one and its bootstrap spread."""
    errs = {}
    for value in PER_LAYER_GRID_S:
        with tempfile.TemporaryDirectory() as tmp:
            rows = _deficits(Path(tmp), step_ms * 1e-3, value)
        errs[value] = [abs(r["pred_ttft_ms"] / r["ttft_ms"] - 1.0) * 100.0 for r in rows]
        by_model = {
            m: statistics.median(e for r, e in zip(rows, errs[value], strict=True) if r["model"] == m)
            for m in ("gpt-oss-120b", "minimax-m2.5")
        }
        print(
            f"request_s_per_layer {value * 1e3:.1f} ms: median |TTFT err| gpt-oss {by_model['gpt-oss-120b']:.1f} %, "
            f"MiniMax {by_model['minimax-m2.5']:.1f} %"
        )
    n = len(next(iter(errs.values())))

    def best(idx: list[int]) -> float:
        return min(PER_LAYER_GRID_S, key=lambda v: statistics.median(errs[v][i] for i in idx))

    rng = np.random.default_rng(0)
    draws = [best(list(rng.integers(0, n, n))) for _ in range(200)]
    print(f"best request_s_per_layer {best(list(range(n))) * 1e3:.1f} ms (bootstrap sd {np.std(draws) * 1e3:.2f} ms)")
    row = next(
        r
        for r in rows
        if r["model"] == "gpt-oss-120b"
        and r["tp"] == 8
        and r["concurrency"] == 4
        and r["isl"] == 1024
        and r["osl"] == 1024
    )
    data = yaml.safe_load((ENGINE_DIR / f"{PROFILE}.yaml").read_text())["overheads"]
    fixed_ms = (
        row["prefill_ms"]
        + row["pred_tpot_ms"]
        + 1e3 * data["request_s"]["value"]
        + 2.0 * data["tokenize_s_per_1k_tokens"]["value"] * 1e3 * row["isl"] / 1024
    )
    print(
        f"bound from gpt-oss TP8 1024/1024 C=4 (TTFT {row['ttft_ms']:.0f} ms): request_s_per_layer <= "
        f"{(row['ttft_ms'] - fixed_ms) / 36:.2f} ms"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = _deficits(Path(tmp))
    gpt = [r for r in rows if r["model"] == "gpt-oss-120b"]
    mm = [r for r in rows if r["model"] == "minimax-m2.5"]
    step = _fit(rows)
    print(
        f"all {len(rows)} rows: step {step:.3f} ms (bootstrap sd {_bootstrap(rows, _fit):.3f} ms); median |TPOT err| "
        f"gpt-oss {_abs_err(gpt, step):.1f} %, MiniMax {_abs_err(mm, step):.1f} %"
    )
    for name, fit_on, check in (("gpt-oss", gpt, mm), ("MiniMax", mm, gpt)):
        s = _fit(fit_on)
        print(
            f"fitted on {name} ({len(fit_on)} rows): step {s:.3f} ms; "
            f"held-out median |TPOT err| {_abs_err(check, s):.1f} %"
        )
    tp4 = [r for r in gpt if r["tp"] == 4]
    s = _fit([r for r in gpt if r["tp"] != 4])
    print(f"fitted on gpt-oss TP2+TP8: step {s:.3f} ms; held-out TP4 median |TPOT err| {_abs_err(tp4, s):.1f} %")
    _ttft_scan(step)


if __name__ == "__main__":
    main()
