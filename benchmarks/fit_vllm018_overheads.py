"""Fit the ``vllm-0.18`` profile's per-step host time on the vLLM 0.18 rows of the H100 silicon CSV (held out too).

Rows: the colocated vLLM 0.18.0 rows of ``../shared/calibration/aiconfigurator-silicon/h100_sxm.csv`` (gpt-oss-120b
MXFP4 TP2/4/8, MiniMax-M2.5 FP8 TP4 EP4; read by ``benchmarks/moe_rows.py``), priced with the profile's step term set
to 0. As ``benchmarks/fit_engine_overheads.py`` does, each row's TPOT deficit (measured − predicted) is regressed on
``[1]`` with a non-negative coefficient and relative weights 1/measured (scipy ``nnls``); the collective term stays 0
(TP <= 8 inside one node, as for the 0.12 fit). Held-out checks: fitted on one model, the median |TPOT error| on the
other; fitted on TP2+TP8 gpt-oss rows, checked on TP4. Run: ``python benchmarks/fit_vllm018_overheads.py``.
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

from engine_accuracy import CSV, predict
from moe_rows import moe_rows

from pdplan.io.catalog import open_catalog
from pdplan.io.engines import ENGINE_DIR

PROFILE = "vllm-0.18"


def _deficits(folder: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load((ENGINE_DIR / f"{PROFILE}.yaml").read_text())
    data["overheads"]["step_s"]["value"] = 0.0
    (folder / "engines").mkdir(parents=True, exist_ok=True)
    (folder / "engines" / f"{PROFILE}.yaml").write_text(yaml.safe_dump(data))
    catalog = open_catalog([folder])
    todo = [r for r in moe_rows(CSV)[0] if r["engine"] == "vllm" and r["version"].startswith("0.18")]
    out = []
    for row in todo:
        pred = predict(row, catalog)
        if "error" not in pred:
            out.append({**row, "kernel_tpot_ms": pred["pred_tpot_ms"]})
    return out


def _fit(rows: list[dict[str, Any]]) -> float:
    meas = np.array([r["tpot_ms"] for r in rows])
    deficit = meas - np.array([r["kernel_tpot_ms"] for r in rows])
    coef, _ = nnls(np.ones((len(rows), 1)) / meas[:, None], deficit / meas)
    return float(coef[0])


def _abs_err(rows: list[dict[str, Any]], step_ms: float) -> float:
    return statistics.median(abs((r["kernel_tpot_ms"] + step_ms) / r["tpot_ms"] - 1.0) * 100.0 for r in rows)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = _deficits(Path(tmp))
    gpt = [r for r in rows if r["model"] == "gpt-oss-120b"]
    mm = [r for r in rows if r["model"] == "minimax-m2.5"]
    step = _fit(rows)
    print(
        f"all {len(rows)} rows: step {step:.3f} ms; median |TPOT err| gpt-oss {_abs_err(gpt, step):.1f} %, "
        f"MiniMax {_abs_err(mm, step):.1f} %"
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


if __name__ == "__main__":
    main()
