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

from pdplan.errors import SpecError
from pdplan.queueing.arrivals import empirical_ca2
from pdplan.serving.cache_domain import cache_rate
from pdplan.serving.cache_mechanisms import placement_of, ppd_applies
from pdplan.serving.cache_root import Probe, probe, self_consistent
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.colocated_build import build_colocated
from pdplan.serving.decode_lines import best_line, limit_bound, line_at_rate, mean_decode_step_s
from pdplan.serving.deployment import Deployment
from pdplan.serving.disaggregated import DecodeSide, DisaggregatedModel, build_disaggregated, unplaced_disaggregated
from pdplan.serving.goodput import Goodput, find_goodput
from pdplan.serving.resolve import ColocatedHardware, DisaggregatedHardware, ResolvedScenario, bind
from pdplan.serving.same_hits import SameHits
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.specs.scenario import SloSpec
from pdplan.specs.workload import WorkloadSpec
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


def with_cache_rate(res: ResolvedScenario[Any], rate_rps: float) -> ResolvedScenario[Any]:
    """``res`` with the prefix cache's hit rates evaluated at ``rate_rps`` (unchanged without a cache)."""
    if res.cache is None:
        return res
    return dataclasses.replace(res, cache_rate_rps=max(float(rate_rps), 1e-9))


@dataclass
class PpdProbes:
    """The first goodput search and the SLO margins (c, :mod:`pdplan.serving.cache_root`) of :func:`goodput_model`'s
    fixed points on PPD models whose placement is ``ppd``'s (:attr:`pdplan.serving.ppd_pool.TurnPlacement.as_ppd`:
    the policy ``ppd``, or ``score`` where its rule places every append of every turn), shared by the plans of one
    search (one resolved base scenario).

    Such a model is the ``ppd`` model of the same deployment, bypass threshold and cache rate but for the policy's
    name, which no latency reads (tests/unit/test_ppd_score.py: the placement field for field, the latencies and
    the goodput bit for bit), so its goodput search, started at the same rate, and its margin at a rate are that
    model's: a ``score`` plan repeats its ``ppd`` twin's rates and their answers (examples/chat-ppd.yaml: one search
    and seven margins). Keyed by the deployment less its cache, the cache setting with its turn placement read as
    ``ppd`` at that threshold (the score rule's weights only decide), the cache rate, the decode line, the start rate
    (the rate, for a margin) and the SLO; a model whose placement is not ``ppd``'s is neither read nor kept."""

    found: dict[tuple[object, ...], Goodput] = field(default_factory=dict)
    same: SameHits = field(default_factory=SameHits)
    """The search's colocated goodput searches, shared by the screen and the exact plans (:class:`SameHits`)."""
    models: dict[tuple[object, ...], LocalModel] = field(default_factory=dict)
    """The ``ppd`` models the probes built, by :meth:`twin_key` (:meth:`built`)."""
    margins: dict[tuple[object, ...], Probe[LocalModel]] = field(default_factory=dict)
    """c at a rate on a model placed as ``ppd`` (:meth:`margin`)."""

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

    def margin(self, res: ResolvedScenario[Any], model: LocalModel, rate_rps: float, slo: SloSpec) -> Probe[LocalModel]:
        """:func:`~pdplan.serving.cache_root.probe` of ``model`` (built on ``res``) at ``rate_rps``, or its ``ppd``
        twin's (the same snapshot: the same model but for the policy's name) with ``res`` and ``model``."""
        key = self.key(res, model, slo, rate_rps)
        if key is None:
            return probe(res, model, rate_rps, slo)
        if key not in self.margins:
            self.margins[key] = probe(res, model, rate_rps, slo)
        return dataclasses.replace(self.margins[key], res=res, model=model)


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
    cache: the model of ``res``. With one: the self-consistent rate, the root of c(r) = the SLO margin at r of the
    model whose hit rates are those at r (:mod:`pdplan.serving.cache_root`), from ``start_rps`` (a neighbouring
    variant's goodput; None: :func:`pdplan.serving.cache_domain.cache_rate`), where a whole goodput search gives the
    first model's goodput and each later rate costs a build and one snapshot.

    Each model after the first is rebuilt from the first, reusing what the hit rates do not change
    (:func:`build_model` ``like``): the same models as built from scratch, bit for bit. The first search starts near
    ``start_rps`` (:func:`find_goodput` ``near_rps``); a colocated model an earlier search of this scenario built (an
    emptied cache) reads that search's goodput (:mod:`pdplan.serving.same_hits`). ``probes``: the search's
    :class:`PpdProbes` (None: each model built and searched here)."""
    if res.cache is None:
        model = build_model(res)
        return res, model, find_goodput(model, slo)
    start = start_rps if start_rps is not None and start_rps > 0 else None
    same = probes.same if probes is not None else SameHits()
    first: list[LocalModel] = []  # the first model: the parts the hit rates do not change are reused

    def built(rate_rps: float) -> tuple[ResolvedScenario[Any], LocalModel]:
        nxt = with_cache_rate(res, rate_rps)
        like = first[0] if first else None
        model = build_model(nxt, like) if probes is None else probes.built(nxt, like)
        if not first:
            first.append(model)
        return nxt, model

    def searched(at: ResolvedScenario[Any], model: LocalModel) -> Goodput:
        return _probe_goodput(probes, same, at, model, slo, start)

    evaluate = None if probes is None else (lambda at, model, rate: probes.margin(at, model, rate, slo))
    return self_consistent(built, searched, slo, cache_rate(res) if start is None else start, evaluate)
