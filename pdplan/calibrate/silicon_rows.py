"""Measured end-to-end rows of AIConfigurator's silicon sample as pdplan scenarios, and their benchmark prediction.

One home for what ``benchmarks/engine_accuracy.py`` (H100 rows, shipped profiles) and ``benchmarks/cross_gpu_rows.py``
(either GPU, refitted profiles) both do with a dense colocated row:

* :func:`dense_rows`: the ``mode: agg`` rows of a ``aiconfigurator-silicon/<gpu>.csv`` file whose ``model_path``
  maps to a catalogue model, with pdplan's names: FP8 where the GEMMs or the precision column say so, the
  benchmark concurrency from ``batch_size`` (AIConfigurator's column for the client concurrency), the measured mean
  TTFT and TPOT in ms, and ``silicon_data_source`` (which harness and date measured the row);
* :func:`dense_scenario`: the scenario ``pdplan evaluate --colocated 1 --tp T --isl I --osl O --dtype D --kv-dtype D
  --engine E`` builds for it on a named GPU (chunked prefill, the row's dtype for weights and KV);
* :func:`aic_benchmark`: the closed-loop benchmark AIConfigurator's data collection runs, aiperf with 20·C measured
  requests after 2·C warm-up (docs/engines.md §2.5 [I: the recipe its generated bench_run.sh uses]), predicted by
  :func:`pdplan.benchmark.loop_inputs.benchmark_of` (colocated, ``connections`` clients: a client holding fewer
  connections than it has users serves only that many at once) or
  :func:`pdplan.benchmark.disaggregated_loop.disagg_benchmark_of` (disaggregated, C clients).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pdplan.benchmark.disaggregated_loop import disagg_benchmark_of
from pdplan.benchmark.loop_inputs import benchmark_of
from pdplan.benchmark.records import BenchmarkLoop
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel

MEASURED_PER_CLIENT = 20
"""aiperf requests measured per client (20·C; module docstring)."""
WARMUP_PER_CLIENT = 2
"""aiperf warm-up requests per client (2·C)."""


def dense_rows(path: Path, models: Mapping[str, str]) -> list[dict[str, Any]]:
    """The colocated rows of ``path`` whose ``model_path`` is a key of ``models`` (value: pdplan's model name), in the
    order of the file (module docstring)."""
    out = []
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["mode"] != "agg" or r["model_path"] not in models:
                continue
            fp8 = r["gemm_quant_mode"].startswith("fp8") or r["precision"] == "fp8"
            out.append(
                {
                    "id": r["id"],
                    "engine": r["backend"],
                    "version": r["backend_version"] or "?",
                    "model": models[r["model_path"]],
                    "dtype": "fp8" if fp8 else "bf16",
                    "tp": int(r["tp_size"]),
                    "isl": int(r["isl"]),
                    "osl": int(r["osl"]),
                    "concurrency": int(r["batch_size"]),
                    "ttft_ms": float(r["silicon_ttft_ms"]),
                    "tpot_ms": float(r["silicon_tpot_ms"]),
                    "mode": "agg",
                    "source": r["silicon_data_source"],
                }
            )
    return out


def dense_scenario(row: Mapping[str, Any], gpu: str) -> dict[str, Any]:
    """The colocated scenario of one dense row on one ``gpu`` (a catalogue name): its model, TP, fixed ISL/OSL, dtype
    and engine."""
    return {
        "model": row["model"],
        "mode": "colocated",
        "colocated": {"gpu": gpu, "tp": row["tp"], "count": 1, "scheduler": "chunked"},
        "workload": {
            "input_tokens": {"dist": "fixed", "value": row["isl"]},
            "output_tokens": {"dist": "fixed", "value": row["osl"]},
        },
        "dtype": row["dtype"],
        "kv_dtype": row["dtype"],
        "engine": row["engine"],
    }


def aic_benchmark(model: ColocatedModel | DisaggregatedModel, concurrency: int, connections: int) -> BenchmarkLoop:
    """The predicted benchmark of AIConfigurator's recipe at ``concurrency`` clients (module docstring); a colocated
    instance serves ``connections`` of them at once."""
    measured, warmup = MEASURED_PER_CLIENT * concurrency, WARMUP_PER_CLIENT * concurrency
    if isinstance(model, ColocatedModel):
        return benchmark_of(model, connections, measured, warmup)
    return disagg_benchmark_of(model, concurrency, measured, warmup)
