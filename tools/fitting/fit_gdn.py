"""Fit the Gated DeltaNet kernel family (:class:`pdplan.specs.kernel_table.LinearAttentionParams`) to
AIConfigurator's ``gdn_linear_attention.csv`` tables.

Each row is one kernel of one GDN layer on one GPU (heads per GPU, i.e. after TP): the short causal conv
(``causal_conv1d_fn`` in context, ``causal_conv1d_update`` in generation) and the delta-rule scan
(``chunk_gated_delta_rule_*`` in context, ``fused_recurrent_gated_delta_rule_packed_decode`` in generation).
pdplan prices the layer's mixer as one op, so the target is the sum of the conv and scan rows of the same shape
(batch, sequence length, tokens, d_model, heads and head dims, model); shapes missing either kernel are dropped.
One parameter set is fitted per phase (``prefill`` = context, ``decode`` = generation).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters, subsample_index
from pdplan.errors import SpecError
from pdplan.perf.op_pricing import linear_attention_kernel_s
from pdplan.specs.kernel_table import GpuPeaks, LinearAttentionParams, LinearPhase
from pdplan.types import FloatArray

PHASES: dict[LinearPhase, str] = {"prefill": "context", "decode": "generation"}
STATE_DTYPE_BYTES = 4.0
"""The benchmarked kernels keep the recurrent state in fp32 (vLLM's GDN layers; the rows carry no state dtype)."""
MAX_GDN_FIT_ROWS = 2500
_KEY = ("batch_size", "seq_len", "num_tokens", "d_model", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim")


@dataclass(frozen=True)
class GdnRows:
    """Measured layers of one phase: shape columns and the summed conv + scan latency in seconds."""

    cols: dict[str, FloatArray]
    measured_s: FloatArray
    kernels: tuple[str, ...]


def read_gdn(path: Path, phase: LinearPhase) -> GdnRows:
    """Rows of ``phase`` with the conv and scan latencies summed per shape."""
    if not path.is_file():
        raise SpecError("file not found", source=str(path))
    sums: dict[tuple[str, ...], dict[str, float]] = defaultdict(dict)
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["phase"] == PHASES[phase]:
                key = (*(r[c] for c in _KEY), r["model_name"])
                kind = "conv" if "conv1d" in r["kernel_source"] else "scan"
                sums[key][kind] = sums[key].get(kind, 0.0) + float(r["latency_ms"]) * 1e-3
                sums[key][f"name_{kind}"] = hash(r["kernel_source"])
    keys = [k for k, v in sums.items() if "conv" in v and "scan" in v]
    if not keys:
        raise SpecError(f"no {PHASES[phase]} rows with both the conv and the scan kernel", source=str(path))
    cols = {c: np.array([float(k[i]) for k in keys]) for i, c in enumerate(_KEY)}
    with path.open(newline="") as fh:
        names = sorted({r["kernel_source"] for r in csv.DictReader(fh) if r["phase"] == PHASES[phase]})
    return GdnRows(cols, np.array([sums[k]["conv"] + sums[k]["scan"] for k in keys]), tuple(names))


def predict_gdn_s(rows: GdnRows, params: LinearAttentionParams, gpu: GpuPeaks, sms: int) -> FloatArray:
    """Model seconds of every row (per-GPU heads as measured) on a GPU with ``sms`` multiprocessors."""
    c = rows.cols
    n_k, d_k, n_v, d_v = c["num_k_heads"], c["head_k_dim"], c["num_v_heads"], c["head_v_dim"]
    return linear_attention_kernel_s(
        c["num_tokens"],
        c["batch_size"],
        2.0 * n_k * d_k + 2.0 * n_v * d_v,
        n_v * d_k * d_v * STATE_DTYPE_BYTES,
        4.0 * n_v * d_k * d_v,
        (n_v, float(sms)),
        gpu,
        params,
    )


_X0 = {"compute_fraction": 0.3, "memory_fraction": 0.5, "overhead_s": 1e-5, "smooth_q": 3.0, "serial_s_per_token": 1e-8}
_BOUNDS = {
    "compute_fraction": (0.005, 1.0),
    "memory_fraction": (0.01, 1.0),
    "overhead_s": (1e-7, 1e-3),
    "smooth_q": (1.0, 16.0),
    "serial_s_per_token": (1e-12, 1e-5),
}


def fit_gdn(rows: GdnRows, gpu: GpuPeaks, sms: int) -> tuple[LinearAttentionParams, ErrorStats]:
    """Least-squares fit on a deterministic subsample; errors over every row."""
    idx = subsample_index(rows.measured_s.size, MAX_GDN_FIT_ROWS)
    sub = GdnRows({k: v[idx] for k, v in rows.cols.items()}, rows.measured_s[idx], rows.kernels)

    def predict(p: dict[str, float]) -> FloatArray:
        return predict_gdn_s(sub, LinearAttentionParams(**p), gpu, sms)

    res = fit_parameters(predict, _X0, _BOUNDS, sub.measured_s, f_scale=0.05)
    params = LinearAttentionParams(**res.params)
    return params, error_stats(predict_gdn_s(rows, params, gpu, sms), rows.measured_s)
