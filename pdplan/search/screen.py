"""The optimiser's screen: goodput of every xPyD candidate, from the per-role tables, in tiles of bounded size.

For a prefill option i (with its transfer option), a decode option k, a routing policy and counts (x, y), the SLO
attainment at a global rate λ is (docs/queueing.md §5.2, conditional independence of the two pools given the prompt bin)

    A(λ) = Σ_l T_{i,k,x}(λ)_l · E_{k,y}(λ)_l,   T = P(TTFT ≤ a | l),   E = Σ_n p(l, n) P(TPOT ≤ b | l, n)

with T read from the prefill table at per-instance utilisation ρ = λE[S]/x and E from the decode table at per-instance
rate λ/y. On one log-spaced grid of λ this is a batched matrix product over a tile of (x, y); goodput is the largest
λ with A(λ) ≥ α* (linear interpolation between grid points, capped by the stability limit
min(ρ_max·x/E[S], y·λ_d,max, link)). The screen takes the TTFT parts of :mod:`pdplan.serving.ttft`
(docs/queueing.md §1.5) with two shortcuts: the decode side of convention-A TTFT is
:func:`pdplan.serving.ttft.first_token_s` at the zero-load step t0 with the instance taken busy (1.5·t0), plus the
decode engine's overlap steps at the same step (:func:`pdplan.serving.ttft.overlap_s`, ``k·t0``: the exact model's
``k·τ̄_d`` with τ̄_d ≥ t0), and it
leaves out link queueing below the link's stability limit and the engine's per-request time; the plans it ranks
highest are then re-evaluated exactly by :func:`pdplan.evaluation.evaluate`, which reports the final numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pdplan.queueing.gig1 import delay_probability, stretch
from pdplan.queueing.jsq import count_routing_terms
from pdplan.search.tables import RHO_GRID, DecodeTable, PrefillBase, erlang_c_grid, interp_rows, prefill_wait_table
from pdplan.serving import PREFILL_RHO_MAX, decode_binding
from pdplan.serving.ttft import first_token_s, overlap_s, overlap_steps
from pdplan.specs.scenario import SloSpec
from pdplan.types import Binding, FloatArray, Int64Array, IntArray, Routing, tpot_at, ttft_at

GRID_POINTS = 128


@dataclass(frozen=True)
class Candidates:
    """Screened xPyD candidates as parallel arrays of length N (indices into the option lists)."""

    prefill: IntArray
    decode: IntArray
    routing: IntArray
    x: IntArray
    y: IntArray
    goodput_rps: FloatArray
    limit_rps: FloatArray
    tau_s: FloatArray
    binding: npt.NDArray[np.object_]
    index: Int64Array
    """Each candidate's place in the enumeration order of the whole space (:func:`screen_disaggregated`)."""

    @property
    def size(self) -> int:
        return int(self.x.size)


def rate_grid(bases: list[PrefillBase], tables: list[DecodeTable], prob: FloatArray, max_instances: int) -> FloatArray:
    """Log-spaced global rates spanning every candidate: from 1e-3 of the smallest single-instance capacity to the
    largest pool's."""
    per_prefill = [b.hw.dp / float(prob @ b.service_s) for b in bases]  # each attention DP rank a server
    per_decode = [t.capacity.max_rate_per_s for t in tables]
    low = 1e-3 * min(min(per_prefill), min(per_decode))
    high = max_instances * max(max(per_prefill), max(per_decode))
    return np.geomspace(low, high, GRID_POINTS)


def decode_grid_table(table: DecodeTable, lam: FloatArray, ys: FloatArray) -> FloatArray:
    """E_{k,y}(λ) [Y, G, L]; beyond the instance's stable rate the value at that rate is held (the stability
    limit is applied to goodput separately, so the attainment curve stays continuous up to it)."""
    per = np.minimum(lam[None, :] / ys[:, None], table.capacity.max_rate_per_s)
    return interp_rows(table.tpot_ok_by_input, table.rates_per_s, per)


COUNT_ROUTINGS = ("least-loaded", "power-of-two")
"""Routers that count requests (:mod:`pdplan.queueing.jsq`): delay probability π and stretch σ per load."""


def _count_terms(policy: str, xs: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(π, σ) [R, X] of a count-based router on the tabulated loads
    (:func:`pdplan.queueing.jsq.count_routing_terms`)."""
    terms = [count_routing_terms(policy, int(x), RHO_GRID) for x in xs]
    return np.stack([t[0] for t in terms], axis=1), np.stack([t[1] for t in terms], axis=1)


def _policy_cdf(wait: object, targets: FloatArray, policy: str, xs: FloatArray, scv: float) -> FloatArray:
    """Wait cdf table [R, X, L] at the per-bin slack ``targets`` [L] for x instances under ``policy``."""
    if policy == "least-work":
        t = targets[None, :] * xs[:, None]
    elif policy in ("round-robin", *COUNT_ROUTINGS):  # the M/G/1 conditional wait stretched by σ per load
        if policy == "round-robin":  # the GI/G/1 law at c² = 1/x (pdplan.queueing.gig1)
            sigma = np.stack([stretch(RHO_GRID, 1.0 / x, scv) for x in xs], axis=1)  # [R, X]
        else:
            sigma = _count_terms(policy, xs)[1]
        t3 = targets[None, None, :] / sigma[:, :, None]
        rows = wait.cdf_rowwise(np.maximum(t3, 0.0))  # type: ignore[attr-defined]
        return np.asarray(rows * (t3 > 0.0), dtype=np.float64)
    else:
        t = np.broadcast_to(targets[None, :], (xs.size, targets.size))
    return np.asarray(wait.cdf(np.maximum(t, 0.0)), dtype=np.float64) * (t > 0.0)[None]  # type: ignore[attr-defined]


def ttft_grid(
    wait: object, mean_s: float, scv: float, targets: FloatArray, policy: str, xs: FloatArray, lam: FloatArray
) -> FloatArray:
    """T_{x}(λ) [X, G, L]: P(TTFT ≤ a | l) for x instances at global rate λ (module docstring); beyond the highest
    tabulated utilisation the value there is held (the stability limit caps goodput separately)."""
    table = _policy_cdf(wait, targets, policy, xs, scv)  # [R, X, L]
    rho = lam[None, :] * mean_s / xs[:, None]  # [X, G]
    pos = np.interp(rho, RHO_GRID, np.arange(RHO_GRID.size, dtype=np.float64))
    lo = np.clip(np.floor(pos).astype(np.intp), 0, RHO_GRID.size - 2)
    frac = (pos - lo)[..., None]
    xi = np.arange(xs.size)[:, None]
    cdf = table[lo, xi, :] * (1.0 - frac) + table[lo + 1, xi, :] * frac
    if policy == "least-work":
        r = np.clip(rho, RHO_GRID[0], RHO_GRID[-1])
        wait_prob = erlang_c_grid(np.broadcast_to(xs[:, None], r.shape), xs[:, None] * r)
        cdf = 1.0 - (wait_prob / r)[..., None] * (1.0 - cdf)
    elif policy == "round-robin":  # P(W > 0) = Whitt's π at c² = 1/x, not ρ
        r = np.clip(rho, RHO_GRID[0], RHO_GRID[-1])
        wait_prob = np.stack([delay_probability(r[i], 1.0 / x, scv) for i, x in enumerate(xs)])
        cdf = 1.0 - (wait_prob / r)[..., None] * (1.0 - cdf)
    elif policy in COUNT_ROUTINGS:  # P(W > 0) = π of the router, interpolated in ρ between the tabulated loads
        r = np.clip(rho, RHO_GRID[0], RHO_GRID[-1])
        pi = _count_terms(policy, xs)[0]  # [R, X]
        wait_prob = np.stack([np.interp(r[i], RHO_GRID, pi[:, i]) for i in range(xs.size)])
        cdf = 1.0 - (wait_prob / r)[..., None] * (1.0 - cdf)
    cdf[..., targets <= 0.0] = 0.0  # no slack left for any wait: the bin misses the TTFT threshold
    return np.asarray(np.clip(cdf, 0.0, 1.0), dtype=np.float64)


def goodput_from_curve(att: FloatArray, lam: FloatArray, target: float) -> tuple[FloatArray, IntArray]:
    """Largest λ with A(λ) ≥ target along the last axis (A made non-increasing first), and the first failing index.

    With ``mono`` the running minimum of A (NaN from a NaN on), ``n_ok`` (how many ``mono ≥ target``) is the index of
    the first A that fails ``A ≥ target`` (all of them pass: the length), ``mono`` at ``n_ok − 1`` the least A before
    it (one masked minimum; a minimum is exact in any order) and ``mono`` at ``n_ok`` that times the failing A (the
    accumulation's own last step): the values of the running minimum at the two points read, without it."""
    size = lam.size
    fail = ~(att >= target)
    n_ok = np.where(fail.any(axis=-1), fail.argmax(axis=-1), size)
    first_bad = np.minimum(n_ok, size - 1)
    prev = np.maximum(n_ok - 1, 0)
    a_prev = np.where(np.arange(size) <= prev[..., None], att, np.inf).min(axis=-1)
    a_bad = np.minimum(a_prev, np.take_along_axis(att, first_bad[..., None], -1)[..., 0])
    frac = np.clip((a_prev - target) / np.maximum(a_prev - a_bad, 1e-12), 0.0, 1.0)
    log_lam = np.log(lam[prev]) + frac * (np.log(lam[first_bad]) - np.log(lam[prev]))
    good = np.where(n_ok == 0, 0.0, np.exp(log_lam))
    return np.where(n_ok == lam.size, lam[-1], good), first_bad


@dataclass(frozen=True)
class PairInputs:
    """What one (prefill option, decode option, routing) block of the screen needs."""

    base: PrefillBase
    table: DecodeTable
    routing: str
    slo: SloSpec
    convention: str
    prob: FloatArray


def pair_ttft(p: PairInputs, wait: object, mean_s: float, scv: float, lam: FloatArray, xs: FloatArray) -> FloatArray:
    """T [X, G, L] of one prefill option for a decode option's zero-load step (shared by its batch caps)."""
    offsets = p.base.latency_s.copy()
    if p.convention == "A":  # the decode side at zero load, each instance taken busy: (1 + 1/2)·t0, and k·t0
        t0 = np.array(p.table.perf.step.t0_s)
        extra = overlap_s(overlap_steps(p.table.hw.engine), t0)
        offsets += p.base.exposed_s + float(first_token_s("A", t0, 1.0) + extra)
    return ttft_grid(wait, mean_s, scv, p.slo.ttft - offsets, p.routing, xs, lam)


def screen_pair(
    p: PairInputs,
    ttft: FloatArray,
    mean_s: float,
    lam: FloatArray,
    xs: FloatArray,
    ys: FloatArray,
    decode_ok: FloatArray,
) -> dict[str, FloatArray]:
    """Goodput [X, Y], stable limit, τ̄ at goodput and binding words for one block of candidates."""
    att = np.einsum("xgl,ygl->xyg", ttft, decode_ok)
    ttft_att = np.einsum("xgl,l->xg", ttft, p.prob)  # TTFT-only attainment
    tpot_att = decode_ok.sum(axis=2)  # TPOT-only attainment
    # the SLO percentile as a constraint beside the joint target (Snapshot.slo_margin): A ≥ α and F_TTFT, F_TPOT ≥ p
    shift = p.slo.attainment - p.slo.percentile / 100.0
    att = np.minimum(att, np.minimum(ttft_att[:, None, :], tpot_att[None, :, :]) + shift)
    good, first_bad = goodput_from_curve(att, lam, p.slo.attainment)
    link_cap = (
        PREFILL_RHO_MAX * np.minimum(xs[:, None], ys[None, :]) * p.base.link_bytes_per_s / max(p.base.mean_bytes, 1e-30)
    )
    limits = {
        Binding.PREFILL_UTILISATION: np.broadcast_to(PREFILL_RHO_MAX * xs[:, None] / mean_s, good.shape),
        decode_binding(p.table.capacity): np.broadcast_to(ys[None, :] * p.table.capacity.max_rate_per_s, good.shape),
        Binding.LINK: link_cap,
    }
    stack = np.stack([np.broadcast_to(v, good.shape) for v in limits.values()])
    limit = stack.min(axis=0)
    names = np.array(list(limits), dtype=object)[stack.argmin(axis=0)]
    capped = good >= limit * (1.0 - 1e-9)
    good = np.minimum(good, limit * (1.0 - 1e-6))
    xi, yi = np.indices(good.shape)
    ttft_fail = ttft_att[xi, first_bad] < tpot_att[yi, first_bad]
    latency_words = np.where(ttft_fail, ttft_at(p.slo.percentile), tpot_at(p.slo.percentile)).astype(object)
    tau = np.interp(good / ys[None, :], p.table.rates_per_s, p.table.tau_mean_s)  # τ̄ at λ*/y
    return {"goodput": good, "limit": limit, "binding": np.where(capped, names, latency_words), "tau": tau}


def screen_disaggregated(
    bases: list[PrefillBase],
    tables: list[DecodeTable],
    routings: tuple[Routing, ...],
    slo: SloSpec,
    convention: str,
    prob: FloatArray,
    max_instances: int,
    *,
    chunk: int,
    margins: Margins,
) -> Iterator[Candidates]:
    """Every (prefill option, matching decode option, routing, x, y), in tiles of at most about ``chunk`` candidates
    (:func:`tile_sides`), each under the planning ``margins`` (module docstring).

    A block (one prefill option, decode option and routing) is the [X, Y] grid of instance counts; each candidate's
    ``index`` is its place in the enumeration order (blocks in option order, then x-major over the grid), so a
    consumer that breaks ties by ``index`` sees the order of one unchunked screen whatever the tiling. Every value
    is computed element by element, so a tile holds the same numbers as the whole block would."""
    lam = rate_grid(bases, tables, prob, max_instances)
    counts = np.arange(1, max_instances + 1, dtype=np.float64)
    side_x, side_y = tile_sides(max_instances, chunk)
    whole_y = side_y >= max_instances  # one y-range: each decode table is computed once, as one screen would
    decode_once = [decode_grid_table(t, lam, counts) for t in tables] if whole_y else []
    waits = _wait_tables(bases, prob)
    block = 0
    for i, base in enumerate(bases):
        wait, mean_s, scv = waits[i]
        pairs = [(k, r, block + n) for n, (k, r) in enumerate(_pairs(base, tables, routings))]
        block += len(pairs)
        for x0 in range(1, max_instances + 1, side_x):
            xr = _span(x0, side_x, max_instances, margins)
            servers = counts[xr[0] - 1 : xr[2]] * base.hw.dp  # prefill servers of x instances: one per DP rank
            ttft_cache: dict[tuple[float, str], FloatArray] = {}
            for k, r, b in pairs:
                pair = PairInputs(base, tables[k], routings[r], slo, convention, prob)
                key = (tables[k].perf.step.t0_s, routings[r])
                if key not in ttft_cache:
                    ttft_cache[key] = pair_ttft(pair, wait, mean_s, scv, lam, servers)
                for y0 in range(1, max_instances + 1, side_y):
                    yr = _span(y0, side_y, max_instances, margins)
                    ys = counts[yr[0] - 1 : yr[2]]
                    decode = decode_once[k] if whole_y else decode_grid_table(tables[k], lam, ys)
                    out = screen_pair(pair, ttft_cache[key], mean_s, lam, servers, ys, decode)
                    yield _tile((i, k, r, b), out, xr, yr, max_instances, margins)


def tile_sides(max_instances: int, chunk: int) -> tuple[int, int]:
    """(x, y) sides of the screen's tiles: the whole [X, Y] block when it holds at most ``chunk`` candidates, else
    about √chunk by chunk/√chunk, so that both the tile's [x, y, grid] arrays and its per-count [count, grid, bin]
    tables stay bounded whatever ``max_instances`` (under ``n+1`` a tile is screened with one extra row and column,
    the (x-1, y-1) neighbours of its first row and column)."""
    if max_instances * max_instances <= chunk:
        return max_instances, max_instances
    side_y = min(max_instances, max(1, math.isqrt(chunk)))
    return min(max_instances, max(1, chunk // side_y)), side_y


def _pairs(base: PrefillBase, tables: list[DecodeTable], routings: tuple[Routing, ...]) -> list[tuple[int, int]]:
    """(decode option, routing) of each block of one prefill option: decode options of the TP it was priced for (and
    of its KV block size, where the search tries several)."""
    return [(k, r) for k, t in enumerate(tables) if _paired(base, t) for r in range(len(routings))]


def _paired(base: PrefillBase, table: DecodeTable) -> bool:
    return table.hw.tp == base.decode_tp and table.hw.kv_block_tokens == base.hw.kv_block_tokens


def _span(start: int, side: int, most: int, margins: Margins) -> tuple[int, int, int]:
    """(first count screened, first count kept, last count) of one tile side; under ``n+1`` one count below the
    tile is screened too (the neighbour its first row or column reads)."""
    first = max(1, start - 1) if margins.redundancy == "n+1" else start
    return first, start, min(most, start + side - 1)


@dataclass(frozen=True)
class Margins:
    """The planning margins a screened candidate is read under (:class:`pdplan.search.space.Space` headroom H and
    redundancy): ``n+1`` gives (x, y) the goodput, stable limit, τ̄ and binding of (x-1, y-1) of the same instance
    types (one instance of each pool down; none with a single instance in a pool), and headroom divides goodput
    and limit by 1 + H (the SLO must hold at (1+H)x the operating rate)."""

    redundancy: str
    headroom: float


def _tile(
    block: tuple[int, int, int, int],
    out: dict[str, FloatArray],
    xr: tuple[int, int, int],
    yr: tuple[int, int, int],
    max_instances: int,
    margins: Margins,
) -> Candidates:
    """One screened tile ([x, y] arrays over the spans ``xr``, ``yr``) as candidates under ``margins``, cropped to
    the counts it keeps, with each candidate's enumeration index (block·max_instances² + (x-1)·max_instances + y-1)."""
    i, k, r, b = block
    good, limit, tau = out["goodput"], out["limit"], out["tau"]
    binding: npt.NDArray[np.object_] = np.asarray(out["binding"], dtype=object)
    xs = np.arange(xr[0], xr[2] + 1, dtype=np.intp)
    ys = np.arange(yr[0], yr[2] + 1, dtype=np.intp)
    if margins.redundancy == "n+1":
        spare = (xs[:, None] >= 2) & (ys[None, :] >= 2)
        good = np.where(spare, _down(good), 0.0)
        limit = np.where(spare, _down(limit), 0.0)
        tau = np.where(spare, _down(tau), tau)
        binding = np.where(spare, _down(binding), Binding.REDUNDANCY)
    scale = 1.0 / (1.0 + margins.headroom)
    keep = (slice(xr[1] - xr[0], None), slice(yr[1] - yr[0], None))
    x, y = np.meshgrid(xs[keep[0]], ys[keep[1]], indexing="ij")
    n = x.size
    return Candidates(
        np.full(n, i, dtype=np.intp),
        np.full(n, k, dtype=np.intp),
        np.full(n, r, dtype=np.intp),
        x.ravel(),
        y.ravel(),
        (good * scale)[keep].ravel(),
        (limit * scale)[keep].ravel(),
        np.asarray(tau[keep]).ravel(),
        binding[keep].ravel(),
        (b * max_instances * max_instances + (x.ravel() - 1) * max_instances + (y.ravel() - 1)).astype(np.int64),
    )


def _down(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``values`` [x, y] moved one place down both axes: each entry reads its (x-1, y-1) neighbour (the first row
    and column, which have none, keep their own and are masked by the caller)."""
    moved = values.copy()
    moved[1:, 1:] = values[:-1, :-1]
    return moved


def screened_count(bases: list[PrefillBase], tables: list[DecodeTable], routings: int, max_instances: int) -> int:
    """How many candidates :func:`screen_disaggregated` prices: every (prefill option, decode option of the TP it
    was priced against, routing) pair times the ``max_instances``² (x, y) grid."""
    pairs = sum(1 for base in bases for table in tables if _paired(base, table))
    return pairs * routings * max_instances**2


def _wait_tables(bases: list[PrefillBase], prob: FloatArray) -> list[tuple[object, float, float]]:
    """The prefill wait table of each option, one FFT table per distinct service-time vector."""
    cache: dict[bytes, tuple[object, float, float]] = {}
    for b in bases:
        key = b.service_s.tobytes()
        if key not in cache:
            cache[key] = prefill_wait_table(b, prob)
    return [cache[b.service_s.tobytes()] for b in bases]
