"""End-to-end accuracy gate: per-engine median |error| of closed-loop TPOT and TTFT on measured H100 runs.

``benchmarks/engine_accuracy.py`` prices every colocated (``agg``) row of the dense catalogue models (Llama-3.1-8B,
Llama-3.1-70B, Qwen3-32B) of the AIConfigurator 0.12.0 end-to-end sample, H100 rows
(``tests/data/calibration/aiconfigurator-silicon/h100_sxm.csv``, vendored whole), with the shipped profile of the
row's engine at the row's concurrency, and reports the medians in docs/accuracy_engines.md ("Per engine"). This
test runs the same code on the same rows (all of them: 579 rows, a few seconds) and fails when an engine's median
|error| grows more than :data:`TOLERANCE_POINTS` beyond the figure that document reports, or when rows stop being
priced. The issue targets (TPOT <= 8 %, TTFT <= 20 % per engine) lie above every bound but vLLM's TTFT: since issue #23
(2026-12-06) the vLLM 0.12 profile no longer carries the per-request time and start-up cohorts fitted to these rows
(16.3 % with them), which made the H200 runs worse, and the TensorRT-LLM profile its start-up cohorts (13.7 % with
them, 16.8 % without; the fit on one GPU predicts the other no worse without: docs/cross_gpu_accuracy.md §8.4;
tests/reference/test_cross_gpu_accuracy.py gates the cross-GPU figure). Since issue #23 item 2 (2026-12-07) the
TensorRT-LLM terms are the converged joint fit of its H100 and H200 rows (``benchmarks/fit_shipped_profile.py
--profiles trtllm --converged``), no longer the H100 fitters' values: its gate moves TPOT 4.7 → 4.8 % and TTFT 16.8 →
16.9 % (request_s 83.8 → 72.1 ms puts TTFT 3.6 points lower, signed), the price of fitting these rows and the H200
rows with one value (docs/cross_gpu_accuracy.md §8.4).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support.calibration import calibration_file

from pdplan.io.catalog import open_catalog

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

REPORTED = {  # docs/accuracy_engines.md, "Per engine": rows, TPOT and TTFT median |error| in %
    "sglang": (84, 5.6, 12.9),
    "trtllm": (357, 4.8, 16.9),  # 4.7 / 16.8 with the H100 fits, 13.7 TTFT with startup_cohorts (module docstring)
    "vllm": (138, 7.3, 41.5),
}
TOLERANCE_POINTS = 1.0
"""Slack over the reported medians (printed to one decimal), in percentage points: enough for a harmless change in
the last digits, not for a change that worsens an engine."""


def _engine_accuracy(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # engine_accuracy imports its siblings (client_connections, moe_rows, ...)
    monkeypatch.delitem(sys.modules, "engine_accuracy", raising=False)
    import engine_accuracy

    return engine_accuracy


@pytest.mark.slow
def test_per_engine_median_errors_within_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    ea = _engine_accuracy(monkeypatch)
    data, skipped = ea.price(ea.rows(calibration_file("aiconfigurator-silicon/h100_sxm.csv")), open_catalog())
    assert not skipped, [why for _, why in skipped][:3]
    found = {}
    for engine in REPORTED:
        rows = [r for r in data if r["engine"] == engine]
        tpot = statistics.median(abs(r["tpot_err"]) for r in rows)
        ttft = statistics.median(abs(r["ttft_err"]) for r in rows)
        found[engine] = (len(rows), round(tpot, 1), round(ttft, 1))
    assert {r["engine"] for r in data} == set(REPORTED)
    for engine, (n, tpot_pct, ttft_pct) in REPORTED.items():
        assert found[engine][0] == n, found
        assert found[engine][1] <= tpot_pct + TOLERANCE_POINTS, found
        assert found[engine][2] <= ttft_pct + TOLERANCE_POINTS, found
