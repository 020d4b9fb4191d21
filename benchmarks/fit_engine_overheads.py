"""Fit each shipped engine profile's per-step overhead to the H100 closed-loop runs (per-collective latency held at 0).

The only end-to-end data pdplan fits on (the AIConfigurator 0.12.0 end-to-end sample, H100 rows,
``aiconfigurator-silicon/h100_sxm.csv`` via ``benchmarks/data_root.py``: the colocated rows that
``benchmarks/engine_accuracy.py`` prices). With the profile's step and collective terms set to 0, the TPOT
deficit of each row (measured − predicted, seconds) is regressed on ``[1]`` with a non-negative coefficient (scipy
``nnls``, relative weights 1/measured, i.e. a clipped weighted mean): every engine step pays the term and a TPOT is
one step per token, so the deficit moves 1:1 with it. Prints the fitted values and the residual median; the
profiles' ``source`` texts quote them. Run: ``python benchmarks/fit_engine_overheads.py``.

Until issue #23 the regressors were ``[1, 2·layers·(TP > 1)]``, the second for a per-all-reduce latency
(``collective_s``); it came out 14.9 µs for SGLang and 1.7 µs for TensorRT-LLM on these rows, 0 on the H200 rows,
and holding it at 0 did not worsen the cross-GPU error (docs/cross_gpu_accuracy.md §8.4), so it is held at
:data:`HELD_COLLECTIVE_S` and has no column.

Issue #23 item 2 (2026-12-07): the shipped step_s of SGLang 0.5.1.post1 stays this H100 fit's; the joint fit on
the H100 and H200 rows (``benchmarks/fit_shipped_profile.py``) was refused by its rule (SGLang 1.48 ms: the TPOT
median |error| worse on both GPUs). vLLM 0.12's step_s is the joint fit's, and TensorRT-LLM's too since its
``startup_cohorts`` went (0.828 ms, was this script's 0.915 ms; ``fit_shipped_profile.py --profiles trtllm
--converged``, docs/cross_gpu_accuracy.md §8.4).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data_root import SILICON_H100, calibration_path
from engine_accuracy import predict, rows

from pdplan.io.catalog import open_catalog
from pdplan.io.engines import load_engine

HELD_COLLECTIVE_S = 0.0
"""The per-collective latency every profile keeps, in seconds (module docstring)."""


def zeroed_profile(engine: str, folder: Path) -> None:
    """A copy of the shipped profile with step and collective overheads 0, in ``folder/engines/``."""
    import yaml

    from pdplan.io.engines import ENGINE_DIR

    data = yaml.safe_load((ENGINE_DIR / f"{engine}.yaml").read_text())
    data["overheads"]["step_s"]["value"] = 0.0
    data["overheads"]["collective_s"]["value"] = HELD_COLLECTIVE_S
    (folder / "engines").mkdir(parents=True, exist_ok=True)
    (folder / "engines" / f"{engine}.yaml").write_text(yaml.safe_dump(data))


def main() -> None:
    import tempfile

    layers = {"qwen3-32b": 64, "llama-3.1-8b": 32, "llama-3.1-70b": 80}
    with tempfile.TemporaryDirectory() as tmp:
        for engine in ("vllm", "sglang", "trtllm"):
            zeroed_profile(engine, Path(tmp))
        catalog = open_catalog([Path(tmp)])
        data = rows(calibration_path(SILICON_H100), moe=False)
        for engine in ("vllm", "sglang", "trtllm"):
            sel = [r for r in data if r["engine"] == engine]
            a, y, meas = [], [], []
            for r in sel:
                out = predict(r, catalog)
                if "error" in out:
                    continue
                coll = 2.0 * layers[r["model"]] * (r["tp"] > 1)
                w = 1.0 / r["tpot_ms"]
                a.append([w])
                y.append(w * (r["tpot_ms"] - out["pred_tpot_ms"]) * 1e-3)
                meas.append((r["tpot_ms"], out["pred_tpot_ms"], coll))
            coef, _ = nnls(np.array(a), np.array(y))
            errs = [abs((p + 1e3 * (coef[0] + HELD_COLLECTIVE_S * c)) / m - 1) * 100 for m, p, c in meas]
            base = [abs(p / m - 1) * 100 for m, p, c in meas]
            print(
                f"{engine} ({load_engine(engine).version}): {len(meas)} rows; step_s {coef[0] * 1e3:.3f} ms, "
                f"collective_s held at {HELD_COLLECTIVE_S * 1e6:.0f} us; "
                f"TPOT median |err| {statistics.median(base):.1f} % -> {statistics.median(errs):.1f} %"
            )


if __name__ == "__main__":
    main()
