"""Fit the EP all-to-all entries (:class:`pdplan.specs.kernel_table.A2aParams`) to AIConfigurator's DeepEP tables.

``deepep_normal_sglang.csv`` (normal mode; ``dispatch_transmit_us`` + ``notify``, one row per SM budget: the
DeepEP default of 20 SMs is kept, ``deep_ep.Buffer.num_sms = 20``) and ``deepep_ll_sglang.csv`` (low-latency
mode, ``*_avg_t_us``) time one dispatch and one combine for ``num_token`` tokens per GPU on one node of 8 GPUs
(EP 8). Their bandwidth columns show the bytes counted: FP8 dispatch (1 B + scales), BF16 combine.
``moe_a2a_vllm.csv`` (vLLM's DeepEP high-throughput / low-latency backends, EP 8) is an independent check.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters
from pdplan.errors import SpecError
from pdplan.perf.moe_a2a import A2aPhase, a2a_bytes
from pdplan.specs.kernel_table import A2aMode, AlphaBeta
from pdplan.types import FloatArray

EP_MEASURED = 8
NORMAL_SMS = "20"


def read_deepep(
    data_dir: Path, mode: A2aMode, phase: A2aPhase
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(tokens, hidden, top_k, seconds) of one mode and phase."""
    name = "deepep_normal_sglang.csv" if mode == "normal" else "deepep_ll_sglang.csv"
    path = data_dir / name
    if not path.is_file():
        raise SpecError("file not found", source=str(path))
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if mode != "normal" or r[f"{phase}_sms"] == NORMAL_SMS]
    if mode == "normal":
        t_us = [float(r[f"{phase}_transmit_us"]) + float(r[f"{phase}_notify_us"]) for r in rows]
    else:
        t_us = [float(r[f"{phase}_avg_t_us"]) for r in rows]
    cols = [np.array([float(r[c]) for r in rows]) for c in ("num_token", "hidden_size", "num_topk")]
    return cols[0], cols[1], cols[2], np.array(t_us) * 1e-6


def read_vllm_a2a(
    data_dir: Path, mode: A2aMode, phase: A2aPhase
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """The same arrays from ``moe_a2a_vllm.csv`` (backend deepep_ht = normal, deepep_ll = low-latency)."""
    backend = "deepep_ht" if mode == "normal" else "deepep_ll"
    with (data_dir / "moe_a2a_vllm.csv").open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["comm_backend"] == backend and r["phase"] == phase]
    cols = [np.array([float(r[c]) for r in rows]) for c in ("num_tokens", "hidden_size", "topk", "latency")]
    return cols[0], cols[1], cols[2], cols[3] * 1e-6


def predict_s(
    ab: AlphaBeta, tokens: FloatArray, hidden: FloatArray, top_k: FloatArray, mode: A2aMode, phase: A2aPhase
) -> FloatArray:
    out = np.empty_like(tokens)
    for k in np.unique(top_k):
        m = top_k == k
        out[m] = (
            ab.alpha_s + a2a_bytes(tokens[m] * hidden[m], 1.0, int(k), EP_MEASURED, mode, phase) / ab.bus_bytes_per_s
        )
    return out


def fit_a2a(data_dir: Path, mode: A2aMode, phase: A2aPhase) -> tuple[AlphaBeta, ErrorStats]:
    """α-β of one mode and phase, least squares on log-time residuals over every row."""
    tokens, hidden, top_k, measured = read_deepep(data_dir, mode, phase)

    def predict(p: dict[str, float]) -> FloatArray:
        return predict_s(AlphaBeta(**p), tokens, hidden, top_k, mode, phase)

    x0 = {"alpha_s": 2e-5, "bus_bytes_per_s": 2e11}
    bounds = {"alpha_s": (1e-7, 1e-3), "bus_bytes_per_s": (1e9, 5e12)}
    res = fit_parameters(predict, x0, bounds, measured, f_scale=0.05)
    ab = AlphaBeta(**res.params)
    return ab, error_stats(predict_s(ab, tokens, hidden, top_k, mode, phase), measured)
