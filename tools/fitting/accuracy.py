"""Accuracy of a kernel table on AIConfigurator kernel measurements, per (family, flavour) cell.

Shared by ``benchmarks/kernel_accuracy.py`` (docs/kernel_accuracy.md) and the accuracy tests. A cell
is every measured row of one family (``gemm``, ``prefill_attention``, ``decode_attention``) and one
flavour (GEMM dtype, or KV-cache dtype for attention). GEMM and decode rows are predicted with
``warm_l2=True`` (the benchmark repeats one kernel, so small operands stay in L2).

Some attention rows run a different kernel than the rest of their cell (``kernel_source``): vLLM
falls back to FlashAttention-4 for head_dim 512 on Hopper and to Triton for head_dim 192 with an fp8
cache on B200/L40S, and sends one-token prompts to the decode kernel. :func:`cell` marks the rows of
the cell's most common kernel as ``primary`` so reports can show both views.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from fitting.fit_families import decode_context_len
from pdplan.calibrate import fit
from pdplan.perf.kernels import decode_attention_time_s, gemm_time_s, prefill_attention_time_s
from pdplan.specs.kernel_table import GpuPeaks, KernelTable
from pdplan.types import FloatArray

FAMILIES = (
    ("gemm", "bf16"),
    ("gemm", "fp8"),
    ("prefill_attention", "bf16"),
    ("prefill_attention", "fp8"),
    ("decode_attention", "bf16"),
    ("decode_attention", "fp8"),
)
TARGET_MEDIAN_PCT = 10.0
TARGET_P90_PCT = 25.0
_PHASE = {"prefill_attention": "context", "decode_attention": "generation"}


@dataclass(frozen=True)
class Cell:
    """Predicted and measured seconds of one cell, and which rows ran the cell's primary kernel."""

    predicted_s: FloatArray
    measured_s: FloatArray
    primary: npt.NDArray[np.bool_]
    primary_kernel: str

    def stats(self, primary_only: bool = False) -> fit.ErrorStats:
        sel = self.primary if primary_only else np.ones_like(self.primary)
        return fit.error_stats(self.predicted_s[sel], self.measured_s[sel])

    def meets_target(self) -> bool:
        s = self.stats()
        return s.median_abs_pct <= TARGET_MEDIAN_PCT and s.p90_abs_pct <= TARGET_P90_PCT


def kernel_sources(path: Path, where: dict[str, set[str]]) -> list[str]:
    """``kernel_source`` of the rows matching ``where``, in file order (as the numeric readers)."""
    with path.open(newline="") as fh:
        return [r["kernel_source"] for r in csv.DictReader(fh) if all(r[c] in ok for c, ok in where.items())]


def cell(table: KernelTable, gpu: GpuPeaks, data_dir: Path, family: str, flavour: str) -> Cell | None:
    """Predictions of ``table`` on every measured row of one cell, or None without rows/entry."""
    if family == "gemm":
        r = fit.read_gemm(data_dir, flavour)  # type: ignore[arg-type]
        if not r["m"].size or flavour not in table.gemm:
            return None
        pred = gemm_time_s(r["m"], r["n"], r["k"], flavour, gpu, table, warm_l2=True)
        kernels = kernel_sources(data_dir / "gemm.csv", {"gemm_dtype": fit.GEMM_DTYPES[flavour]})
    else:
        phase = _PHASE[family]
        r = fit.read_attention(data_dir, phase, flavour)  # type: ignore[arg-type]
        if not r["isl"].size:
            return None
        b, h, kv, d = r["batch_size"], r["num_heads"], r["num_key_value_heads"], r["head_dim"]
        if family == "prefill_attention":
            pred = prefill_attention_time_s(b, r["isl"], h, kv, d, gpu, table, flavour)  # type: ignore[arg-type]
        else:
            kvb = 2.0 if flavour == "bf16" else 1.0
            pred = decode_attention_time_s(b, decode_context_len(r), h, kv, d, kvb, gpu, table, warm_l2=True)
        kernels = kernel_sources(
            data_dir / f"{phase}_attention.csv", {"kv_cache_dtype": fit.KV_DTYPES[flavour], "attn_dtype": {"bfloat16"}}
        )
    primary_kernel = Counter(kernels).most_common(1)[0][0]
    primary = np.array([k == primary_kernel for k in kernels], dtype=bool)
    return Cell(pred, r["latency_ms"] * 1e-3, primary, primary_kernel)
