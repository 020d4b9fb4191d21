"""The colocated model's prefix cache: each (prompt, output) cell split into the prefix cache's classes
(:mod:`pdplan.serving.prefix_cache`), priced on the tokens it computes (docs/prefix_cache.md §8).

* **Cells.** Cell (i, j) of prompt bin i and output bin j becomes cells (i, h, j), one per class h (a miss, or a hit
  in a tier), with probability ``p_ij · w_ih`` (where the cache model lays out the prompts itself, shared prefixes,
  bin i's mass is the classes' own: ``p_ij · m_i / p_i · w_ih``, :func:`_bin_reweighted`). Each keeps its whole
  prompt as KV context (the decode steps attend to all of it, the KV pool holds all of it) and computes only
  ``m = L − h`` tokens (:attr:`pdplan.queueing.decode.DecodeWorkload.prefill_tokens`).
* **Prefill price.** prefill-first: the missed tokens' pass over the full context
  (:func:`pdplan.serving.roles.cached_prefill_perf`), at each of the prompt bin's quadrature lengths l_ij
  (:attr:`~pdplan.serving.resolve.ResolvedScenario.input_points`, the xPyD prefill pool's), class h's hit on each
  ``min(hit_h, l_ij − 1)`` (as the xPyD cached prefill side, :mod:`pdplan.serving.disaggregated`), so a cell's TTFT
  offsets and the prompt queue's service law are spread over its bin's lengths, not a point mass at the
  representative (*Lengths within a bin* of :mod:`pdplan.queueing.colocated_queue`); chunked (at the
  representative): the missed tokens cut into chunks, each attending to the cached prefix and the chunks before it
  (:func:`pdplan.serving.roles.cached_chunk_price`).
* **Load.** A hit below HBM is loaded before the request is scheduled (vLLM's offloading connector and LMCache load
  asynchronously and hold the request until its blocks arrive; SGLang HiCache likewise; docs/prefix_cache.md §3), so
  the exposed load — what the engine's layer-by-layer overlap does not hide behind the prefill compute
  (:meth:`pdplan.cache.tiers.CacheTier.exposed_load_s`) — delays the request's TTFT without occupying the GPU
  (prefill-first: per quadrature length, against that length's compute; chunked: at the representative).
* **Chunked models** price no quadrature points: their prefill rides the decode steps at the representative lengths
  (above), so :attr:`CachedCells.prefill_point_s`, :attr:`CachedCells.load_point_s` and the sessions' computed-token
  spread, which only the points read (:func:`pdplan.serving.prefix_cache.point_prices`), are left out (None), and
  the chunk price takes the model without the cache's t_p and G(n) table, which read neither the prompts nor the
  hits (:func:`pdplan.serving.roles.cached_chunk_price` ``like``). A fixed point's every round builds these cells
  (:func:`pdplan.serving.colocated_build._resident_fixed_point`): the skipped parts were a third to a half of a
  round's CPU (cProfile of examples/chat-ppd.yaml and agent-dualpath.yaml, docs/accuracy.md §7.10).
* **Cells kept**: a class with less than :data:`MIN_CLASS_WEIGHT` of its bin is folded into the others (most bins
  are nearly all misses or nearly all hits), so the distributions are not priced on cells of no weight.
* **HBM left for the cache** is the instance's KV capacity less the decoding sequences' mean KV at the rate the hit
  rates hold at, taken from the same instance without a cache
  (:func:`pdplan.serving.colocated_build.resident_tokens`): with a cache the prefill takes less time, the token
  interval is shorter and the resident KV smaller, so this leaves the cache a little less HBM than it has
  (conservative).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.queueing.decode import DecodeWorkload
from pdplan.serving.cache_domain import cache_rate, colocated_domain, turn_duration_s
from pdplan.serving.prefix_cache import CacheClasses, CacheSetup, cache_classes, class_prices, point_prices
from pdplan.serving.resolve import ColocatedHardware, ResolvedScenario
from pdplan.serving.roles import ChunkPrice, cached_chunk_price
from pdplan.types import FloatArray, IntArray

MIN_CLASS_WEIGHT = 1e-4
"""A class holding less than this share of its prompt bin's requests is folded into the bin's other classes (its
cells are dropped and the bin's weights renormalised): fewer cells for the distributions, at most this mass moved."""


@dataclass(frozen=True, slots=True)
class CachedCells:
    """The colocated cells split by cache class (module docstring), ``[I·H·J]`` in (prompt, class, output) order."""

    cells: DecodeWorkload
    prefill_point_s: FloatArray | None
    """prefill-first: ``[C, J]`` the missed tokens' pass per cell at each quadrature length, seconds (None: not
    priced, a chunked model's)."""
    price: ChunkPrice
    """chunked: t_p, and per cell the attention of its chunks and its last chunk's GEMM side."""
    load_cell_s: FloatArray
    """Per cell, the exposed load of its hit tokens (a TTFT delay; chunked), seconds."""
    load_point_s: FloatArray | None
    """``[C, J]`` the same at each quadrature length (prefill-first), seconds (None: not priced)."""
    tpot_defined: npt.NDArray[np.bool_]
    classes: CacheClasses
    input_bin: IntArray
    """Per cell, its prompt bin."""


def _bin_reweighted(prob: FloatArray, classes: CacheClasses) -> FloatArray:
    """``[I, J]`` the cells' probabilities with each prompt bin's mass the classes' own where the cache model lays out
    the prompts (:attr:`pdplan.serving.prefix_cache.CacheClasses.joint`): ``P(i, j) · m_i / P(i)``, m_i the keys'
    mass of bin i, the output law given the prompt bin kept (renormalised: a bin the prompt law leaves empty cannot
    take the keys' mass); else ``prob`` itself."""
    if classes.joint is None:
        return prob
    marginal = prob.sum(axis=1)
    factor = np.where(marginal > 0, classes.joint.sum(axis=1) / np.maximum(marginal, 1e-300), 0.0)
    out = prob * factor[:, None]
    return np.asarray(out / out.sum(), dtype=np.float64)


def cached_cells(
    res: ResolvedScenario[ColocatedHardware],
    setup: CacheSetup,
    plain: DecodeWorkload,
    defined: npt.NDArray[np.bool_],
    resident_tokens: float,
    chunked: ChunkPrice | None = None,
) -> CachedCells:
    """Split ``plain`` (the cells without a cache, prompt-major over the output bins) into the cache's classes.
    ``chunked``: a chunked model's price without the cache (:func:`~pdplan.serving.roles.chunk_price` of the same
    hardware, budget and split): the quadrature points are then not priced and the chunk price reuses its t_p and
    G(n) table (module docstring, *Chunked models*); None: every part priced."""
    hw, lens = res.hardware.colocated, res.lengths
    domain, rate, duration = colocated_domain(res, resident_tokens), cache_rate(res), turn_duration_s(res)
    classes = cache_classes(setup, domain, lens.input_tokens, rate, duration, spread=chunked is None)
    n_in, n_out = lens.input_tokens.size, lens.output_tokens.size
    k, h = classes.weights.shape
    shape = (n_in, h, n_out)
    prompt = np.broadcast_to(lens.input_tokens[:, None], (k, h))
    kvb = res.model.kv_bytes_per_token(hw.precision.kv_bytes)
    priced = class_prices(hw, classes, lens.input_tokens, kvb)
    cached, load = priced.cached_tokens, priced.load_s

    w = np.where(classes.weights >= MIN_CLASS_WEIGHT, classes.weights, 0.0)
    w[np.arange(k), np.argmax(classes.weights, axis=1)] = classes.weights.max(axis=1)  # each bin keeps a class
    w /= w.sum(axis=1, keepdims=True)
    keep = np.broadcast_to((w > 0.0)[:, :, None], shape).ravel()

    def per_cell(x: FloatArray) -> FloatArray:
        """``[I, H]`` → the kept cells of ``[I·H·J]``: the same value for every output bin."""
        return np.broadcast_to(np.asarray(x, dtype=np.float64).reshape(k, h)[:, :, None], shape).ravel()[keep]

    def per_point(x: FloatArray) -> FloatArray:
        """``[I, H, J]`` → ``[kept cells, J]``: each cell's row of its (bin, class)'s points."""
        j = x.shape[2]
        return np.broadcast_to(x[:, :, None, :], (*shape, j)).reshape(-1, j)[keep]

    prob = (_bin_reweighted(plain.prob.reshape(n_in, n_out), classes)[:, None, :] * w[:, :, None]).ravel()[keep]
    steps = np.broadcast_to(plain.decode_steps.reshape(n_in, 1, n_out), shape).ravel()[keep]
    context = per_cell(prompt)
    computed = per_cell(prompt - cached)
    cells = DecodeWorkload(context, steps.copy(), prob, computed, plain.window_tokens)
    split = None
    if hw.dp > 1:  # one attention-DP rank's chunk (pdplan.serving.colocated_dp, "A rank's chunk")
        from pdplan.serving.colocated_dp import rank_prefill_split_s

        split = rank_prefill_split_s
    chunks = cached_chunk_price(hw, float(res.chunk_tokens), prompt.ravel(), cached.ravel(), split, chunked)
    price = ChunkPrice(
        chunks.budget_tokens, chunks.s_per_token, per_cell(chunks.attention_s), per_cell(chunks.drain_s), chunks.width
    )
    point_s: FloatArray | None = None
    point_load_s: FloatArray | None = None
    if chunked is None:
        lengths = np.broadcast_to(res.input_points[:, None, :], (k, h, res.input_points.shape[1]))
        points = point_prices(hw, classes, lengths, classes.hit_tokens[:, :, None], kvb)
        point_s, point_load_s = per_point(points.perf.latency_s.reshape(lengths.shape)), per_point(points.load_s)
    return CachedCells(
        cells,
        point_s,
        price,
        per_cell(load),
        point_load_s,
        np.broadcast_to(defined.reshape(n_in, 1, n_out), shape).ravel()[keep].copy(),
        classes,
        np.broadcast_to(np.arange(n_in)[:, None, None], shape).ravel()[keep].copy(),
    )
