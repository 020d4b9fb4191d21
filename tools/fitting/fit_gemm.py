"""Fit of one GPU's GEMM entries (:class:`~pdplan.perf.kernels.GemmParams`) to AIConfigurator's ``gemm.csv``.

Discrete structure (the M tile, the L2 mode, the small-M entry's rows) is chosen by the lowest P90, the
numbers by :func:`~pdplan.calibrate.fit.fit_parameters` on a deterministic subsample; every fit evaluates
:func:`~pdplan.perf.kernels.gemm_time_s` with ``warm_l2=True`` (the benchmark repeats one kernel).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fitting.fit_families import F_SCALE, stub_table
from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters, subsample_index
from pdplan.perf.kernels import gemm_time_s
from pdplan.specs.kernel_table import GemmFlavour, GemmParams, GpuPeaks
from pdplan.types import FloatArray, IntArray

GEMM_START = {
    "peak_fraction": 0.8,
    "m0_tokens": 32.0,
    "n0_elements": 64.0,
    "k0_elements": 64.0,
    "memory_fraction": 0.8,
    "overhead_s": 3e-6,
    "smooth_q": 2.0,
    "l2_bytes": 4e6,
    "l2_speedup": 2.0,
    "k_latency_s": 3e-6,
    "k_sat_elements": 2048.0,
}
GEMM_BOUNDS = {
    "peak_fraction": (0.05, 1.0),
    "m0_tokens": (1e-3, 4096.0),
    "n0_elements": (1e-3, 16384.0),
    "k0_elements": (1e-3, 16384.0),
    "memory_fraction": (0.05, 1.0),
    "overhead_s": (1e-7, 1e-4),
    "smooth_q": (1.0, 16.0),
    "l2_bytes": (1e3, 5e8),
    "l2_speedup": (1.0, 16.0),
    "k_latency_s": (1e-9, 1e-3),
    "k_sat_elements": (1.0, 1e6),
}
GEMM_M_TILES = (0, 128, 256)
"""M-tile candidates: 0 = none (cuBLAS picks among many tiles), 128 / 256 (CUTLASS FP8 kernels in
vLLM dispatch M > 128 to 128-row tiles, clustered in pairs)."""

GEMM_SMALL_M_TOKENS: dict[GemmFlavour, int] = {"fp8": 128}
"""Rows up to which the flavour's kernels are a separate small-M family, fitted as ``small_m`` on those rows
alone (the general entry on the rows above). vLLM's CUTLASS FP8 ``scaled_mm`` dispatches M in [1, 16],
(16, 64] and (64, 128] to small-tile configurations and M > 128 to its 128x128 default (SM90:
``csrc/quantization/cutlass_w8a8/c3x/scaled_mm_sm90_fp8_dispatch.cuh``; SM89 splits at 16 / 32 / 64 / 128 /
256, ``scaled_mm_c2x_sm89_fp8_dispatch.cuh``; the SM100 dispatch of vLLM 0.24 was not read, its B200 rows
jump at 129 too). Measured FP8 times are flat in m up to 128 and jump 20-60 % at 129 on H100/H200
(``gemm.csv``), which one entry's smooth ramp in m cannot follow: fitted over all rows, it read +4 to +8 %
slow at decode-sized m. bf16 (cuBLAS heuristics, no fixed ladder) keeps one entry."""

GEMM_L2_BY_EVIDENCE: frozenset[GemmFlavour] = frozenset({"fp8"})
"""Flavours whose warm-L2 term is fitted only where the rows show an L2 gain (:func:`l2_evidenced`).
Without one the term only rescaled the bandwidth: H100 FP8 fitted l2_bytes = 500 MB (the bound, 10x its
50 MB L2) at 1.07x, a 7 % speed-up of every weight stream that serving prices (``warm_l2=False``) then
lost. bf16 entries keep their fitted terms (at most 6 MB of weights, within ±1 % at n·k >= 16 M)."""

L2_EVIDENCE_MAX_M = 16
"""Rows (m <= this) whose weight stream dominates the bytes, for :func:`l2_evidenced`."""


def l2_evidenced(rows: tuple[FloatArray, ...], flavour: GemmFlavour, gpu: GpuPeaks) -> bool:
    """True if some measured GEMM with m <= 16 reads its weights faster than the datasheet HBM rate, which
    only an L2 hit can do. Of the measured GPUs only the L40S does (FP8: 684 of 7,720 such rows, up to 1.9x
    its GDDR6 rate, weights of 2-8 MB); H100, H200 and B200 stay below 0.93x at every size, also below
    their L2 capacity."""
    m, n, k, t = rows
    small = m <= L2_EVIDENCE_MAX_M
    weight_bytes = n[small] * k[small] * (2.0 if flavour == "bf16" else 1.0)
    return bool(np.any(weight_bytes / t[small] > gpu.memory_bytes_per_s))


GEMM_SMALL_M_TILES = (0, 16, 64)
"""M-tile candidates of the small-M entry: the SM90 buckets' row tiles (M <= 16 swaps A and B into a
16-wide tile, (16, 64] and (64, 128] run 64-row tiles, so 65-128 rows pay two)."""

SMALL_M_HELD = {"m0_tokens": 0.0, "n0_elements": 0.0, "k0_elements": 0.0}
"""The small-M entry has no saturating ramps: its kernels stream the weights (compute hidden behind them),
so compute is the tile-padded FLOPs at a fitted rate. Fitted free, the ramps took thousands of phantom
elements (n0 = 4,140, m0 = 141 on H100) and made the time rise 23 % from m = 65 to 128 where the
measured H100 kernel is flat; held at 0 the n·k >= 16 M rows read +0.3 / +0.3 / +0.1 % at m 1-8 / 9-32
/ 33-128 (ramps free: -2.8 / -1.4 / +5.5 %) for 0.2 points more median and 0.9 more P90 over all rows."""

_QUANT_KEYS = ("quant_bytes_per_element", "quant_s_per_token")


def fit_gemm(
    data: Mapping[str, FloatArray], flavour: GemmFlavour, gpu: GpuPeaks, gpu_id: str
) -> tuple[GemmParams, ErrorStats]:
    """Fit one GEMM flavour (per (M tile, L2 mode) candidate, the lowest subsample P90 kept) and judge it
    on every row. With :data:`GEMM_SMALL_M_TOKENS`, ``small_m`` is fitted on the rows up to the threshold
    (:data:`SMALL_M_HELD`, and the general entry's activation-quantisation terms: the same quantisation
    kernel runs before either GEMM); the general entry on the rows above it or on every row, whichever
    pair has the lower P90 on every row (H100/H200: above, the large-M kernel alone; B200: every row)."""
    m, n, k, t = (np.asarray(data[c]) for c in ("m", "n", "k", "latency_ms"))
    t = t * 1e-3
    target = (gpu, gpu_id, flavour in GEMM_L2_BY_EVIDENCE and not l2_evidenced((m, n, k, t), flavour, gpu))
    small_tokens = GEMM_SMALL_M_TOKENS.get(flavour, 0)
    if not small_tokens:
        params = GemmParams(**_fit_gemm_rows((m, n, k, t), flavour, target, GEMM_M_TILES, {}))
        return params, _judge(params, (m, n, k, t), flavour, gpu, gpu_id)
    small_rows = m <= small_tokens
    best: tuple[ErrorStats, GemmParams] | None = None
    for general_rows in (~small_rows, np.ones_like(small_rows)):
        sel = [a[general_rows] for a in (m, n, k, t)]
        general = _fit_gemm_rows((sel[0], sel[1], sel[2], sel[3]), flavour, target, GEMM_M_TILES, {})
        held = {**SMALL_M_HELD, **{q: general[q] for q in _QUANT_KEYS if q in general}}
        rows = (m[small_rows], n[small_rows], k[small_rows], t[small_rows])
        small = _fit_gemm_rows(rows, flavour, target, GEMM_SMALL_M_TILES, held)
        params = GemmParams(**general, small_m_tokens=small_tokens, small_m=GemmParams(**small))
        stats = _judge(params, (m, n, k, t), flavour, gpu, gpu_id)
        if best is None or stats.p90_abs_pct < best[0].p90_abs_pct:
            best = (stats, params)
    assert best is not None
    return best[1], best[0]


def _judge(
    params: GemmParams, rows: tuple[FloatArray, ...], flavour: GemmFlavour, gpu: GpuPeaks, gpu_id: str
) -> ErrorStats:
    m, n, k, t = rows
    table = stub_table(gpu_id, gemm={flavour: params})
    return error_stats(gemm_time_s(m, n, k, flavour, gpu, table, warm_l2=True), t)


def _fit_gemm_rows(
    rows: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    flavour: GemmFlavour,
    target: tuple[GpuPeaks, str, bool],
    m_tiles: tuple[int, ...],
    held: Mapping[str, float],
) -> dict[str, Any]:
    """The best (lowest subsample P90) single-entry fit of ``rows`` (m, n, k, seconds) over the M-tile and
    L2-mode candidates; ``target`` = (GPU, its id, cold: no warm-L2 term); ``held`` parameters are fixed."""
    m, n, k, t = rows
    gpu, gpu_id, cold = target
    idx = subsample_index(t.size)
    start, bounds = dict(GEMM_START), dict(GEMM_BOUNDS)
    if flavour == "fp8":  # per-token activation quantisation pass, fitted
        start.update(quant_bytes_per_element=3.0, quant_s_per_token=3e-9)
        bounds.update(quant_bytes_per_element=(0.1, 64.0), quant_s_per_token=(1e-13, 1e-7))
    for key in [*held, *(("l2_bytes", "l2_speedup") if cold else ())]:
        start.pop(key, None)
        bounds.pop(key, None)
    best: tuple[float, dict[str, Any]] | None = None
    for m_tile in m_tiles:
        for l2_mode in ("first",) if cold else ("first", "lru"):
            fixed = {"m_tile": m_tile, "l2_mode": l2_mode, **held}

            def predict(p: dict[str, float], sel: IntArray = idx, fixed: dict[str, Any] = fixed) -> FloatArray:
                table = stub_table(gpu_id, gemm={flavour: {**p, **fixed}})
                return gemm_time_s(m[sel], n[sel], k[sel], flavour, gpu, table, warm_l2=True)

            fit = fit_parameters(predict, start, bounds, t[idx], f_scale=F_SCALE)
            if best is None or fit.stats.p90_abs_pct < best[0]:
                best = (fit.stats.p90_abs_pct, {**fit.params, **fixed})
    assert best is not None
    return best[1]
