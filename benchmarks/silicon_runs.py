"""The colocated dense rows of AIConfigurator's H100 silicon runs as benchmark runs, and a process-pool predictor
over them (shared by ``engine_calibration_loo.py`` and ``fit_shipped_profile.py``)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from pdplan.calibrate import benchmarks as cb
from pdplan.io.catalog import Catalog, open_catalog
from pdplan.specs.benchmark import BenchmarkRun
from pdplan.types import FloatArray

REPO = Path(__file__).resolve().parents[1]
DENSE = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
}


def silicon_runs(path: Path) -> list[BenchmarkRun]:
    """The colocated dense rows of the silicon CSV as benchmark runs."""
    runs = []
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["mode"] != "agg" or r["model_path"] not in DENSE:
                continue
            runs.append(
                BenchmarkRun(
                    engine=r["backend"],
                    gpu="h100-sxm",
                    model=DENSE[r["model_path"]],
                    tp=int(r["tp_size"]),
                    isl=float(r["isl"]),
                    osl=float(r["osl"]),
                    concurrency=int(r["batch_size"]),
                    ttft_s=float(r["silicon_ttft_ms"]) / 1e3,
                    tpot_s=float(r["silicon_tpot_ms"]) / 1e3,
                    dtype="fp8" if r["precision"] == "fp8" else "bf16",
                    num_requests=20 * int(r["batch_size"]),
                    source=f"{path.name}:{r['id']}",
                    extra={"version": r["backend_version"] or "?"},
                )
            )
    return runs


_WORKER: dict[str, Catalog] = {}


def _worker_init() -> None:
    _WORKER["catalog"] = open_catalog()


def _worker_predict(args: tuple[list[BenchmarkRun], str]) -> tuple[FloatArray, FloatArray]:
    return cb.predict_runs(args[0], args[1], _WORKER["catalog"])


class ParallelPredictor:
    """:func:`pdplan.calibrate.benchmarks.predict_runs` over a process pool, the runs split in contiguous chunks
    (each ``evaluate`` takes ~0.1-0.5 s; the answer is the same as the serial call's)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = ProcessPoolExecutor(workers, initializer=_worker_init) if workers > 1 else None

    def __call__(self, runs: Sequence[BenchmarkRun], engine: str, catalog: Catalog) -> tuple[FloatArray, FloatArray]:
        if self.pool is None or len(runs) < 2 * self.workers:
            return cb.predict_runs(runs, engine, catalog)
        chunks = [list(c) for c in np.array_split(np.array(runs, dtype=object), self.workers * 2) if len(c)]
        parts = list(self.pool.map(_worker_predict, [(c, engine) for c in chunks]))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
