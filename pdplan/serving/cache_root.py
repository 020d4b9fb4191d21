"""A prefix cache's self-consistent goodput as one root (issues #24, #27).

With a prefix cache the hit rates depend on the rate (a faster stream churns the cache sooner). Let M_r be the model
whose hit rates are those at rate r and g(r) its goodput (:func:`pdplan.serving.goodput.find_goodput`); the reported
goodput is the self-consistent rate r* where g(r) ≥ r turns to g(r) < r.

**One root.** For a fixed model M the SLO margin m(M, λ) (≥ 0 where the SLO holds:
:func:`pdplan.serving.goodput.slo_margin`) is non-increasing in λ (:mod:`pdplan.serving.goodput`), and M's goodput
is its crossing: m(M, λ) ≥ 0 exactly when λ ≤ g_M (to the search's ``REL_TOL`` of M's stability limit). With
M = M_r and λ = r,

    g(r) ≥ r  ⟺  c(r) := m(M_r, r) ≥ 0,

so {r : g(r) ≥ r} and {r : c(r) ≥ 0} are the same set and r*, their upper end, is c's sign change: the rate the
bracket of h(r) = g(r) − r closed on before, whose every probe was a build and a whole goodput search (a stability
limit, a rate grid and about ten snapshots), where an evaluation of c is a build and one snapshot. The hit rates
fall as r rises, and M_r's margin at any fixed λ with them: c is non-increasing in r (both of its arguments only
lower it) and changes sign once. Where an LRU tier's hit rate collapses (the working set outgrows the tier), g and
c jump down at one rate, and the root is the jump. Past M_r's stability limit (r above the search grid's top,
``TOP_FRACTION`` of it) g(r) ≤ the limit < r: c(r) is then minus r's excess over that top as a fraction of it (only
its sign decides the root; its slope steers brentq's interpolation towards the rate where r meets its own limit);
where a wait does not settle (:class:`~pdplan.errors.UnsettledWaitError`), ``UNSETTLED_MARGIN``.

**The tolerance** is :data:`CACHE_RATE_RTOL` (1 %) of the lower of the first rate and its goodput, the precision of
the bracket before. Closed to ``REL_TOL`` of the stability limit (0.1 %, the goodput search's own), the root cost
more than the bracket it replaced: a warm start (a neighbouring plan's goodput) is within 1 % of its goodput more
often than within 0.1 % of the limit, and each further rate is a build, which is most of a probe's cost for an xPyD
model (a PPD placement priced) (docs/accuracy.md §7.16).

**The steps** (:func:`self_consistent`).

1. A whole goodput search at the first rate r₀ (a neighbouring plan's goodput or the default cache rate): g₀ = g(r₀);
   a model that meets the SLO at no rate raises :class:`~pdplan.errors.NoFeasiblePlanError` as the search does.
   Where |g₀ − r₀| ≤ tol, r* lies between them (g non-increasing): M_{r₀} and g₀ are the answer, as before.
2. c(g₀), and c(r₀) on M_{r₀} (one snapshot). Where r₀ holds (g₀ > r₀) and g₀ holds as well,
   g₀ ≤ g(g₀) ≤ g(r₀) = g₀: g₀ is r* and the answer, M_{g₀}'s. Where r₀ and g₀ differ in sign they bracket r*;
   where r₀ (above g₀) holds, it is the answer (M_{r₀} crosses within the search's tolerance above g₀). Where both
   fail (c not quite monotone: a PPD placement that moves with the hit rates), the rate is halved until one holds,
   down to tol, below which no rate holds: NoFeasiblePlanError.
3. :func:`pdplan.numerics.roots.brentq` on c across the bracket to ``xtol`` = tol; the answer is the highest rate
   evaluated that holds (the final bracket's holding end, within tol of the root).

The binding constraint: where the model at the answer's hit rates meets the SLO ``COLLAPSE_HEADROOM`` above the
answer (g(r*) > (1 + headroom)·r*) while the next rate evaluated above fails, the cache binds, not a latency: the
tier whose token hit ratio falls most across the bracket, ``cache capacity (tier)`` (the rule of the bracket
before); where the rate above failed past its model's stability limit, that limit's name; else the latency of the
answer's snapshot (:func:`~pdplan.serving.goodput.latency_binding`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np

from pdplan.errors import NoFeasiblePlanError, UnsettledWaitError
from pdplan.numerics.roots import brentq
from pdplan.serving.goodput import (
    TOP_FRACTION,
    UNSETTLED_MARGIN,
    Goodput,
    binding_words,
    latency_binding,
    slo_margin,
)
from pdplan.serving.limits import Limit
from pdplan.serving.resolve import ResolvedScenario
from pdplan.serving.snapshot import Snapshot
from pdplan.specs.scenario import SloSpec
from pdplan.types import Binding

if TYPE_CHECKING:
    from pdplan.serving.prefix_cache import CacheClasses


class CachedModel(Protocol):
    """What the root reads of a serving model (:data:`pdplan.serving.build.LocalModel`): its stability limit, its
    snapshot at a rate, and its prefix cache's classes."""

    @property
    def cache(self) -> CacheClasses | None: ...
    def limit(self) -> Limit: ...
    def snapshot(self, rates: Any) -> Snapshot: ...


M = TypeVar("M", bound=CachedModel)

CACHE_RATE_RTOL = 0.01
"""The self-consistent goodput is found to this fraction of the rate (module docstring, **The tolerance**)."""
COLLAPSE_HEADROOM = 0.01
"""Where the model at the answer's hit rates still meets the SLO this fraction above the answer while the next rate
above fails, the cache's collapse binds, not a latency (the bracket's rule before: g(lo) > (1 + 1 %)·lo)."""
ROOT_RTOL = 1e-6
"""brentq's relative tolerance on c, :func:`pdplan.serving.goodput.find_goodput`'s."""

Build = Callable[[float], tuple[ResolvedScenario[Any], M]]
"""The scenario and model with the hit rates of a cache rate."""
Search = Callable[[ResolvedScenario[Any], M], Goodput]
"""The whole goodput search of the first model."""
Evaluate = Callable[[ResolvedScenario[Any], M, float], "Probe[M]"]
"""c at a rate on the model built for it (:func:`probe`, or a memo of it)."""


@dataclass(frozen=True, slots=True)
class Probe(Generic[M]):
    """c at one rate: the model with the hit rates of that rate, its stability limit, c there (:func:`probe`) and the
    model's snapshot there (None past the limit or where a wait does not settle)."""

    res: ResolvedScenario[Any]
    model: M
    rate_rps: float
    limit: Limit
    margin: float
    snap: Snapshot | None

    @property
    def holds(self) -> bool:
        """c(r) ≥ 0: with the hit rates of r, the SLO holds at r."""
        return self.margin >= 0.0

    @property
    def stable(self) -> bool:
        """The rate lies within the model's stable range (at or below the search grid's top)."""
        return self.rate_rps <= self.limit.rate_rps * TOP_FRACTION


def probe(res: ResolvedScenario[Any], model: M, rate_rps: float, slo: SloSpec) -> Probe[M]:
    """c(``rate_rps``) on ``model``: its SLO margin there; past its stability limit, minus the rate's excess over the
    grid's top as a fraction of it; ``UNSETTLED_MARGIN`` where a wait does not settle (module docstring)."""
    limit = model.limit()
    top = limit.rate_rps * TOP_FRACTION
    if rate_rps > top:
        return Probe(res, model, rate_rps, limit, -(rate_rps - top) / top, None)
    try:
        snap = model.snapshot(np.array([rate_rps]))
    except UnsettledWaitError:
        return Probe(res, model, rate_rps, limit, UNSETTLED_MARGIN, None)
    return Probe(res, model, rate_rps, limit, float(slo_margin(snap, slo)[0]), snap)


@dataclass
class _Roots(Generic[M]):
    """c's evaluations by rate (the answer and its binding constraint read them again)."""

    build: Build[M]
    evaluate: Evaluate[M]
    slo: SloSpec
    seen: dict[float, Probe[M]] = field(default_factory=dict)

    def at(self, rate_rps: float) -> Probe[M]:
        if rate_rps not in self.seen:
            res, model = self.build(rate_rps)
            self.seen[rate_rps] = self.evaluate(res, model, rate_rps)
        return self.seen[rate_rps]

    def margin(self, rate_rps: float) -> float:
        return self.at(rate_rps).margin


def self_consistent(
    build: Build[M], search: Search[M], slo: SloSpec, first_rps: float, evaluate: Evaluate[M] | None = None
) -> tuple[ResolvedScenario[Any], M, Goodput]:
    """The model whose goodput is reported, and that goodput: c's root from ``first_rps`` (module docstring).
    ``evaluate``: c on a built model (None: :func:`probe`)."""
    res0, model0 = build(first_rps)
    good0 = search(res0, model0)  # NoFeasiblePlanError where the first model meets the SLO at no rate
    tol = CACHE_RATE_RTOL * min(first_rps, good0.rate_rps)
    if abs(good0.rate_rps - first_rps) <= tol:
        return res0, model0, good0
    roots = _Roots(build, evaluate or (lambda res, model, rate: probe(res, model, rate, slo)), slo)
    other = roots.at(good0.rate_rps)
    first = roots.seen[first_rps] = roots.evaluate(res0, model0, first_rps)
    if good0.rate_rps > first_rps and other.holds:  # g₀ ≤ g(g₀) ≤ g(r₀) = g₀: r* (step 2)
        return other.res, other.model, _answer(other, None, slo)
    lo, hi = (first, other) if good0.rate_rps > first_rps else (other, first)
    if hi.holds:  # r₀ above g₀ holds: M_{r₀} crosses within the search's tolerance above g₀ (step 2)
        return hi.res, hi.model, _answer(hi, None, slo)
    if not lo.holds:
        lo, hi = _holding_below(roots, lo, tol)
    brentq(roots.margin, lo.rate_rps, hi.rate_rps, xtol=tol, rtol=ROOT_RTOL, f_a=lo.margin, f_b=hi.margin)
    answer = max((p for p in roots.seen.values() if p.holds), key=lambda p: p.rate_rps)  # the final bracket's low end
    above = min((p for p in roots.seen.values() if p.rate_rps > answer.rate_rps), key=lambda p: p.rate_rps)
    return answer.res, answer.model, _answer(answer, above, slo)


def _holding_below(roots: _Roots[M], fails: Probe[M], tol: float) -> tuple[Probe[M], Probe[M]]:
    """The first of ``fails``'s rate's halvings that holds, and the halving above it (which fails);
    NoFeasiblePlanError below ``tol``."""
    above = fails
    while True:
        if above.rate_rps < tol:
            raise NoFeasiblePlanError(
                f"no rate holds the SLO with the prefix cache's hit rates at that rate (tried down to "
                f"{above.rate_rps:.4g} req/s)",
                binding_constraint=_failing_words(above, roots.slo),
            )
        below = roots.at(0.5 * above.rate_rps)
        if below.holds:
            return below, above
        above = below


def _answer(at: Probe[M], above: Probe[M] | None, slo: SloSpec) -> Goodput:
    """The goodput ``at``'s rate with its binding constraint (module docstring); ``above``: the nearest failing rate
    evaluated above it."""
    rate = at.rate_rps
    tier = None if above is None else _collapsed_tier(at, above, slo)
    if tier is not None:
        return Goodput(rate, at.limit, f"{Binding.CACHE_CAPACITY} ({tier})")
    if above is not None and not above.stable:
        return Goodput(rate, at.limit, binding_words(at.limit, rate, at.limit.binding))
    assert at.snap is not None  # a holding probe was evaluated
    return Goodput(rate, at.limit, binding_words(at.limit, rate, latency_binding(at.snap, slo)))


def _collapsed_tier(at: Probe[M], above: Probe[M], slo: SloSpec) -> str | None:
    """Where the model at ``at``'s hit rates meets the SLO ``COLLAPSE_HEADROOM`` above its rate (g(r) > (1 + h)·r)
    while ``above`` fails, the cache's hit rates fail it there, not the rate: the tier whose token hit ratio falls most
    from ``at`` to ``above``; None otherwise."""
    ours, theirs = at.model.cache, above.model.cache
    if ours is None or theirs is None:
        return None
    if not probe(at.res, at.model, at.rate_rps * (1.0 + COLLAPSE_HEADROOM), slo).holds:
        return None
    _, tier = max(
        (a.token_hit_ratio - b.token_hit_ratio, a.name) for a, b in zip(ours.tiers, theirs.tiers, strict=True)
    )
    return tier


def _failing_words(got: Probe[M], slo: SloSpec) -> str:
    """The binding constraint of a probe that fails: its latency's, or its limit's past it."""
    if got.snap is None:
        return got.limit.binding
    return latency_binding(got.snap, slo)
