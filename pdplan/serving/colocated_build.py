"""Building the colocated model of a bound deployment: the plain model (every prompt new) and, with a prefix cache,
the cached model at its own resident KV, the HBM cache's fixed point (docs/prefix_cache.md §4, *Where the cache
lives*). The model itself, its limits and its latency laws are :mod:`pdplan.serving.colocated`'s."""

from __future__ import annotations

import dataclasses

import numpy as np

from pdplan.errors import NoFeasiblePlanError
from pdplan.queueing.decode import kv_footprint
from pdplan.serving.cache_domain import cache_rate
from pdplan.serving.cells import decode_cells, tpot_defined
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.decode_lines import role_decode_perf
from pdplan.serving.resolve import ColocatedHardware, ResolvedScenario
from pdplan.serving.role_hardware import instance_budget
from pdplan.serving.roles import ChunkPrice, chunk_price, prefill_perf
from pdplan.types import Binding


def build_colocated(res: ResolvedScenario[ColocatedHardware], plain: ColocatedModel | None = None) -> ColocatedModel:
    """Price the colocated instance type (NoFeasiblePlanError if it does not fit). ``plain``: the model without the
    cache of the same bound deployment (:attr:`pdplan.serving.colocated.ColocatedModel.plain` of a model at another
    cache rate), reused as it is (None: priced here)."""
    if plain is None or plain.res.decode_line != res.decode_line:
        plain = _plain_colocated(res)
    elif plain.res is not res:
        plain = dataclasses.replace(plain, res=res)
    if res.cache is None:
        return plain
    rate, capacity = cache_rate(res), plain.decode.kv_capacity_tokens
    resident = resident_tokens(plain, rate)
    if resident >= capacity:  # past the plain pole: start from an empty pool (the warmed-up, cached state)
        resident = 0.0
    return _resident_fixed_point(res, plain, rate, resident)


RESIDENT_RTOL = 0.01
"""The HBM cache is taken at the KV its own (cached) model leaves free, to this share of the KV capacity."""
RESIDENT_ROUNDS = 24
"""At most this many rebuilds toward that fixed point (each one :func:`cached_cells` call); NoFeasiblePlanError past
them (none in the examples or tests: at most 9 with the accelerated rounds of :func:`_resident_fixed_point`)."""


def _resident_fixed_point(
    res: ResolvedScenario[ColocatedHardware], plain: ColocatedModel, rate: float, start: float
) -> ColocatedModel:
    """The cached model at its own resident KV r = g(r) (:func:`_with_cache`), g(r) the KV the model with a cache
    of (capacity − r) holds (:func:`resident_tokens`, capped at the capacity), from ``start``: the rounds r ← g(r),
    every second one accelerated (Steffensen): after r0, r1 = g(r0), r2 = g(r1) moving the same way and shrinking
    (q = (r2 − r1)/(r1 − r0) in (0, 1), linear convergence) the next start is Aitken's r2 + (r2 − r1)·q/(1 − q); not
    shrinking upwards (q ≥ 1: the cached state runs away, the hits' relief smaller than the KV they free) the pool's
    edge, where g stops at the capacity if the run-away goes through (no cache left: the plain pole's state). Where
    one or two rounds settle it (|g(r) − r| ≤ :data:`RESIDENT_RTOL` of the capacity) the model is the plain rounds'
    (until 2026-12-07 the rounds stopped after 8 whether settled or not: chat-ppd's pick at 14.01 req/s was still
    moving 1.9 % of the capacity per round; each start is clipped to [0, capacity])."""
    capacity = plain.decode.kv_capacity_tokens
    tol = RESIDENT_RTOL * capacity
    r0 = start
    rounds = 0
    while rounds < RESIDENT_ROUNDS:
        model = _with_cache(res, plain, r0)
        r1 = resident_tokens(model, rate)
        rounds += 1
        if abs(r1 - r0) <= tol:
            return model
        nxt = _with_cache(res, plain, r1)
        r2 = resident_tokens(nxt, rate)
        rounds += 1
        if abs(r2 - r1) <= tol:
            return nxt
        d1, d2 = r1 - r0, r2 - r1
        q = d2 / d1
        if 0.0 < q < 1.0:
            r0 = min(max(r2 + d2 * q / (1.0 - q), 0.0), capacity)
        elif q >= 1.0 and d2 > 0.0:
            r0 = capacity
        else:
            r0 = r2
    raise NoFeasiblePlanError(
        f"the prefix cache's HBM share on colocated {res.hardware.colocated.label} did not settle at {rate:.4g} req/s "
        f"within {RESIDENT_ROUNDS} rounds (its resident KV still moving by more than {RESIDENT_RTOL:.0%} of the "
        "capacity per round)",
        binding_constraint=Binding.DECODE_KV,
    )


def _with_cache(res: ResolvedScenario[ColocatedHardware], plain: ColocatedModel, resident: float) -> ColocatedModel:
    """The deployment's model with the prefix cache's classes, its HBM cache the KV capacity less ``resident``
    tokens of decoding sequences.

    Which resident KV: the cached deployment's own, λ τ̄ E[held] at its τ̄ (:func:`resident_tokens`), a fixed point
    in it: the hits lower the prefill share and so τ̄ and the resident KV, which leaves more for the cache. It is
    reached from the plain model's (every prompt new, the most resident KV: today's first guess), each round the KV
    the previous round's model holds, until it moves by less than :data:`RESIDENT_RTOL` of the capacity. Where the
    plain model is past its pole (its resident KV capped at the capacity, no room for a cache, a fixed point of its
    own: no hits, so the pole) the rounds start from an empty pool instead, as a deployment that warms up from idle
    does: a workload whose prompts repeat (a benchmark's fixed prompt list, an agent's 98 % hits) is then served in
    its cached state, as the engines serve it (docs/prefix_cache.md §4)."""
    from pdplan.serving.colocated_cache import cached_cells  # lazy: a prefix cache only (start-up, issue #27)

    if res.cache is None:
        raise ValueError("_with_cache needs a deployment with a prefix cache")
    chunked = None
    if plain.scheduler == "chunked" and plain.gemm_width is not None:  # the points go unread: not priced
        width = plain.gemm_width  # tabulated up to the budget, which it ends at (roles._width_grid)
        chunked = ChunkPrice(width.top, plain.prefill_s_per_token, plain.attention_cell_s, plain.drain_cell_s, width)
    split = cached_cells(res, res.cache, plain.cells, tpot_defined(res), resident, chunked)
    return ColocatedModel(
        res,
        plain.scheduler,
        split.cells,
        split.prefill_point_s,
        plain.decode,
        split.price.s_per_token,
        split.price.attention_s,
        split.price.drain_s,
        plain.z,
        split.classes,
        split.load_cell_s,
        split.tpot_defined,
        cell_input_bin=split.input_bin,
        plain=plain,
        load_point_s=split.load_point_s,
        gemm_width=split.price.width if plain.scheduler == "chunked" else None,
    )


def _plain_colocated(res: ResolvedScenario[ColocatedHardware]) -> ColocatedModel:
    """The deployment's model with every prompt new."""
    hw = res.hardware.colocated
    d = res.hardware.deployment
    cells = decode_cells(res)
    dperf = role_decode_perf(res)  # on the line of a concave law res names (pdplan.serving.decode_lines)
    split = None
    if hw.dp > 1:  # each attention-DP rank is a colocated server of its own (pdplan.serving.colocated_dp)
        from pdplan.serving import colocated_dp  # lazy: attention DP only (start-up, issue #27)

        chunked = d.scheduler == "chunked"
        others = colocated_dp.others_chunk_s_per_seq(hw, float(res.chunk_tokens), cells) if chunked else 0.0
        dperf = colocated_dp.rank_decode(dperf, hw.dp, cells, others)
        split = colocated_dp.rank_prefill_split_s
    if float(cells.peak_tokens.max()) + dperf.state_tokens_per_seq > dperf.kv_capacity_tokens:
        raise NoFeasiblePlanError(
            f"colocated instance {hw.label} holds {dperf.kv_capacity_tokens:.0f} KV "
            f"tokens{' per attention-DP rank' if hw.dp > 1 else ''}, less than the longest request "
            f"(with {dperf.state_tokens_per_seq:.0f} of fixed state)",
            binding_constraint=Binding.DECODE_KV,
        )
    instance_budget(hw, "colocated")
    lens, points = res.lengths, res.input_points
    per_point = prefill_perf(hw, points.ravel()).latency_s.reshape(points.shape)
    cell_s = np.repeat(per_point, lens.output_tokens.size, axis=0)  # cells are prompt-major over the output bins
    price = chunk_price(hw, float(res.chunk_tokens), cells.input_tokens, split)
    return ColocatedModel(
        res,
        d.scheduler,
        cells,
        cell_s,
        dperf,
        price.s_per_token,
        price.attention_s,
        price.drain_s,
        d.instance.count * hw.dp,  # servers: every attention-DP rank of every instance
        gemm_width=price.width if d.scheduler == "chunked" else None,
    )


def resident_tokens(plain: ColocatedModel, rate_rps: float) -> float:
    """The decoding sequences' mean KV on one instance at ``rate_rps`` (Little: λ_c·τ̄·E[held work]), capped at the
    instance's KV capacity (past the mean-field pole nothing is left for a cache)."""
    lam = rate_rps / plain.z
    held = kv_footprint(plain.cells, plain.decode.state_tokens_per_seq)
    return min(lam * plain.token_interval_s(lam) * held.mean_work, plain.decode.kv_capacity_tokens)
