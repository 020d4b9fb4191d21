"""A trace's (prompt bin, cache class) cells priced at their own requests (issue #22; docs/prefix_cache.md §9).

With a prefix cache, an xPyD prefill side prices each prompt bin k split into its cache classes h
(:func:`pdplan.serving.disaggregated._cached_prefill_side`): a cell's prompts are the bin's quadrature lengths
(:func:`pdplan.workload.quadrature.input_quadrature`, interpolated linearly in probability through the bins' means)
and its hit is the class's mean in the bin. For a trace that loses the long prefills: on the Mooncake trace the
last body bin (47,391–61,772 tokens) straddles the 51,690 tokens whose prefill alone takes the 2 s TTFT SLO, the
trace puts 61 % of the bin above it and the four quadrature lengths half, so with nothing queued 3.07 % of the
cells' mass exceeds 2 s where 3.67 % of the requests do (``benchmarks/trace_zero_load_attainment.py``).

A trace has its requests, each with its own prompt and hit (:class:`pdplan.serving.prefix_cache.TraceRequests`), so
each cell takes J = :data:`TRACE_CELL_POINTS` of its own counted requests: those at levels (j + ½)/J of the cell's
own prefill prices (compute on the missed tokens plus each hit tier's exposed load), each with its own prompt and
hit. The cell's points are then J quantiles of its price law, the joint law of prompt and hit inside the cell
(equal-probability points, like the quadrature's: weights p_kh/J). A cell no counted request reaches keeps the
quadrature lengths and the class's mean hit (a class the trace never shows in a bin has weight 0 there).

J = 8 gives the zero-load shares over 2 s of 3.61 / 3.43 / 1.79 / 3.55 / 2.60 % on the five trace cases of the
grid against 3.67 / 3.48 / 1.84 / 3.62 / 2.64 % per request (J = 4: 3.07 / 2.92 / 1.51 / 3.02 / 2.20; J = 16 as J =
8), at twice the quadrature's points per cell.

A sensitivity that scales the prompt lengths (:func:`pdplan.search.exact._scaled_lengths`) scales each bin's
representative; the cell's requests are scaled by the same factor, the representative over the trace's own
(:func:`_length_factor`, exactly 1 unscaled).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pdplan.numerics.sorted_stats import sorted_unique
from pdplan.serving.prefix_cache import CacheClasses, TraceRequests
from pdplan.serving.resolve import WORKLOAD_BINS, ResolvedScenario
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import cached_prefill_perf
from pdplan.types import FloatArray
from pdplan.workload.bins import discretize

TRACE_CELL_POINTS = 8
"""Own requests per (bin, class) cell (module docstring: 8 reaches 16's zero-load shares; 4 does not)."""


def request_price_s(
    hw: RoleHardware, classes: CacheClasses, kv_bytes_per_token: float, prompt: FloatArray, parts: FloatArray
) -> FloatArray:
    """Each request's prefill compute on its missed tokens plus the load its hit tiers leave exposed (s), for
    prompts ``[...]`` with hit tokens ``parts [..., H]`` per class tier (the last block clipped to the prompt less
    one token, the tiers' parts in proportion)."""
    total = parts.sum(axis=-1)
    hit = np.clip(np.minimum(total, prompt - 1.0), 0.0, None)
    compute = cached_prefill_perf(hw, prompt.ravel(), hit.ravel()).latency_s.reshape(prompt.shape)
    scale = np.where(total > 0, hit / np.maximum(total, 1e-300), 0.0)
    load = np.zeros_like(compute)
    for g, tier in enumerate(classes.load_from):
        if tier is not None:
            load += tier.exposed_load_s(parts[..., g] * scale, kv_bytes_per_token, compute, classes.layers)
    return np.asarray(compute + load, dtype=np.float64)


def _length_factor(res: ResolvedScenario[Any]) -> FloatArray:
    """``[K]`` each bin's representative over the trace's own (:func:`pdplan.workload.bins.discretize`, as
    :func:`pdplan.serving.resolve.resolve` bins it): 1 exactly unless a sensitivity scaled the lengths."""
    model = res.model
    window = min(model.max_position_embeddings, res.scenario.max_model_len or model.max_position_embeddings)
    own = discretize(res.scenario.workload, max_bins=WORKLOAD_BINS, context_window=window).input_tokens
    return np.asarray(res.lengths.input_tokens / own, dtype=np.float64)


def trace_cells(
    res: ResolvedScenario[Any], classes: CacheClasses, requests: TraceRequests, kv_bytes_per_token: float
) -> tuple[FloatArray, FloatArray]:
    """``(points [K·H, J], hit tokens [K·H, J])``: each (bin, class) cell at its own requests (module docstring)."""
    model = res.model
    window = min(model.max_position_embeddings, res.scenario.max_model_len or model.max_position_embeddings)
    prompt = np.minimum(requests.prompt_tokens, window - 1.0)
    price = request_price_s(res.hardware.prefill, classes, kv_bytes_per_token, prompt, requests.parts)
    h = classes.weights.shape[1]
    fallback = np.repeat(res.input_points, h, axis=0)
    return own_points(requests, prompt, price, fallback, classes.hit_tokens.ravel(), _length_factor(res))


def own_points(
    requests: TraceRequests,
    prompt: FloatArray,
    price_s: FloatArray,
    fallback: FloatArray,
    fallback_hits: FloatArray,
    factor: FloatArray,
    points: int = TRACE_CELL_POINTS,
) -> tuple[FloatArray, FloatArray]:
    """``(points [K·H, J], hit tokens [K·H, J])``: cell (k, h) at the counted requests of bin k and class h at levels
    (j + ½)/J of their ``price_s`` (ties in trace order), each with its ``prompt`` times the bin's ``factor [K]``
    and its own hit; a cell no counted request reaches at its ``fallback [K·H, Jq]`` lengths (resampled to J equal
    weights) with its ``fallback_hits [K·H]``."""
    cells, jq = fallback.shape
    h = cells // factor.size
    levels = (np.arange(points) + 0.5) / points
    out = fallback[:, np.minimum((levels * jq).astype(np.int64), jq - 1)]
    hits = np.repeat(np.asarray(fallback_hits, dtype=np.float64)[:, None], points, axis=1)
    order = np.argsort(price_s, kind="stable")
    order = order[order >= requests.counted_from]
    cell_of = requests.bin[order] * h + requests.cls[order]
    for cell in sorted_unique(cell_of):
        rows = order[cell_of == cell]
        pick = rows[np.minimum((levels * rows.size).astype(np.int64), rows.size - 1)]
        out[cell] = np.maximum(prompt[pick] * factor[cell // h], 1.0)
        hits[cell] = requests.parts[pick].sum(axis=1)
    return np.asarray(out, dtype=np.float64), hits
