"""Fit SGLang's wide-EP MoE entries (:class:`pdplan.specs.moe_wideep.WideEpMoeParams`) to AIConfigurator's tables.

``wideep_context_moe_sglang.csv`` (prefill) and ``wideep_generation_moe_sglang.csv`` (decode), SGLang 0.5.10, time
``DeepEPMoE.run_moe_core`` (the DeepGEMM grouped GEMMs with their layout kernels; not the DeepEP dispatch/combine,
which :mod:`pdplan.perf.moe_a2a` prices) of DeepSeek-V3's MoE layer (h 7168, I 2048, top-8 of 256, FP8 block
weights) on one GPU of an EP group of ``moe_ep_size`` (2-256, emulated by loading 256/ep·2 experts on 2 GPUs).
What the collector (``collector/sglang/collect_wideep_deepep_moe.py``, ai-dynamo/aiconfigurator) does, read from
its source:

* ``num_tokens`` is the global batch: per-rank tokens × ``moe_ep_size``;
* ``uniform`` gives every local expert exactly T·k/E tokens (prefill ``num_recv = [T·k/256]·local``; decode
  ``masked_m``), i.e. pdplan's ``balanced`` law, not independent random choices;
* ``power_law_<alpha>``: AIConfigurator's power-law generator with the busiest rank on the measured GPU
  (pdplan's ``power_law`` law);
* prefill hands the layer all T tokens (most with no local expert), so the per-row term counts T rows there
  (:mod:`pdplan.perf.moe_wideep` docstring); decode fills a fixed buffer and has no per-row term.

The discrete M tile is chosen by the lowest P90 (contiguous layout: DeepGEMM aligns experts to 128 rows; masked
layout: its block_m of 64 or 128).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fitting.fit_moe import row_shapes
from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters
from pdplan.errors import SpecError
from pdplan.perf.moe import MoeLayerShape
from pdplan.perf.moe_routing import Routing
from pdplan.perf.moe_wideep import wideep_moe_time_s
from pdplan.specs.kernel_table import GpuPeaks, KernelTable
from pdplan.specs.moe_wideep import WideEpMoeParams, WideEpPhase
from pdplan.specs.routing_law import RoutingLaw
from pdplan.types import FloatArray, IntArray

FILES: dict[WideEpPhase, str] = {
    "prefill": "wideep_context_moe_sglang.csv",
    "decode": "wideep_generation_moe_sglang.csv",
}
FP8_BLOCK_WEIGHT_BYTES = 1.0 + 4.0 / (128.0 * 128.0)
"""FP8 weights with one fp32 scale per 128×128 block (DeepSeek-V3's checkpoint format)."""
M_TILES: dict[WideEpPhase, tuple[int, ...]] = {"prefill": (128,), "decode": (64, 128)}
POWER_LAW_SAMPLES = 16
POWER_LAW_SEED = 20250505
_COLS = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "latency")


@dataclass(frozen=True)
class WideEpRows:
    """Measured layers: shape columns, routing law per row, latency (s), and the collector's power-law routing
    (mean pairs and hit experts of :func:`power_law_draws`; NaN on balanced rows), drawn once on reading."""

    cols: dict[str, FloatArray]
    laws: tuple[RoutingLaw, ...]
    measured_s: FloatArray
    drawn_pairs: FloatArray
    drawn_hit: FloatArray


def law_of(distribution: str) -> RoutingLaw:
    """The collector's label as a routing law (module docstring: ``uniform`` is balanced)."""
    if distribution == "uniform":
        return RoutingLaw("balanced")
    if distribution.startswith("power_law_"):
        return RoutingLaw("power_law", float(distribution.removeprefix("power_law_")))
    raise SpecError(f"unknown wide-EP MoE distribution {distribution!r}", field="distribution")


def read_wideep(data_dir: Path, phase: WideEpPhase) -> WideEpRows:
    """Every ``fp8_block`` row of one phase's file."""
    path = data_dir / FILES[phase]
    if not path.is_file():
        raise SpecError("file not found", source=str(path))
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["moe_dtype"] == "fp8_block"]
    if not rows:
        raise SpecError("no fp8_block rows", source=str(path))
    cols = {c: np.array([float(r[c]) for r in rows]) for c in _COLS}
    laws = tuple(law_of(r["distribution"]) for r in rows)
    pairs, hit = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    for i, law in enumerate(laws):
        if law.kind == "power_law":
            args = (int(cols["num_experts"][i]), int(cols["topk"][i]), int(cols["moe_ep_size"][i]), law.alpha)
            draws = power_law_draws(int(cols["num_tokens"][i]), *args, samples=POWER_LAW_SAMPLES)
            pairs[i], hit[i] = draws.sum(axis=1).mean(), (draws > 0).sum(axis=1).mean()
    return WideEpRows(cols, laws, cols["latency"] * 1e-3, pairs, hit)


def power_law_draws(tokens: int, experts: int, top_k: int, ep: int, alpha: float, samples: int) -> FloatArray:
    """Token counts of the busiest rank's experts, ``[samples, E/ep]``, drawn as AIConfigurator's
    ``_generate_power_law_distribution`` draws them (collector/helper.py): E loads from the power law on [1, 0.8·T]
    (T·k > E) or [0.01, 2], scaled to T·k and rounded, the rounding error handed out one by one over the experts
    in descending order of load (or taken from the smallest), and the rank of most tokens kept. Seeded: the
    calibration is deterministic."""
    rng = np.random.default_rng(POWER_LAW_SEED)
    lo, hi = (1.0, 0.8 * tokens) if tokens * top_k > experts else (0.01, 2.0)
    e = 1.0 - alpha
    u = rng.random((samples, experts))
    x = ((hi**e - lo**e) * u + lo**e) ** (1.0 / e)
    counts = np.round(x / x.sum(axis=1, keepdims=True) * tokens * top_k)
    for row in counts:
        delta = int(tokens * top_k - row.sum())
        order = np.argsort(-row, kind="stable")
        if delta > 0:
            row[order] += delta // experts + (np.arange(experts) < delta % experts)
        for _ in range(-delta):
            small = order[::-1][row[order[::-1]] > 0]
            row[small[0] if small.size else int(np.argmax(row))] -= 1
    ranks = counts.reshape(samples, ep, experts // ep)
    busiest = ranks.sum(axis=2).argmax(axis=1)
    out: FloatArray = ranks[np.arange(samples), busiest]
    return out


def collector_routing(
    shape: MoeLayerShape, phase: WideEpPhase, m_tile: int, rows: WideEpRows, idx: IntArray
) -> Routing:
    """Pairs and experts read as the collector's inputs make the kernel see them (module docstring):

    * ``uniform`` (balanced): in prefill ``num_recv_tokens_per_expert`` is T·k/E per expert, not padded to
      DeepGEMM's 128-row alignment, so below 128 tokens per expert an M block mixes experts and reads the weights
      of one: the experts read are ⌈P/m_tile⌉ (at most H); decode fills ``masked_m`` per expert as balanced;
    * ``power_law_<alpha>``: the mean pairs and hit experts of :func:`power_law_draws` (prefill pads each
      expert's count to 128 rows, ``power_law_deepep_prefill``, so its layout is aligned).
    """
    if shape.law.kind == "power_law":
        return Routing(rows.drawn_pairs[idx], rows.drawn_hit[idx])
    r = shape.routing()
    if phase == "prefill":
        return Routing(r.pairs, np.minimum(r.hit, np.ceil(r.pairs / m_tile)))
    return r


def predict_wideep_s(
    rows: WideEpRows,
    params: WideEpMoeParams,
    phase: WideEpPhase,
    gpu: GpuPeaks,
    table: KernelTable,
    closed_form: bool = False,
) -> FloatArray:
    """Model seconds per row, with the collector's row count (prefill: all T tokens; decode: no row term).

    ``closed_form``: power-law rows routed by :func:`pdplan.perf.moe_routing.route` (what serving prices) instead
    of the mean of the collector's draws (what the fit uses): the check of the routing law on measured rows."""
    c = rows.cols
    out = np.empty_like(rows.measured_s)
    for idx, shape in row_shapes(rows, FP8_BLOCK_WEIGHT_BYTES):
        collector_rows = c["num_tokens"][idx] if phase == "prefill" else np.zeros(idx.size)
        if closed_form and shape.law.kind == "power_law":
            routing = shape.routing()
        else:
            routing = collector_routing(shape, phase, params.m_tile, rows, idx)
        out[idx] = wideep_moe_time_s(shape, phase, gpu, table, params, rows=collector_rows, routing=routing)
    return out


_X0 = {
    "peak_fraction": 0.6,
    "m0_tokens": 8.0,
    "memory_fraction": 0.8,
    "overhead_s": 3e-5,
    "smooth_q": 4.0,
    "per_expert_s": 1e-6,
}
_BOUNDS = {
    "peak_fraction": (0.05, 1.0),
    "m0_tokens": (0.01, 512.0),
    "memory_fraction": (0.1, 1.0),
    "overhead_s": (1e-7, 3e-3),
    "smooth_q": (1.0, 16.0),
    "per_row_s": (1e-13, 1e-6),
    "per_expert_s": (1e-10, 1e-4),
}


def fit_wideep(
    rows: WideEpRows, phase: WideEpPhase, gpu: GpuPeaks, table: KernelTable
) -> tuple[WideEpMoeParams, ErrorStats]:
    """Least-squares fit of one phase's entry on every row (each M tile tried; lowest P90 kept)."""
    best: tuple[float, WideEpMoeParams] | None = None
    x0 = {**_X0, "per_row_s": 4e-9} if phase == "prefill" else dict(_X0)
    for tile in M_TILES[phase]:

        def predict(p: dict[str, float], tile: int = tile) -> FloatArray:
            return predict_wideep_s(rows, WideEpMoeParams(**p, m_tile=tile), phase, gpu, table)

        res = fit_parameters(predict, x0, _BOUNDS, rows.measured_s, f_scale=0.05)
        if best is None or res.stats.p90_abs_pct < best[0]:
            best = (res.stats.p90_abs_pct, WideEpMoeParams(**res.params, m_tile=tile))
    assert best is not None
    params = best[1]
    return params, error_stats(predict_wideep_s(rows, params, phase, gpu, table), rows.measured_s)
