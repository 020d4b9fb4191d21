"""All-reduce α-β fits (custom all-reduce and NCCL, per GPU count) to AIConfigurator measurements."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fitting.fit_families import F_SCALE, stub_table
from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters
from pdplan.perf.kernels import allreduce_time_s
from pdplan.specs.kernel_table import AllreduceParams, AlphaBeta, GpuPeaks
from pdplan.types import FloatArray, IntArray

AB_START = {"alpha_s": 5e-6, "bus_bytes_per_s": 1e11}
AB_BOUNDS = {"alpha_s": (1e-7, 1e-3), "bus_bytes_per_s": (1e8, 5e12)}


def fit_alpha_beta(
    data: Mapping[str, FloatArray], gpu: GpuPeaks, gpu_id: str, sel: IntArray | None = None
) -> AlphaBeta:
    """α (s) and bus bandwidth β (bytes/s), ring factor 2(n−1)/n, on rows ``sel`` (default all)."""
    pick = np.arange(data["num_gpus"].size) if sel is None else sel
    n, size = data["num_gpus"][pick], data["message_bytes"][pick]

    def predict(p: dict[str, float]) -> FloatArray:
        return allreduce_time_s(size, n, gpu, stub_table(gpu_id, allreduce=p))

    fit = fit_parameters(predict, AB_START, AB_BOUNDS, data["latency_ms"][pick] * 1e-3, f_scale=F_SCALE)
    return AlphaBeta(**fit.params)


def fit_allreduce(
    custom: Mapping[str, FloatArray], nccl: Mapping[str, FloatArray], gpu: GpuPeaks, gpu_id: str
) -> tuple[AllreduceParams, dict[str, ErrorStats]]:
    """Per-GPU-count α-β for the custom all-reduce and for NCCL; fallback = NCCL over all counts.

    Stats: each implementation's own fit ("custom", "nccl") and the engine choice ("best": the
    faster model against the faster measurement at the same message size and GPU count).
    """
    fallback = fit_alpha_beta(nccl, gpu, gpu_id)
    by: dict[str, dict[int, AlphaBeta]] = {"custom": {}, "nccl": {}}
    for name, rows in (("custom", custom), ("nccl", nccl)):
        for count in np.unique(rows["num_gpus"]):
            sel = np.flatnonzero(rows["num_gpus"] == count)
            by[name][int(count)] = fit_alpha_beta(rows, gpu, gpu_id, sel)
    params = AllreduceParams(
        alpha_s=fallback.alpha_s, bus_bytes_per_s=fallback.bus_bytes_per_s, custom=by["custom"], nccl=by["nccl"]
    )
    stats = {}
    for name, rows in (("custom", custom), ("nccl", nccl)):
        one = params.model_copy(update={"custom": by[name], "nccl": by[name]})
        table = stub_table(gpu_id, allreduce=one.model_dump())
        pred = allreduce_time_s(rows["message_bytes"], rows["num_gpus"], gpu, table)
        stats[name] = error_stats(pred, rows["latency_ms"] * 1e-3)
    stats["best"] = best_allreduce_stats(custom, nccl, params, gpu, gpu_id)
    return params, stats


def best_allreduce_stats(
    custom: Mapping[str, FloatArray],
    nccl: Mapping[str, FloatArray],
    params: AllreduceParams,
    gpu: GpuPeaks,
    gpu_id: str,
) -> ErrorStats:
    """Model (faster implementation) against min(custom, NCCL) measured at matching size and count."""
    meas = {
        (float(n), float(s)): t
        for n, s, t in zip(custom["num_gpus"], custom["message_bytes"], custom["latency_ms"], strict=True)
    }
    pairs = [
        (n, s, min(meas[(float(n), float(s))], t))
        for n, s, t in zip(nccl["num_gpus"], nccl["message_bytes"], nccl["latency_ms"], strict=True)
        if (float(n), float(s)) in meas
    ]
    arr = np.array(pairs, dtype=float).reshape(-1, 3)
    table = stub_table(gpu_id, allreduce=params.model_dump())
    return error_stats(allreduce_time_s(arr[:, 1], arr[:, 0], gpu, table), arr[:, 2] * 1e-3)
