"""The serving model of a bound deployment: one model per kind.

* :class:`~pdplan.serving.deployment.Disaggregated` → :class:`~pdplan.serving.disaggregated.DisaggregatedModel`;
* :class:`~pdplan.serving.deployment.Colocated` → :class:`~pdplan.serving.colocated.ColocatedModel`;
* :class:`~pdplan.serving.deployment.Prfaas` → the model of its local xPyD cluster (what the plain rows of a PrfaaS
  report describe); the remote cluster's analysis is :class:`pdplan.serving.prfaas.model.PrfaasModel`.

``evaluate`` and the optimiser's exact re-evaluation share this path: the scenario is resolved once and each
deployment only bound (:func:`pdplan.serving.resolve.bind`).

The workload's arrival process enters here (:func:`arrival_ca2`): its c_a² goes to the prefill pool
(:attr:`pdplan.serving.prefill_pool.PrefillPool.arrival_ca2`) or the colocated model, whose prompt queues take the
G/G correction for the c² each instance sees (:mod:`pdplan.queueing.arrivals`). Poisson arrivals (c_a² = 1) leave
the model as built. The decode side keeps Poisson arrivals: a decode instance's admissions are prefill departures,
whose gaps lie between the prefill service's and the arrivals' (Whitt's QNA departure approximation
``c_d² = ρ²c_s² + (1 − ρ²)c_a²``), and the decode model uses the sequences in flight, whose mean (Little's law) does
not depend on the gaps; only their spread does (the load noise and the idle probability e^{−N} are Poisson's), so the
TPOT tail is somewhat pessimistic for smooth arrivals and optimistic for bursty ones. The KV link's queue
(:mod:`pdplan.queueing.link_delay`) is fed by prefill departures too and stays Poisson as well.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.queueing.arrivals import empirical_ca2
from pdplan.serving.cache_domain import cache_rate
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.colocated_build import build_colocated
from pdplan.serving.decode_lines import best_line, limit_bound, line_at_rate, mean_decode_step_s
from pdplan.serving.deployment import Deployment
from pdplan.serving.disaggregated import DecodeSide, DisaggregatedModel, build_disaggregated, unplaced_disaggregated
from pdplan.serving.goodput import Goodput, find_goodput
from pdplan.serving.ppd_model import applies as ppd_applies
from pdplan.serving.ppd_report import placement_of
from pdplan.serving.resolve import ColocatedHardware, DisaggregatedHardware, ResolvedScenario, bind
from pdplan.serving.same_hits import SameHits
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.specs.scenario import SloSpec
from pdplan.specs.workload import WorkloadSpec
from pdplan.types import Binding
from pdplan.workload.bins import trace_arrivals_s

LocalModel = DisaggregatedModel | ColocatedModel
"""A serving model of one cluster."""


def arrival_ca2(workload: WorkloadSpec) -> float:
    """c_a² of the workload's arrival gaps: the process's own (Poisson 1, constant 0, gamma cv²), or for ``arrival:
    trace`` the value measured from the trace's times (:func:`pdplan.queueing.arrivals.empirical_ca2`)."""
    ca2 = workload.arrival_process().ca2
    if ca2 is not None:
        return ca2
    times = trace_arrivals_s(workload)
    try:
        return empirical_ca2(times)
    except ValueError as err:  # fewer than 3 arrivals, or all at one instant
        raise SpecError(f"arrival: trace: {err}", field="arrival") from None


def build_model(res: ResolvedScenario[Any], like: LocalModel | None = None) -> LocalModel:
    """The serving model of the deployment ``res`` is bound to, for the workload's arrival process (module
    docstring). ``like``: a model of the same bound deployment at another cache rate (``res`` less its
    ``cache_rate_rps``), whose parts the hit rates do not change are reused as they are: the decode side of an xPyD
    model (:class:`~pdplan.serving.disaggregated.DecodeSide`), the model without the cache of a colocated one."""
    hw = res.hardware
    ca2 = arrival_ca2(res.scenario.workload)
    if isinstance(hw, ColocatedHardware):
        plain = like.plain if isinstance(like, ColocatedModel) else None
        colocated = build_colocated(res, plain)
        return colocated if ca2 == 1.0 else dataclasses.replace(colocated, arrival_ca2=ca2)
    if isinstance(hw, DisaggregatedHardware):
        # PPD places turns on decode by the hit rates (its decode side then depends on them): priced afresh
        same_line = like is not None and like.res.decode_line == res.decode_line
        reuse = isinstance(like, DisaggregatedModel) and same_line and not ppd_applies(res)
        side = DecodeSide.of(like) if reuse and isinstance(like, DisaggregatedModel) else None
        model = build_disaggregated(res, side)
        pool = model.pool if ca2 == 1.0 else dataclasses.replace(model.pool, arrival_ca2=ca2)
        return model if ca2 == 1.0 else dataclasses.replace(model, pool=pool)
    raise TypeError(f"no serving model for hardware {type(hw).__name__}")


def build(res: ResolvedScenario[Any], deployment: Deployment) -> LocalModel:
    """The serving model of ``deployment`` on a resolved scenario."""
    return build_model(bind(res, deployment))


CACHE_RATE_RTOL = 0.01
"""The self-consistent goodput with a prefix cache is bracketed to this relative width."""
CACHE_RATE_ROUNDS = 24
"""At most this many models are built to bracket it (each a build and a goodput search)."""


def with_cache_rate(res: ResolvedScenario[Any], rate_rps: float) -> ResolvedScenario[Any]:
    """``res`` with the prefix cache's hit rates evaluated at ``rate_rps`` (unchanged without a cache)."""
    if res.cache is None:
        return res
    return dataclasses.replace(res, cache_rate_rps=max(float(rate_rps), 1e-9))


@dataclass(frozen=True, slots=True)
class _AtRate:
    """The model with the hit rates of rate r, and its goodput g(r)."""

    res: ResolvedScenario[Any]
    model: LocalModel
    good: Goodput

    @property
    def rate_rps(self) -> float:
        return float(self.res.cache_rate_rps or 0.0)

    @property
    def holds(self) -> bool:
        """g(r) ≥ r: at rate r, with the hit rates of rate r, the SLO holds."""
        return self.good.rate_rps >= self.rate_rps * (1.0 - 1e-9)


@dataclass
class PpdProbes:
    """The goodput searches of :func:`goodput_model`'s probes on PPD models whose placement is ``ppd``'s
    (:attr:`pdplan.serving.ppd_pool.TurnPlacement.as_ppd`: the policy ``ppd``, or ``score`` where its rule places
    every append of every turn), shared by the plans of one search (one resolved base scenario).

    Such a model is the ``ppd`` model of the same deployment, bypass threshold and cache rate but for the policy's
    name, which no latency reads (tests/unit/test_ppd_score.py: the placement field for field, the latencies and
    the goodput bit for bit), so its goodput search, started at the same rate, is that model's: a ``score`` plan
    repeats its ``ppd`` twin's probes and their answers (examples/chat-ppd.yaml: five searches). Keyed by the
    deployment less its cache, the cache setting with its turn placement read as ``ppd`` at that threshold (the score
    rule's weights only decide), the cache rate, the decode line, the start rate and the SLO; a probe whose placement
    is not ``ppd``'s is neither read nor kept."""

    found: dict[tuple[object, ...], Goodput] = field(default_factory=dict)
    same: SameHits = field(default_factory=SameHits)
    """The search's colocated goodput searches, shared by the screen and the exact plans (:class:`SameHits`)."""
    models: dict[tuple[object, ...], LocalModel] = field(default_factory=dict)
    """The ``ppd`` models the probes built, by :meth:`twin_key` (:meth:`built`)."""

    @staticmethod
    def twin_key(res: ResolvedScenario[Any]) -> tuple[object, ...] | None:
        """The deployment less its cache, the cache setting with its turn placement read as ``ppd`` at its bypass
        threshold, the cache rate and the decode line, where ``res`` is an xPyD scenario whose placement is ``ppd`` or
        ``score``; None otherwise. Within one search (one resolved base scenario) it fixes the ``ppd`` model."""
        setup = res.cache
        if not isinstance(res.hardware, DisaggregatedHardware) or setup is None or not ppd_applies(res):
            return None
        placement = setup.spec.turn_placement
        if placement.policy not in ("ppd", "score"):
            return None
        same = TurnPlacementSpec(policy="ppd", append_threshold_tokens=placement.append_threshold_tokens)
        twin = setup.spec.model_copy(update={"turn_placement": same})
        bare = dataclasses.replace(res.hardware.deployment, cache=None)
        return bare, twin, res.cache_rate_rps, res.decode_line

    def built(self, res: ResolvedScenario[Any], like: LocalModel | None = None) -> LocalModel:
        """:func:`build_model` of ``res`` (``like`` as there), or where ``res``'s placement is ``score``'s and places
        as ``ppd`` does (:func:`pdplan.serving.ppd_model.places_as_ppd`: the rule's decisions on the plain model,
        about 7 ms on examples/chat-ppd.yaml) and a probe of this search built its ``ppd`` twin (:meth:`twin_key`),
        that model with ``res`` and the policy's name (:func:`pdplan.serving.ppd_model.as_ppd_twin`: the same model
        as built, field for field) instead of its placement priced again (about 20 ms a probe there; five probes,
        those of the ``ppd`` plan). Where the rule keeps some append on prefill the model is built as before, the
        decisions' few ms spent. A ``ppd`` model built here is kept for its twins."""
        key = self.twin_key(res)
        if key is None:
            return build_model(res, like)
        policy = res.cache.spec.turn_placement.policy if res.cache is not None else None
        twin = self.models.get(key)
        if policy == "score" and twin is not None:
            from pdplan.serving.ppd_model import as_ppd_twin, places_as_ppd  # lazy: PPD only (start-up, issue #27)

            plain, _ = unplaced_disaggregated(res)
            if places_as_ppd(plain):
                return as_ppd_twin(twin, res)
        model = build_model(res, like)
        if policy == "ppd":
            self.models[key] = model
        return model

    @staticmethod
    def key(
        res: ResolvedScenario[Any], model: LocalModel, slo: SloSpec, near_rps: float | None
    ) -> tuple[object, ...] | None:
        """What fixes the search of ``model`` (built on ``res``) when its placement is ``ppd``'s; None otherwise."""
        placement = placement_of(model)
        if placement is None or not placement.as_ppd or res.cache is None:
            return None
        spec = res.cache.spec
        same = TurnPlacementSpec(policy="ppd", append_threshold_tokens=spec.turn_placement.append_threshold_tokens)
        twin = spec.model_copy(update={"turn_placement": same})
        bare = dataclasses.replace(res.hardware.deployment, cache=None)
        return bare, twin, res.cache_rate_rps, res.decode_line, near_rps, slo.model_dump_json()

    def goodput(self, res: ResolvedScenario[Any], model: LocalModel, slo: SloSpec, near_rps: float | None) -> Goodput:
        """:func:`find_goodput` of ``model`` (built on ``res``) from ``near_rps``, or its ``ppd`` twin's answer."""
        key = self.key(res, model, slo, near_rps)
        if key is None:
            return find_goodput(model, slo, near_rps)
        if key not in self.found:
            self.found[key] = find_goodput(model, slo, near_rps)
        return self.found[key]


def _probe_goodput(
    probes: PpdProbes | None,
    same: SameHits,
    res: ResolvedScenario[Any],
    model: LocalModel,
    slo: SloSpec,
    start: float | None,
) -> Goodput:
    """One cache-rate probe's goodput search: its ``ppd`` twin's answer where ``probes`` holds one, else the search
    (shared with an earlier probe that built the same colocated model: ``same``)."""
    if probes is not None and probes.key(res, model, slo, start) is not None:
        return probes.goodput(res, model, slo, start)
    return same.goodput(res, model, slo, start)


def goodput_model(
    res: ResolvedScenario[Any], slo: SloSpec, start_rps: float | None = None, probes: PpdProbes | None = None
) -> tuple[ResolvedScenario[Any], LocalModel, Goodput]:
    """The model whose goodput is reported, and that goodput (:func:`line_goodput_model`); where the decode step is
    the minimum of lines (a MoE's, :mod:`pdplan.serving.decode_lines`), the best of its lines' (the law's goodput)."""
    bound = limit_bound(build_model)
    return best_line(res, lambda r: line_goodput_model(r, slo, start_rps, probes), lambda got: got[2].rate_rps, bound)


def goodput(res: ResolvedScenario[Any], slo: SloSpec, near_rps: float | None = None) -> Goodput:
    """:func:`find_goodput` of the model of ``res`` (no cache-rate fixed point: ``res`` fixes the hit rates), the best
    line's where the decode step is the minimum of lines (:mod:`pdplan.serving.decode_lines`)."""
    bound = limit_bound(build_model)
    return best_line(res, lambda r: find_goodput(build_model(r), slo, near_rps), lambda g: g.rate_rps, bound)


def model_at_rate(res: ResolvedScenario[Any], rate_rps: float) -> LocalModel:
    """The model of ``res`` at ``rate_rps``: on the line of a concave decode law that rate runs on (the least mean
    step there, :func:`pdplan.serving.decode_lines.line_at_rate`)."""
    return line_at_rate(res, rate_rps, mean_step_s, build_model)


def mean_step_s(model: LocalModel, rate_rps: float) -> float:
    """τ̄ of ``model``'s decode steps at deployment rate ``rate_rps`` (inf past its stable range)."""
    if isinstance(model, ColocatedModel):
        u = model.utilisation(np.array([rate_rps]))
        stable = float(u["prefill"][0] + u["decode"][0]) < 1.0
        return model.token_interval_s(rate_rps / model.z) if stable else math.inf
    return mean_decode_step_s(model.decode, model.cells, rate_rps / model.y)


def line_goodput_model(
    res: ResolvedScenario[Any], slo: SloSpec, start_rps: float | None = None, probes: PpdProbes | None = None
) -> tuple[ResolvedScenario[Any], LocalModel, Goodput]:
    """The model whose goodput is reported, and that goodput, on the decode line ``res`` names. Without a prefix
    cache: the model of ``res``.

    With one, hit rates depend on the rate (a faster stream churns the cache sooner): g(r), the goodput of the model
    whose hit rates are those at rate r, falls as r rises, and the reported goodput is the largest self-consistent
    rate, g(r) ≥ r. Iterating r ← g(r) converges where g is smooth but oscillates where an LRU's hit rate collapses
    (the working set outgrows a tier), so r is bracketed — a rate that holds below, one that fails above — and
    bisected to :data:`CACHE_RATE_RTOL`. Where the bracket closes on a collapse (g(lo) well above lo), the binding
    constraint is the cache tier whose hit ratio falls across it: ``cache capacity (tier)``. ``start_rps``: the first
    rate tried (a neighbouring variant's goodput; None: :func:`pdplan.serving.cache_domain.cache_rate`). Each probe
    after the first rebuilds from the first probe's model, reusing what the hit rates do not change
    (:func:`build_model` ``like``): the same models as built from scratch, bit for bit. Each probe's goodput search
    starts near the last probe's goodput (``start_rps`` for the first; :func:`find_goodput` ``near_rps``, which
    changes the rates solved, the goodput at most by a batch-wide grid's rounding): from one probe to the next the
    hit rates move it little. A colocated probe that builds the model an earlier one built (a rate past which the
    cache holds nothing: every class a miss) and starts in the same grid interval reads that probe's goodput
    (:mod:`pdplan.serving.same_hits`: the same search, bit for bit). ``probes``: the search's :class:`PpdProbes`
    (None: each probe searched here)."""
    if res.cache is None:
        model = build_model(res)
        return res, model, find_goodput(model, slo)

    first: list[LocalModel] = []  # the first probe's model: the parts the hit rates do not change are reused
    near: list[float] = [] if start_rps is None or start_rps <= 0 else [start_rps]  # the last goodput found
    same = probes.same if probes is not None else SameHits()  # colocated probes building one model share its search

    def at(rate_rps: float) -> _AtRate:
        nxt = with_cache_rate(res, rate_rps)
        like = first[0] if first else None
        model = build_model(nxt, like) if probes is None else probes.built(nxt, like)
        if not first:
            first.append(model)
        start = near[-1] if near else None
        try:
            good = _probe_goodput(probes, same, nxt, model, slo, start)
        except NoFeasiblePlanError as err:
            if model is first[0]:
                raise
            # after the first probe, a model (the hit rates of r) that meets the SLO at no rate has g(r) = 0 < r: it
            # fails there (a PPD plan past its decode's stable range at r, its appends' load frozen at r's: the
            # agent-dualpath example with turn_placement ppd, issue #24)
            good = Goodput(0.0, model.limit(), err.binding_constraint)
        near.append(good.rate_rps)
        return _AtRate(nxt, model, good)

    probe = at(cache_rate(res) if start_rps is None or start_rps <= 0 else start_rps)
    lo, hi = (probe, None) if probe.holds else (None, probe)
    kept = _Kept()
    for _ in range(CACHE_RATE_ROUNDS):
        if abs(probe.rate_rps - probe.good.rate_rps) <= CACHE_RATE_RTOL * probe.rate_rps:
            return probe.res, probe.model, probe.good  # r = g(r) to the tolerance
        if lo is not None and hi is not None:
            if hi.rate_rps - lo.rate_rps <= CACHE_RATE_RTOL * hi.rate_rps:
                break
            probe = at(_between(lo, hi, kept))
        else:
            probe = at(probe.good.rate_rps)  # r ← g(r) until it crosses
        lo, hi = kept.narrow(lo, hi, probe)
    if lo is None:
        raise NoFeasiblePlanError(
            f"no rate holds the SLO with the prefix cache's hit rates at that rate (tried down to "
            f"{probe.rate_rps:.4g} req/s)",
            binding_constraint=probe.good.binding,
        )
    return lo.res, lo.model, _consistent(lo, hi)


@dataclass(slots=True)
class _Kept:
    """The Illinois weights of the bracket's ends (Dowell & Jarratt, BIT 11, 1971): false position keeps one end
    while the other creeps towards the root when h is convex or concave across the bracket, as at a cache tier's
    collapse (examples/chat-ppd.yaml's colocated pick: eight probes each moving the holding end by a tenth of the
    bracket, the failing end fixed at g = 0.57 r). Each time the same end moves twice running, the kept end's h is
    halved in the chord, which pulls the next probe across the root; a moved end's weight is reset to 1."""

    lo: float = 1.0
    hi: float = 1.0
    last_holds: bool | None = None

    def narrow(self, lo: _AtRate | None, hi: _AtRate | None, probe: _AtRate) -> tuple[_AtRate | None, _AtRate | None]:
        """The bracket with ``probe`` as its low end where it holds (its high end where it fails), the weights
        updated where it was a bracket before."""
        if lo is not None and hi is not None:
            self.moved(probe.holds)
        if probe.holds:
            return (probe if lo is None or probe.rate_rps > lo.rate_rps else lo), hi
        return lo, (probe if hi is None or probe.rate_rps < hi.rate_rps else hi)

    def moved(self, holds: bool) -> None:
        """Record that the last probe moved the low end (``holds``) or the high end."""
        if holds:
            self.lo = 1.0
            self.hi = self.hi * 0.5 if self.last_holds is True else self.hi
        else:
            self.hi = 1.0
            self.lo = self.lo * 0.5 if self.last_holds is False else self.lo
        self.last_holds = holds


def _between(lo: _AtRate, hi: _AtRate, kept: _Kept) -> float:
    """The next rate inside the bracket: where the chord of h(r) = g(r) − r crosses 0 (false position, each end's h
    weighted by ``kept``: the Illinois variant; g is smooth except where a tier's hit rate collapses), or the midpoint
    when the chord falls within a tenth of the width of either end (a collapse: the chord would creep towards it)."""
    h_lo = kept.lo * (lo.good.rate_rps - lo.rate_rps)
    h_hi = kept.hi * (hi.good.rate_rps - hi.rate_rps)
    width = hi.rate_rps - lo.rate_rps
    chord = lo.rate_rps + width * h_lo / (h_lo - h_hi) if h_lo > h_hi else lo.rate_rps
    inside = lo.rate_rps + 0.1 * width <= chord <= hi.rate_rps - 0.1 * width
    return chord if inside else lo.rate_rps + 0.5 * width


def _consistent(lo: _AtRate, hi: _AtRate | None) -> Goodput:
    """The goodput at the bracket's low end: g(lo) itself when it is within tolerance of lo, else lo with the tier
    whose hit ratio falls across the bracket named as the binding constraint."""
    if hi is None or lo.good.rate_rps <= lo.rate_rps * (1.0 + CACHE_RATE_RTOL):
        return lo.good
    if lo.model.cache is None or hi.model.cache is None:
        return lo.good
    drops = [
        (a.token_hit_ratio - b.token_hit_ratio, a.name)
        for a, b in zip(lo.model.cache.tiers, hi.model.cache.tiers, strict=True)
    ]
    tier = max(drops)[1]
    return Goodput(lo.rate_rps, lo.good.limit, f"{Binding.CACHE_CAPACITY} ({tier})")
