"""Fit the MLA module entries (:class:`pdplan.specs.kernel_table.MlaParams`) to AIConfigurator's MLA tables.

``mla_{context,generation}_module_vllm.csv`` time DeepSeek-V3's whole attention module of one layer on one GPU
holding ``num_heads`` of its 128 heads (TP = 128/num_heads): context rows prefill ``batch_size`` prompts of
``isl`` tokens, generation rows decode one token for ``batch_size`` sequences at context ``step``. Each
(phase, GEMM dtype, KV dtype) cell is fitted on the rows of its most common kernel (ties: the faster median,
the one an engine would pick); the projection GEMMs are priced with warm L2 as the benchmark repeats one
call. :func:`held_out_heads` checks generalisation across TP: fit without the 16- and 64-head rows, score them.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters
from pdplan.errors import SpecError
from pdplan.perf.mla import MlaPhase, mla_module_time_s
from pdplan.specs.kernel_table import GemmFlavour, GpuPeaks, KernelTable, MlaParams
from pdplan.specs.model import ModelSpec
from pdplan.types import FloatArray

GEMM_TYPES: dict[str, GemmFlavour] = {"bfloat16": "bf16", "fp8_block": "fp8"}
KV_TYPES = {"bfloat16": 2.0, "fp8": 1.0}
FILES: dict[MlaPhase, str] = {"prefill": "mla_context_module_vllm.csv", "decode": "mla_generation_module_vllm.csv"}
HELD_OUT_HEADS = (16.0, 64.0)


@dataclass(frozen=True)
class MlaRows:
    """Measured MLA modules of one cell: heads per GPU, batch, prompt length / context, seconds; the kernel."""

    kernel: str
    heads: FloatArray
    batch: FloatArray
    tokens: FloatArray
    measured_s: FloatArray

    def take(self, mask: np.ndarray) -> MlaRows:
        return MlaRows(self.kernel, self.heads[mask], self.batch[mask], self.tokens[mask], self.measured_s[mask])


def read_mla(data_dir: Path, phase: MlaPhase, gemm_type: str, kv_type: str) -> MlaRows:
    """One cell's rows of its primary kernel (most rows; ties: the faster median)."""
    path = data_dir / FILES[phase]
    if not path.is_file():
        raise SpecError("file not found", source=str(path))
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["gemm_type"] == gemm_type and r["kv_cache_dtype"] == kv_type]
    if not rows:
        raise SpecError(f"no rows for gemm_type={gemm_type}, kv_cache_dtype={kv_type}", source=str(path))
    times: dict[str, list[float]] = {}
    for r in rows:
        times.setdefault(r["kernel_source"], []).append(float(r["latency"]))
    kernel = min(times, key=lambda k: (-len(times[k]), float(np.median(times[k]))))
    rows = [r for r in rows if r["kernel_source"] == kernel]

    def col(name: str) -> FloatArray:
        return np.array([float(r[name]) for r in rows])

    return MlaRows(
        kernel, col("num_heads"), col("batch_size"), col("isl" if phase == "prefill" else "step"), col("latency") * 1e-3
    )


def predict_mla_s(
    rows: MlaRows,
    phase: MlaPhase,
    model: ModelSpec,
    gemm: GemmFlavour,
    kv_bytes: float,
    gpu: GpuPeaks,
    table: KernelTable,
) -> FloatArray:
    """Model seconds of every row under ``table``'s MLA entry (warm L2 as measured)."""
    assert model.mla is not None
    return mla_module_time_s(
        model.mla,
        model.hidden_size,
        phase,
        rows.batch,
        rows.tokens,
        rows.heads,
        gemm,
        kv_bytes,
        gpu,
        table,
        warm_l2=True,
    )


_X0 = {
    "overhead_s": 5e-5,
    "per_token_s": 1e-8,
    "per_sequence_s": 1e-7,
    "compute_fraction": 0.5,
    "memory_fraction": 0.7,
    "ramp": 10.0,
    "gemm_scale": 1.0,
}
_BOUNDS = {
    "overhead_s": (1e-7, 1e-3),
    "per_token_s": (1e-13, 1e-5),
    "per_sequence_s": (1e-12, 1e-4),
    "compute_fraction": (0.01, 1.0),
    "memory_fraction": (0.05, 1.0),
    "ramp": (1e-3, 1e5),
    "gemm_scale": (0.3, 3.0),
}


def fit_mla(
    rows: MlaRows,
    phase: MlaPhase,
    model: ModelSpec,
    gemm: GemmFlavour,
    kv_bytes: float,
    gpu: GpuPeaks,
    table: KernelTable,
) -> tuple[MlaParams, ErrorStats]:
    """Least-squares fit of one cell (log residuals, soft-L1); errors over all its rows."""
    key = f"{phase}.{gemm}.{'fp8' if kv_bytes <= 1.0 else 'bf16'}"

    def with_entry(p: dict[str, float]) -> KernelTable:
        return table.model_copy(update={"mla": {**table.mla, key: MlaParams(**p)}})

    def predict(p: dict[str, float]) -> FloatArray:
        return predict_mla_s(rows, phase, model, gemm, kv_bytes, gpu, with_entry(p))

    res = fit_parameters(predict, _X0, _BOUNDS, rows.measured_s, f_scale=0.05)
    return MlaParams(**res.params), res.stats


def held_out_heads(
    rows: MlaRows,
    phase: MlaPhase,
    model: ModelSpec,
    gemm: GemmFlavour,
    kv_bytes: float,
    gpu: GpuPeaks,
    table: KernelTable,
) -> ErrorStats:
    """Fit without the rows of :data:`HELD_OUT_HEADS` heads per GPU (TP 8 and 2), score those rows."""
    test = np.isin(rows.heads, HELD_OUT_HEADS)
    params, _ = fit_mla(rows.take(~test), phase, model, gemm, kv_bytes, gpu, table)
    key = f"{phase}.{gemm}.{'fp8' if kv_bytes <= 1.0 else 'bf16'}"
    fitted = table.model_copy(update={"mla": {**table.mla, key: params}})
    unseen = rows.take(test)
    return error_stats(predict_mla_s(unseen, phase, model, gemm, kv_bytes, gpu, fitted), unseen.measured_s)
