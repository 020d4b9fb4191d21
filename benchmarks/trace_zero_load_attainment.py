"""Where the closed form loses the Mooncake trace's long prefills (issue #22; docs/prefix_cache.md §9, The Mooncake
trace): the share of requests whose own prefill plus exposed cache load exceeds the TTFT SLO with nothing queued,
exactly per request against the closed form's (prompt bin × cache class) cells, for the five trace cases of
``benchmarks/reuse_closed_form_vs_sim.py`` (the vendored synthetic trace, Llama-3.1-8B on H100-SXM TP1, 2 s SLO).

Columns (per cent of the requests; hit tokens per request from :func:`pdplan.serving.prefix_cache.cache_classes`'
per-request keys before they are binned, each hit block loaded from the tier holding it):

* ``exact``: every counted request (after the trace's first tenth, :data:`pdplan.cache.trace.WARMUP_SHARE`: those
  the simulator counts) on its own prompt and its own hit;
* ``own L, cell hit``: the same requests on their own prompts but with their (prompt bin, class)'s mean hit and tier
  split, as the cells price them: what averaging the hits over a cell changes;
* ``exact, all``: ``exact`` over every request, the first tenth included (the closed form's prompt law is the whole
  trace's, :func:`pdplan.workload.bins.discretize`);
* ``cells J=4``, ``cells J=64``: the quadrature cells, each prompt bin at J quadrature lengths
  (:func:`pdplan.workload.quadrature.input_quadrature`; J = 4 is how the serving model priced a trace's cells
  before issue #22) with its classes' mean hits, weighed by the prompt law's marginal and the classes' weights;
* ``quantiles J=16``: the cells with each bin's lengths at the trace's own within-bin quantiles
  (:func:`trace_quadrature`) instead of the interpolated quantile function;
* ``own J=16``: each (bin, class) cell at 16 of its own counted requests' (prompt, hit) pairs (:func:`own_cells`;
  the serving model now prices a trace's cells so, at 8 requests each: :mod:`pdplan.serving.trace_cells`);
* ``sim TTFT``, ``closed TTFT``: the share of TTFTs over the SLO at :data:`RATE_RPS`, simulated (the grid's
  simulation, trace times) and in the closed form (``1 − attainment``; TPOT never binds there).

``--prototype``: the cells at 16 own requests in the serving model (:func:`own_cells_side` replaces
``pdplan.serving.disaggregated._cached_prefill_side`` for the run): per case the closed form's goodput as priced
(8 own requests per cell since issue #22) and with 16, and the TTFT attainment simulated (trace times, seed 0) and by
both at fractions of the goodput as priced.

Run: ``python benchmarks/trace_zero_load_attainment.py [--prototype]`` (about 5 s of CPU; 30 s with the prototype).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
from reuse_closed_form_vs_sim import _reuse_run, scenario

import pdplan.serving.disaggregated as disagg
from pdplan.cache.trace import counted_from
from pdplan.evaluation.evaluate import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.serving.build import with_cache_rate
from pdplan.serving.cache_domain import prefill_domain
from pdplan.serving.prefix_cache import CacheClasses, CacheSetup, _bands, _trace_keys, bin_edges, cache_classes
from pdplan.serving.resolve import ResolvedScenario, resolve
from pdplan.serving.roles import cached_prefill_perf
from pdplan.specs.scenario import Scenario
from pdplan.types import FloatArray
from pdplan.workload.quadrature import input_quadrature

CASES = (("1P1D", "affinity", False), ("2P1D", "affinity", False), ("2P1D", "affinity", True),
         ("2P1D", "load-balance", False), ("2P1D", "load-balance", True))  # fmt: skip
"""The grid's five trace cases (deployment, routing, host-DRAM tier)."""
SLO_S = 2.0
"""The grid's TTFT SLO."""
RATE_RPS = 0.02
"""Nothing queues: at 0.02 req/s a prefill instance is about 1 % busy (a trace's hit rates do not depend on the
rate)."""
OWN_POINTS = 16
"""Requests per cell in :func:`own_cells`."""
SHARES = (0.25, 0.6, 0.85, 1.0)
"""``--prototype``: the rates, as fractions of the closed form's goodput as priced."""


class Requests:
    """A trace case's requests: prompt (cut to the context window as the binning cuts it), hit tokens per class tier
    ``parts [N, H]``, prompt bin and class; and the price of prefill plus exposed load."""

    def __init__(self, res: ResolvedScenario[Any], classes: CacheClasses) -> None:
        setup, domain = res.cache, prefill_domain(res)
        assert setup is not None
        trace = setup.reuse.trace
        assert trace is not None
        self.edges = bin_edges(res.lengths.input_tokens)
        keys = _trace_keys(trace, _bands(setup, domain), domain, self.edges, setup.spec.routing)
        model = res.model
        window = min(model.max_position_embeddings, res.scenario.max_model_len or model.max_position_embeddings)
        self.prompt = np.minimum(trace.prompt_lengths(), window - 1.0)
        self.parts = keys.probs * keys.tokens if keys.parts is None else np.einsum("nh,nhg->ng", keys.probs, keys.parts)
        self.bin = np.clip(np.searchsorted(self.edges, self.prompt, side="right") - 1, 0, self.edges.size - 2)
        self.cls = np.argmax(keys.probs, axis=1)
        self.start = counted_from(trace.n_requests)
        self.res, self.classes = res, classes
        self.kvb = model.kv_bytes_per_token(res.hardware.prefill.precision.kv_bytes)

    def time_s(self, prompt: FloatArray, parts: FloatArray) -> FloatArray:
        """Prefill compute plus exposed load (s) of prompts with hit tokens ``parts [..., H]`` per class tier."""
        total = parts.sum(axis=-1)
        hit = np.clip(np.minimum(total, prompt - 1.0), 0.0, None)
        compute = cached_prefill_perf(self.res.hardware.prefill, prompt, hit).latency_s
        scale = np.where(total > 0, hit / np.maximum(total, 1e-300), 0.0)  # the last block clipped, in proportion
        load = np.zeros_like(compute)
        for g, tier in enumerate(self.classes.load_from):
            if tier is not None:
                load += tier.exposed_load_s(parts[..., g] * scale, self.kvb, compute, self.classes.layers)
        return np.asarray(compute + load, dtype=np.float64)

    def cell_share(self, points: FloatArray, parts: FloatArray) -> float:
        """The share of the cells' probability over the SLO, cell (k, h) at lengths ``points [K, H, J]`` with hit
        tokens ``parts [K, H, J, H]``."""
        over = self.time_s(points, parts) > SLO_S
        prob = self.classes.bin_class_probability(self.res.lengths.input_marginal())
        return float(np.einsum("kh,khj->", prob, over) / points.shape[2])

    def binned_cells(self, lengths: FloatArray) -> float:
        """:meth:`cell_share` with each bin at ``lengths [K, J]`` and its classes' mean hits."""
        k, h = self.classes.weights.shape
        j = lengths.shape[1]
        parts = self.classes.hit_tokens[:, :, None] * self.classes.tier_share  # [K, H, H]
        return self.cell_share(np.broadcast_to(lengths[:, None, :], (k, h, j)), np.repeat(parts[:, :, None], j, 2))


def trace_quadrature(req: Requests, points: int) -> FloatArray:
    """``[K, points]`` each prompt bin's lengths at levels ``(j + ½)/points`` of the trace's own prompts in it,
    shifted to keep the bin's mean: the empirical law the bins were cut from, where
    :func:`~pdplan.workload.quadrature.input_quadrature` interpolates the quantile function through the bins' means."""
    reps = req.res.lengths.input_tokens
    out = np.repeat(reps[:, None], points, axis=1)
    for i in range(reps.size):
        if np.any(req.bin == i):
            out[i] = np.quantile(req.prompt[req.bin == i], (np.arange(points) + 0.5) / points, method="inverted_cdf")
    return np.asarray(out + (reps - out.mean(axis=1))[:, None], dtype=np.float64)


def own_cells(req: Requests, points: int) -> tuple[FloatArray, FloatArray]:
    """``(lengths [K, H, J], parts [K, H, J, H])``: cell (k, h) at the counted requests of bin k and class h at
    levels ``(j + ½)/J`` of their own prefill-plus-load times, each with its own prompt and hit (the cell's joint law
    of prompt and hit, J quantiles of its price); a cell no counted request reaches keeps its bin's mean length and
    its class's mean hit."""
    k, h = req.classes.weights.shape
    lengths = np.repeat(req.res.lengths.input_tokens[:, None, None], h, axis=1).repeat(points, axis=2)
    parts = np.repeat((req.classes.hit_tokens[:, :, None] * req.classes.tier_share)[:, :, None, :], points, axis=2)
    price = req.time_s(req.prompt, req.parts)
    counted = np.arange(req.prompt.size) >= req.start
    for b in range(k):
        for c in range(h):
            rows = np.flatnonzero(counted & (req.bin == b) & (req.cls == c))
            if rows.size:
                order = rows[np.argsort(price[rows], kind="stable")]
                pick = order[np.minimum(((np.arange(points) + 0.5) / points * rows.size).astype(int), rows.size - 1)]
                lengths[b, c], parts[b, c] = req.prompt[pick], req.parts[pick]
    return lengths, parts


def _case(sc: Scenario) -> tuple[ResolvedScenario[Any], CacheClasses, Requests]:
    res = with_cache_rate(resolve(sc, open_catalog()), RATE_RPS)
    assert res.cache is not None
    classes = cache_classes(res.cache, prefill_domain(res), res.lengths.input_tokens, RATE_RPS, 0.0)
    return res, classes, Requests(res, classes)


def _simulated_miss(sc: Scenario, rate: float) -> float:
    sim = _reuse_run(sc, rate, 8000, rate)
    return float(np.mean(sim.ttft_s[sim.run.warmup_count :] > SLO_S))


def zero_load_row(sc: Scenario) -> list[float]:
    """One case's columns (module docstring), per cent."""
    res, _, req = _case(sc)
    over = req.time_s(req.prompt, req.parts) > SLO_S
    cell_parts = req.classes.hit_tokens[req.bin, req.cls][:, None] * req.classes.tier_share[req.bin, req.cls]
    cell_over = req.time_s(req.prompt, cell_parts) > SLO_S
    lengths = res.lengths.input_tokens, res.lengths.input_marginal()
    shares = [
        over[req.start :].mean(),
        cell_over[req.start :].mean(),
        over.mean(),
        req.binned_cells(input_quadrature(*lengths, 4)),
        req.binned_cells(input_quadrature(*lengths, 64)),
        req.binned_cells(trace_quadrature(req, OWN_POINTS)),
        req.cell_share(*own_cells(req, OWN_POINTS)),
        _simulated_miss(sc, RATE_RPS),
        1.0 - evaluate(sc, rate=RATE_RPS).operating_point.attainment,
    ]
    return [100.0 * float(s) for s in shares]


def own_cells_side(res: ResolvedScenario[Any], setup: CacheSetup, token_interval_s: float) -> Any:
    """``disaggregated._cached_prefill_side`` with each cell at :func:`own_cells`' requests (``--prototype``)."""
    side = _original_side(res, setup, token_interval_s)
    classes = side.classes
    req = Requests(res, classes)
    lengths, parts = own_cells(req, OWN_POINTS)
    k, h = classes.weights.shape
    points = lengths.reshape(k * h, OWN_POINTS)
    hits = parts.sum(axis=-1).reshape(k * h, OWN_POINTS)
    cached = np.clip(np.minimum(hits, points - 1.0), 0.0, None)
    hw = res.hardware.prefill
    point_base = cached_prefill_perf(hw, points.ravel(), cached.ravel())
    compute = point_base.latency_s.reshape(k, h, -1)
    load = classes.exposed_load_s(cached.reshape(k, h, -1), req.kvb, compute).reshape(points.shape)
    return disagg._PrefillSide(side.tokens, side.prob, points, side.base, point_base, side.routing, cached, load,
                               classes)  # fmt: skip


_original_side = disagg._cached_prefill_side


@contextlib.contextmanager
def _own_cells() -> Iterator[None]:
    disagg._cached_prefill_side = own_cells_side  # type: ignore[assignment]
    try:
        yield
    finally:
        disagg._cached_prefill_side = _original_side


def prototype(sc: Scenario) -> str:
    """``--prototype``: goodput as priced and with own-request cells; TTFT attainment at :data:`SHARES` of it."""
    priced = evaluate(sc).goodput_rps
    with _own_cells():
        own = evaluate(sc).goodput_rps
    points = []
    for share in SHARES:
        rate = share * priced
        sim = _reuse_run(sc, rate, 8000, rate)
        offered = sim.offered_rps
        simulated = float(np.mean(sim.ttft_s[sim.run.warmup_count :] <= SLO_S))
        closed = evaluate(sc, rate=offered).operating_point.attainment
        with _own_cells():
            fixed = evaluate(sc, rate=offered).operating_point.attainment
        points.append(f"{offered:.3g}: {simulated:.4f} / {closed:.4f} / {fixed:.4f}")
    return (f"goodput as priced {priced:.4g}, own cells {own:.4g} req/s; TTFT attainment at offered rate (req/s): "
            f"simulated / as priced / own cells: {'; '.join(points)}")  # fmt: skip


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prototype", action="store_true", help="the own-request cells in the serving model")
    args = parser.parse_args(argv)
    if args.prototype:
        for case in CASES:
            sc = scenario("mooncake-synthetic", case[1], case[2], case[0])
            print(f"{sc.name}: {prototype(sc)}", flush=True)
        return
    print(f"Share of requests over the {SLO_S:g} s TTFT SLO, per cent: prefill + exposed load alone (nothing queued), "
          f"then whole TTFTs at {RATE_RPS:g} req/s")  # fmt: skip
    print()
    heads = ("exact", "own L, cell hit", "exact, all", "cells J=4", "cells J=64", f"quantiles J={OWN_POINTS}",
             f"own J={OWN_POINTS}", "sim TTFT", "closed TTFT")  # fmt: skip
    print(f"| case | {' | '.join(heads)} |")
    print(f"|---|{'---|' * len(heads)}")
    for case in CASES:
        sc = scenario("mooncake-synthetic", case[1], case[2], case[0])
        print(f"| {sc.name} | {' | '.join(f'{v:.2f}' for v in zero_load_row(sc))} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
