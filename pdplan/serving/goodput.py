"""Goodput: the highest Poisson rate whose SLO attainment meets the target (docs/queueing.md §5.2).

``A(λ)`` = fraction of requests meeting both the TTFT and the TPOT threshold, non-increasing in λ.
Goodput = brentq on ``A(λ) − α*`` over ``(0, λ_stab)`` (:func:`pdplan.queueing.goodput_rate`
conventions: λ_stab itself when A(λ_stab⁻) ≥ α*). The search is tabulated first: A on a coarse
grid of ``GRID_POINTS`` rates brackets the crossing, then brentq refines inside the bracket to ``REL_TOL`` of λ_stab,
starting from the bracket's ends as the grid found them.

**Grid.** The bracket is the first grid interval where the margin turns negative, found from the top down: the rate
one grid step below the top first; where the margin holds there, the top (the SLO holds at λ_stab, or the crossing
lies in the top interval); where it fails there, the rates below it in one batched evaluation, and never the top,
which then fails too as the margin is non-increasing in λ. The bracket is that of a whole-grid evaluation wherever the
margin is non-increasing; its ends' margins can differ at the level of a lattice, as a one-server KV link's chain
(:mod:`pdplan.queueing.tandem_chain`) widens its lattice for every rate of one evaluation together. A deployment's
goodput usually lies in the top eighth of its stability limit, so most searches skip the seven lower rates (with a
one-server KV link they were half of a search's time, each rate a Markov chain solved to its stationary law), and a
search whose link nears saturation at the top skips the top rate, whose chain may spend its whole iteration budget
and not settle.

**Near a known goodput.** Where an estimate of the goodput is known (``near_rps``: the same deployment's at another
cache rate or cache setting) and lies below the grid's second-highest rate, the batch the search above evaluates when
the rate below the top fails is evaluated first with every rate above the one just above the estimate replaced by
that one (the same shape and positions: a matrix product's rounding depends on them); when that rate is the first to
fail, it closes the bracket the search above finds (the margin is non-increasing, so the rate below the top and the
top fail too), with the same margins at its ends, and brentq takes the same steps. It saves the rates near the
stability limit, the dearest to solve (a one-server KV link's chain near saturation: a link-bound deployment's goodput
can lie at a third of its limit). The two agree bit for bit unless a rate above the bracket sets a grid the whole batch
shares: the decode load noise's FFT length follows the batch's highest utilisation
(:func:`pdplan.queueing.decode.load_noise`), and a rate whose link chain runs past its lattice widens every rate's
(:mod:`pdplan.queueing.link_delay`); the ends' margins then move at the level of that grid (1e-10 on
examples/mooncake-trace.yaml, its goodput by 1e-12 relative), as the search above already allows. Where the
estimate does not bracket the crossing, the search runs as above, having spent rates no dearer than the one above
the estimate.

**A link-bound deployment without an estimate.** Where the caller gives none (or one at or above the grid's
second-highest rate, which the search above starts from anyway) and the stability limit is a one-server-fed KV link
priced by the tandem chain, the goodput can lie far below the limit (examples/chat-ppd.yaml's 1P1D over 25 GbE with
``pd``: 0.89 req/s against a link limit of 2.68, where the screen, which prices no chain, puts it at the limit), and
the search above would solve the chain near saturation at the grid's top rates (0.31 of that search's 0.43 CPU s).
The estimate is then the goodput of the same model with the link's wait as the M/G/1 on its busy times with slack
(:func:`pdplan.serving.disaggregated.DisaggregatedModel.link_delay` without the chain, as a PPD plan prices it; 0.02
s there: 0.885 req/s), taken through **Near a known goodput**. It is an estimate, not a bound: neither form's wait is
proven to bound the other's (the chain's arrivals are one prefill server's departures, smoother or burstier than
Poisson with the prefill times' spread), and none is needed, as that search checks the bracket and falls back to the
one above where it does not hold.

The binding constraint, in words: the stability bound's name when goodput = λ_stab ("prefill
utilisation", "decode KV capacity", "link", ...); otherwise the latency whose P-th percentile is
closest to (or furthest past) its threshold at the goodput rate ("TTFT at P90", "TPOT at P90"); past the comfortable
(P99) decode KV limit followed by "(beyond the comfortable decode KV limit: requests queue for KV admission)"
(:mod:`pdplan.queueing.kv_admission`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pdplan.errors import NoFeasiblePlanError, UnsettledWaitError
from pdplan.numerics.roots import brentq
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.limits import BEYOND_KV_COMFORT, BEYOND_SEAT_COMFORT, Limit
from pdplan.serving.snapshot import Snapshot
from pdplan.specs.scenario import SloSpec
from pdplan.types import Binding, FloatArray, Utilisation, tpot_at, ttft_at

GRID_POINTS = 8
REL_TOL = 1e-3
ZERO_LOAD_FRACTION = 1e-4
UNSETTLED_MARGIN = -1.0  # a rate whose wait cannot be computed misses the SLO (_grid_margin)
TOP_FRACTION = 1.0 - 1e-6
"""The grid's top rate as a fraction of the stability limit: the highest rate a search evaluates."""


class ServingModel(Protocol):
    """What a deployment model offers: its stability limit and distributions at rates."""

    def limit(self) -> Limit: ...
    def snapshot(self, rates: FloatArray) -> Snapshot: ...
    def utilisation(self, rates: FloatArray) -> Utilisation: ...


@dataclass(frozen=True, slots=True)
class Goodput:
    """Goodput (req/s), the stability limit, and the binding constraint in words."""

    rate_rps: float
    limit: Limit
    binding: str


def latency_binding(snap: Snapshot, slo: SloSpec) -> str:
    """ "TTFT at P90" or "TPOT at P90": whose percentile/threshold ratio is larger (rate 0); a percentile beyond its
    law's modelled range counts as the larger."""
    q = slo.percentile / 100.0
    ttft, tpot = _percentile_s(snap.ttft, q), _percentile_s(snap.tpot_reported, q)
    ttft_ratio = math.inf if ttft is None else ttft / slo.ttft
    tpot_ratio = math.inf if tpot is None else tpot / slo.tpot
    return ttft_at(slo.percentile) if ttft_ratio >= tpot_ratio else tpot_at(slo.percentile)


class _Law(Protocol):
    def quantile(self, q: float) -> FloatArray: ...


def _percentile_s(law: _Law, q: float) -> float | None:
    """The first rate's q-quantile of ``law``, or None where it lies beyond the law's modelled range (its quantile
    search refuses to invent one: :func:`pdplan.queueing.distributions.mixture_quantile_rows`)."""
    try:
        return float(law.quantile(q)[0])
    except ValueError:
        return None


def _seconds(value_s: float | None) -> str:
    return "beyond the modelled range" if value_s is None else f"{value_s:.3g} s"


def _zero_load_failure(model: ServingModel, slo: SloSpec, rate: float) -> NoFeasiblePlanError:
    snap = model.snapshot(np.array([rate]))
    q = slo.percentile / 100.0
    ttft_q, tpot_q = _percentile_s(snap.ttft, q), _percentile_s(snap.tpot_reported, q)
    att = float(snap.attainment(slo.ttft, slo.tpot)[0])
    what = latency_binding(snap, slo)
    return NoFeasiblePlanError(
        f"the SLO cannot be met at any rate: even at near-zero load only {att:.1%} of requests "
        f"meet both thresholds (target {slo.attainment:.0%}); P{slo.percentile:g} TTFT "
        f"{_seconds(ttft_q)} vs {slo.ttft:.3g} s, P{slo.percentile:g} TPOT {_seconds(tpot_q)} vs "
        f"{slo.tpot:.3g} s; binding: {what}",
        binding_constraint=what,
    )


def slo_margin(snap: Snapshot, slo: SloSpec) -> FloatArray:
    """≥ 0 where the SLO holds, per rate: joint attainment and both percentile thresholds
    (:meth:`Snapshot.slo_margin`)."""
    return snap.slo_margin(slo.ttft, slo.tpot, slo.percentile, slo.attainment)


def find_goodput(model: ServingModel, slo: SloSpec, near_rps: float | None = None) -> Goodput:
    """Goodput by a tabulated bracket plus brentq (module docstring); the rate returned meets the SLO.

    ``near_rps``: where the goodput is expected (a neighbouring model's: the same deployment at another cache rate
    or setting); when it lies below the grid's second-highest rate, the grid interval around it is tried first
    (module docstring, **Near a known goodput**). It changes which rates are solved, and the goodput only where a
    grid the whole batch shares moves it, by far less than ``REL_TOL``."""
    limit = model.limit()
    grid = _grid(limit)
    if near_rps is None or near_rps >= grid[-2]:
        near_rps = _chain_free_estimate(model, slo, limit) or near_rps
    crossing = _near_crossing(model, grid, slo, near_rps) or _crossing(model, grid, slo)
    if crossing is None:
        return Goodput(limit.rate_rps, limit, binding_words(limit, limit.rate_rps, limit.binding))
    i, margin = crossing
    lo, hi = float(grid[i - 1]), float(grid[i])

    # every rate brentq evaluates, by rate: its root (read again by _feasible_side and for the binding constraint) is
    # often not its last evaluation; a single-rate snapshot is a few bins' laws, and a search evaluates about ten
    seen: dict[float, Snapshot] = {}
    ends = {lo: float(margin[0]), hi: float(margin[1])}  # each rate's margin; brentq starts from the bracket's ends

    def gap(lam: float) -> float:
        if lam not in ends:
            try:
                seen[lam] = model.snapshot(np.array([lam]))
                ends[lam] = float(slo_margin(seen[lam], slo)[0])
            except UnsettledWaitError:  # the same rate does not settle again either
                ends[lam] = UNSETTLED_MARGIN
        return ends[lam]

    xtol = REL_TOL * limit.rate_rps
    rate = float(brentq(gap, lo, hi, xtol=xtol, rtol=1e-6))
    rate = _feasible_side(gap, rate, lo, xtol)
    binding = latency_binding(seen.get(rate) or model.snapshot(np.array([rate])), slo)
    return Goodput(rate, limit, binding_words(limit, rate, binding))


def _grid(limit: Limit) -> FloatArray:
    """The search's rate grid (module docstring, **Grid**): near-zero load, then ``GRID_POINTS`` equal steps up to
    just below the stability limit."""
    top = limit.rate_rps * TOP_FRACTION
    return np.asarray(top * np.concatenate(([ZERO_LOAD_FRACTION], np.arange(1, GRID_POINTS + 1) / GRID_POINTS)))


def _start_interval(grid: FloatArray, near_rps: float | None) -> int | None:
    """i with ``grid[i − 1] <= near_rps < grid[i]`` (``i <= size − 2``), the interval :func:`_near_crossing` tries
    first; None without an estimate or with one outside ``[grid[0], grid[-2])`` (the search from the top)."""
    if near_rps is None or not grid[0] <= near_rps < grid[-2]:
        return None
    return int(np.searchsorted(grid, near_rps, side="right"))


def start_interval(limit: Limit, near_rps: float | None) -> int | None:
    """The grid interval :func:`find_goodput` of a model whose stability limit is ``limit`` tries first from
    ``near_rps`` (:func:`_start_interval`); None: the search from the top. Where the estimate is the caller's own (no
    link-bound chain-free estimate replaces it), two searches of the same model that share this interval evaluate
    the same rates and return the same goodput (:mod:`pdplan.serving.same_hits`)."""
    return _start_interval(_grid(limit), near_rps)


def _crossing(model: ServingModel, grid: FloatArray, slo: SloSpec) -> tuple[int, FloatArray] | None:
    """``(i, margins at grid[i − 1] and grid[i])`` for the first grid interval where the SLO margin turns negative;
    None where it holds at the top (module docstring, **Grid**: from the top down)."""
    below_top = _grid_margin(model, grid[-2:-1], slo)
    if below_top[0] >= 0.0:
        top = _grid_margin(model, grid[-1:], slo)
        return None if top[0] >= 0.0 else (grid.size - 1, np.concatenate((below_top, top)))
    margin = _grid_margin(model, grid[:-1], slo)
    if margin[-1] >= 0.0:  # the batch disagrees with the single rate (lattice widening is shared): the whole grid
        margin = _grid_margin(model, grid, slo)
        if margin[-1] >= 0.0:
            return None
    if margin[0] < 0.0:
        raise _zero_load_failure(model, slo, float(grid[0]))
    i = int(np.argmax(margin < 0.0))
    return i, margin[i - 1 : i + 1]


def _chain_free_estimate(model: ServingModel, slo: SloSpec, limit: Limit) -> float | None:
    """The goodput of ``model`` with its KV link's wait as the M/G/1 on its busy times with slack, where its stability
    limit is a link priced by the tandem chain; None elsewhere, or where that model meets the SLO at no rate (module
    docstring, **A link-bound deployment without an estimate**)."""
    if limit.binding != Binding.LINK or not isinstance(model, DisaggregatedModel) or model.tandem is None:
        return None
    try:
        return find_goodput(dataclasses.replace(model, tandem=None, far_service_s=None), slo).rate_rps
    except NoFeasiblePlanError:
        return None


def _near_crossing(
    model: ServingModel, grid: FloatArray, slo: SloSpec, near_rps: float | None
) -> tuple[int, FloatArray] | None:
    """:func:`_crossing`'s answer read from the grid rates up to the one above ``near_rps``, where that one is the
    first to miss the SLO and lies below the grid's top two rates (module docstring, **Near a known goodput**);
    None otherwise (no estimate, one at or above the second-highest rate, margins that do not bracket there, or a
    wait that does not settle): then the whole search."""
    i = _start_interval(grid, near_rps)
    if i is None:
        return None
    rates = grid[:-1].copy()  # the batch _crossing evaluates, the dear rates above grid[i] replaced by grid[i]
    rates[i + 1 :] = grid[i]
    margin = _grid_margin(model, rates, slo)
    if np.any(margin == UNSETTLED_MARGIN) or np.any(margin[:i] < 0.0) or margin[i] >= 0.0:
        return None
    return i, margin[i - 1 : i + 1]


def binding_words(limit: Limit, rate: float, binding: str) -> str:
    """The binding words, with :data:`~pdplan.serving.limits.BEYOND_KV_COMFORT` when ``rate`` lies past the
    comfortable decode KV limit, and :data:`~pdplan.serving.limits.BEYOND_SEAT_COMFORT` past the comfortable seat
    limit."""
    if limit.beyond_kv_comfort(rate):
        binding = f"{binding} ({BEYOND_KV_COMFORT})"
    return f"{binding} ({BEYOND_SEAT_COMFORT})" if limit.beyond_seat_comfort(rate) else binding


def _grid_margin(model: ServingModel, grid: FloatArray, slo: SloSpec) -> FloatArray:
    """SLO margin on the rate grid. Where a wait's stationary law cannot be computed
    (:class:`~pdplan.errors.UnsettledWaitError`: the KV link's chain near saturation), the rates from the
    first that fails upwards count as missing the SLO (:data:`UNSETTLED_MARGIN`): mixing only slows as the
    load grows, and a wait that does not settle within the budget is far past any latency threshold."""
    try:
        return slo_margin(model.snapshot(grid), slo)
    except UnsettledWaitError as err:
        first = err.rate_index if err.rate_index is not None else 0
    margin = np.full(grid.size, UNSETTLED_MARGIN)
    if first > 0:
        margin[:first] = slo_margin(model.snapshot(grid[:first]), slo)
    return margin


def _feasible_side(gap: Callable[[float], float], rate: float, lo: float, xtol: float) -> float:
    """brentq's root lies within its tolerance of the crossing, on either side; a goodput must meet the SLO, so
    an infeasible root steps back by that tolerance (``xtol + rtol·rate``, doubled), or to the bracket's feasible
    end ``lo``."""
    if gap(rate) >= 0.0:
        return rate
    back = max(lo, rate - 2.0 * (xtol + 1e-6 * rate))
    return back if gap(back) >= 0.0 else lo
