"""Exact re-evaluation of the screen's best candidates with the full serving model, and the pick's sensitivity.

A candidate is a :class:`~pdplan.serving.deployment.Deployment`, bound to the search's resolved scenario (resolved
once per search) and modelled exactly as ``pdplan evaluate`` does (:func:`pdplan.serving.build.build`), then
turned into a :class:`~pdplan.search.plans.Plan` with latencies at the operating rate (the target rate, or the
goodput).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from pdplan.errors import NoFeasiblePlanError
from pdplan.search.law_rows import line_models, model_at, rate_rows
from pdplan.search.plans import Plan, Sensitivity
from pdplan.search.priced import priced_record
from pdplan.serving import (
    GOODPUT_REL_TOL,
    Colocated,
    ColocatedHardware,
    ColocatedModel,
    Disaggregated,
    DisaggregatedHardware,
    Goodput,
    LatencySummary,
    LocalModel,
    OperatingPoint,
    ResolvedScenario,
    ServingModel,
    Snapshot,
    bind,
    build_model,
    check_operating_point,
    find_goodput,
    instance_budget,
    operating_point,
)
from pdplan.serving.build import PpdProbes, line_goodput_model, with_cache_rate
from pdplan.serving.cache_mechanism_calls import dual_path_report, ppd_report
from pdplan.serving.cache_mechanisms import ppd_applies
from pdplan.serving.cache_report import CacheReport
from pdplan.serving.checks.vendors import cross_vendor_warning
from pdplan.serving.decode_lines import LineBound, best_line, limit_bound, line_count
from pdplan.serving.snapshot import Latency
from pdplan.specs.hardware import LinkSpec
from pdplan.specs.scenario import SloSpec
from pdplan.types import Binding


def _latency(s: LatencySummary) -> Latency:
    """``s`` as the plan records it: P50, P90 and P99 each solved on first read (the SLO's already solved)."""
    return s.plain()


def _headroom(res: ResolvedScenario[Any]) -> dict[str, float]:
    """Free HBM per GPU after weights and workspace, in bytes, per role (KV occupancy is in the utilisations)."""
    out: dict[str, float] = {}
    for role, hw in res.roles:
        out[f"{role}_kv_free_bytes_per_gpu"] = float(np.ravel(instance_budget(hw, role).kv_free_bytes)[0])
    return out


@dataclass(frozen=True)
class Exact:
    """A plan evaluated exactly, with the objects the sensitivity analysis reuses."""

    plan: Plan
    res: ResolvedScenario[Any]
    model: LocalModel
    capacity: LocalModel | None = None
    """The model goodput is found on: the deployment with one instance of each pool down under ``n+1``
    (None: :attr:`model`)."""
    headroom: float = 0.0
    """Planning margin H: the reported goodput is the SLO-meeting rate / (1 + H)."""

    def goodput_rps(self, model: ServingModel, slo: SloSpec) -> float:
        """The goodput the plan reports for ``model`` (built like :attr:`capacity`) under ``slo``, margins applied."""
        return _goodput_or_zero(model, slo) / (1.0 + self.headroom)

    @cached_property
    def lines(self) -> tuple[LocalModel, ...]:
        """:attr:`model` on each line of its decode law (:func:`pdplan.search.law_rows.line_models`: ``model``
        itself on its own line), built once for the rate curve and the rate rows."""
        return line_models(self.res, self.model)

    @cached_property
    def capacity_lines(self) -> tuple[LocalModel, ...]:
        """The same of the model goodput is found on (:attr:`capacity`, or :attr:`model`: then :attr:`lines`), for
        the SLO rows, which do not change the model."""
        return self.lines if self.capacity is None else line_models(self.capacity.res, self.capacity)


def degraded(d: Disaggregated | Colocated) -> Disaggregated | Colocated:
    """``d`` with one instance of each pool down (``n+1`` redundancy); NoFeasiblePlanError for a single one."""
    if any(r.count < 2 for _, r in d.roles):
        raise NoFeasiblePlanError(
            "n+1 redundancy needs at least two instances in every pool", binding_constraint=Binding.REDUNDANCY
        )
    return d.less_one_instance()


def evaluate_exact(
    base: ResolvedScenario[Any],
    d: Disaggregated | Colocated,
    *,
    target_rps: float | None,
    failures: list[NoFeasiblePlanError] | None = None,
    shared_warnings: tuple[str, ...] = (),
    headroom: float = 0.0,
    redundancy: str = "none",
    start_rps: float | None = None,
    probes: PpdProbes | None = None,
    known: dict[Hashable, Any] | None = None,
) -> Exact | None:
    """Exact goodput and operating point of one deployment; None when it cannot meet the SLO (or the target),
    with the reason appended to ``failures``. ``shared_warnings`` (those of the base scenario, e.g. context-window
    clipping, the same for every candidate) are reported once for the whole result, not per plan.

    Planning margins: under ``redundancy="n+1"`` goodput is found with one instance of each pool down; the
    reported goodput is that SLO-meeting rate divided by ``1 + headroom``; latencies and utilisations are those of
    the whole deployment at the operating rate (the target, or the reported goodput). ``start_rps``: where a
    prefix cache's self-consistent goodput is first looked for (the screen's estimate); ``probes``: the search's PPD
    goodput searches (:class:`pdplan.serving.build.PpdProbes`; None: this plan's own); ``known``: the outcome of each
    goodput search on a deployment without a cache (which reads neither the target nor the start rate), by deployment
    and redundancy, for searches of the same resolved scenario ``base`` (:mod:`pdplan.search.memo`; filled in here)."""
    slo = base.scenario.slo
    try:
        res, model, capacity, good = _goodput(base, d, target_rps, redundancy, start_rps, probes, known)
        good = dataclasses.replace(good, rate_rps=good.rate_rps / (1.0 + headroom))
        if target_rps is not None and good.rate_rps < target_rps:
            raise NoFeasiblePlanError(
                f"reaches {good.rate_rps:.4g} of {target_rps:g} req/s, "
                f"{(1.0 - good.rate_rps / target_rps) * 100.0:.1f} % short",
                binding_constraint=good.binding,
            )
    except NoFeasiblePlanError as err:
        if failures is not None:
            failures.append(err)
        return None
    rate = target_rps if target_rps is not None else good.rate_rps * (1.0 - 1e-6)
    if target_rps is not None:  # the target's own line of a concave decode law (pdplan.search.law_rows)
        model = model_at(res, model, rate)
        res = model.res
    snap = model.snapshot(np.array([rate]))
    check_operating_point(res, model, rate, snapshot=snap)  # a plan that breaks physics is a bug, never output
    point = operating_point(snap, slo)
    own = tuple(w for w in res.warnings if w not in shared_warnings)
    vendors = cross_vendor_warning(res)
    # what bounds the plan is read at its goodput, as evaluate's binding_constraint and the screen's are; the
    # constraint closest to its limit at the operating rate is a field of its own, as evaluate's is
    plan = _plan(res, good, point, good.binding, own if vendors is None else (*own, vendors))
    plan = dataclasses.replace(
        plan,
        e2e_mean_s=float(snap.mean_response_s()[0]),
        itl_mean_s=_itl_mean_s(snap),
        operating_binding_constraint=point.binding_constraint,
    )
    return Exact(plan, res, model, None if capacity is model else capacity, headroom)


@dataclass
class Comparisons:
    """The goodputs a search's reports compare its plans against (the same plan without its prefix cache, with
    ``pd`` turn placement, with prefill-only reads), each found once: plans that differ only in the setting a
    comparison takes away share its solve. Each is keyed by what its model is built from (the deployment less its
    cache, the cache setting compared against, the rate the hit rates are read at, the headroom), which within one
    search fixes the model. Each goodput search starts near the lowest SLO-meeting rate the search found on the same
    deployment, cache set aside (:func:`pdplan.serving.find_goodput` ``near_rps``): taking a cache mechanism away
    moves a link- or compute-bound deployment's goodput far less than the grid's step."""

    near_rps: dict[object, float] = field(default_factory=dict)
    """The lowest SLO-meeting rate (goodput × (1 + headroom)) among the search's plans, per deployment less cache."""
    found: dict[tuple[object, ...], float] = field(default_factory=dict)
    """Each comparison's goodput (margins applied), by :meth:`goodput_rps`'s key."""
    uncached_rps: Mapping[Colocated, float] = field(default_factory=dict)
    """Goodputs the search has already found (no margins applied) of deployments without a cache, by deployment:
    the colocated baseline's one instance under a setting that caches nothing (:attr:`pdplan.search.pool.Pool.
    uncached_rps`), the same model as the comparison without the cache of a plan on that deployment builds
    (:meth:`goodput_rps`)."""

    @classmethod
    def of(cls, plans: Iterable[Exact], uncached_rps: Mapping[Colocated, float] | None = None) -> Comparisons:
        """Nothing found yet but ``uncached_rps``, each goodput search starting near the lowest rate of ``plans`` on
        its deployment."""
        near: dict[object, float] = {}
        for e in plans:
            rate = e.plan.goodput_rps * (1.0 + e.headroom)
            near[_uncached(e.res)] = min(rate, near.get(_uncached(e.res), rate))
        return cls(near, uncached_rps=dict(uncached_rps or {}))

    def goodput_rps(self, e: Exact, variant: ResolvedScenario[Any]) -> float:
        """The goodput of ``variant`` (``e``'s bound scenario with one cache setting changed or the cache taken
        away), built as ``e``'s model is (the whole deployment) and with ``e``'s headroom applied."""
        setup = variant.cache
        rate = None if setup is None else variant.cache_rate_rps
        key = (_uncached(variant), None if setup is None else setup.spec, rate, e.headroom)
        if key not in self.found:
            # without a cache the model reads neither the deployment's cache setting nor the cache rate (bind prices
            # the cache only into ``res.cache``): a deployment the search already priced without a cache is that model
            dep = key[0]
            known = self.uncached_rps.get(dep) if setup is None and isinstance(dep, Colocated) else None
            near = self.near_rps.get(_uncached(variant))
            if known is None:  # on every line of a concave decode law (pdplan.serving.decode_lines), the best
                slo = variant.scenario.slo
                built: dict[int | None, LocalModel] = {}  # each line's model, for its bound and its search

                def on(r: ResolvedScenario[Any]) -> LocalModel:
                    if r.decode_line not in built:
                        built[r.decode_line] = _built(e, r)
                    return built[r.decode_line]

                known = best_line(
                    dataclasses.replace(variant, decode_line=None),
                    lambda r: _goodput_or_zero(on(r), slo, near),
                    float,
                    _comparison_bound(on),
                )
            good = known
            self.found[key] = good / (1.0 + e.headroom)
        return self.found[key]


def _comparison_bound(on: Callable[[ResolvedScenario[Any]], LocalModel]) -> Callable[[ResolvedScenario[Any]], float]:
    """:func:`best_line`'s bound on a comparison's goodput on a line (:meth:`Comparisons.goodput_rps`: one model, its
    hit rates fixed, searched by :func:`_goodput_or_zero`), read from the line's model ``on`` builds (the one the
    search then takes): a ceiling of its stable limit, which no goodput :func:`find_goodput` returns exceeds (the SLO
    holding at the top, the limit itself; else a root below the grid's top), cheap to read where the limit is dear.
    An xPyD model's decode pool limit (:meth:`~pdplan.serving.disaggregated.DisaggregatedModel.decode_limit`, one of
    its limit's candidates; a PPD model's own placed decode side), a colocated model's decode-share cap
    (:meth:`~pdplan.serving.colocated.ColocatedModel.decode_rate_bound`, above every candidate of its limit); 0 where
    the model cannot be built (the search fails there too and the line is skipped either way). A line whose bound does
    not exceed the best goodput found cannot beat it, so the answer is the same (examples/agent-dualpath.yaml: the
    plan with both read paths compared against prefill-only reads, whose steep decode line's decode limit is 13.9
    req/s against 30.7 found on the flat one, skips that search)."""

    def bound(res: ResolvedScenario[Any]) -> float:
        try:
            model = on(res)
        except NoFeasiblePlanError:
            return 0.0
        if isinstance(model, ColocatedModel):
            return model.decode_rate_bound()
        return float(model.decode_limit().rate_rps)

    return bound


def _built(e: Exact, variant: ResolvedScenario[Any]) -> LocalModel:
    """The model of ``variant``. A colocated one without a cache is the model without the cache that ``e``'s model
    holds (:attr:`~pdplan.serving.colocated.ColocatedModel.plain`: priced from the bound deployment's hardware, lengths
    and settings alone, none of which taking the cache away changes), reused by ``build_model`` rather than priced
    again: the same model, bit for bit."""
    if variant.cache is None and isinstance(e.model, ColocatedModel):
        return build_model(variant, e.model)
    return build_model(variant)


def _uncached(res: ResolvedScenario[Any]) -> object:
    """The bound deployment less its cache setting."""
    return dataclasses.replace(res.hardware.deployment, cache=None)


def with_cache_report(e: Exact, known: Comparisons | None = None) -> Exact:
    """``e`` with its plan's prefix-cache report: the hit rates its model holds and the same deployment's goodput
    without the cache (margins applied as the plan's; ``n+1`` left out of that comparison). Unchanged without a
    cache. ``known``: the comparisons this search has already priced (filled in here; None: ``e``'s alone)."""
    if e.model.cache is None:
        return e
    known = known if known is not None else Comparisons.of([e])
    without = known.goodput_rps(e, dataclasses.replace(e.res, cache=None))
    dual = dual_path_report(e.res, e.model.cache, lambda r: known.goodput_rps(e, r))
    ppd = ppd_report(e.res, e.model, lambda r: known.goodput_rps(e, r))
    mode = e.res.hardware.deployment.mode
    report = CacheReport.of(e.model.cache, without, mode=mode, dual_path=dual, turn_placement=ppd)
    return dataclasses.replace(e, plan=dataclasses.replace(e.plan, cache=report))


Found = tuple[ResolvedScenario[Any], LocalModel, LocalModel, Goodput]


def _goodput(
    base: ResolvedScenario[Any],
    d: Disaggregated | Colocated,
    target_rps: float | None,
    redundancy: str,
    start_rps: float | None = None,
    probes: PpdProbes | None = None,
    known: dict[Hashable, Any] | None = None,
) -> Found:
    """The bound deployment, its model, the model goodput is found on (one instance of each pool down under
    ``n+1``) and that goodput (:func:`_line_goodput`); where the decode step is the minimum of lines (a MoE's), the
    best of its lines' (the law's goodput, :mod:`pdplan.serving.decode_lines`)."""

    def on(line: ResolvedScenario[Any]) -> Found:
        return _line_goodput(base, line, target_rps, redundancy, start_rps, probes)

    res = bind(base, d)
    keep = known if res.cache is None else None  # without a cache: a function of d, the redundancy and base alone
    key = ("goodput", d, redundancy)
    hit = None if keep is None else keep.get(key)
    if isinstance(hit, NoFeasiblePlanError):
        raise hit
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    try:
        found = best_line(res, on, lambda got: got[3].rate_rps, _line_bound(_capacity_model(base, d, redundancy)))
    except NoFeasiblePlanError as err:
        if keep is not None:
            keep[key] = err
        raise
    if keep is not None:
        keep[key] = found
    return found


def _capacity_model(
    base: ResolvedScenario[Any], d: Disaggregated | Colocated, redundancy: str
) -> Callable[[ResolvedScenario[Any]], LocalModel]:
    """The model goodput is found on, of a bound scenario's decode line (one instance of each pool down under
    ``n+1``): :func:`best_line`'s bound reads its stable limit."""

    def build(res: ResolvedScenario[Any]) -> LocalModel:
        if redundancy != "n+1":
            return build_model(res)
        return build_model(dataclasses.replace(bind(base, degraded(d)), decode_line=res.decode_line))

    return build


def _line_bound(
    build: Callable[[ResolvedScenario[Any]], LocalModel],
) -> Callable[[ResolvedScenario[Any]], LineBound]:
    """:func:`best_line`'s bound on a line's goodput (:func:`_line_goodput`), read from the model ``build`` makes of
    the line's scenario (:func:`_capacity_model`): without a prefix cache its stable limit (:func:`limit_bound`).
    With one, a bound that holds at every cache rate, so that it bounds every probe's goodput and so the
    self-consistent one (at most a holding probe's goodput): on an xPyD deployment whose decode side the hit rates
    do not change (not PPD, :class:`~pdplan.serving.disaggregated.DecodeSide`), its decode pool's stable limit, the
    same at every cache rate and a candidate of every probe's limit; on a colocated one whose cache keeps the cells'
    masses (not a shared-prefix layout), the decode share's own cap
    (:meth:`~pdplan.serving.colocated.ColocatedModel.decode_rate_bound`, read from the model without the cache); else
    none (inf: PPD's decode side moves with the hits). Without it a MoE's steep decode line, decode-bound far below
    the flat line's goodput (agent-dualpath: 13.9 req/s against 28.8-35.1 on xPyD, 8.1 against 8.8 colocated), ran
    its whole cache-rate search."""
    uncached = limit_bound(build)

    def bound(res: ResolvedScenario[Any]) -> LineBound:
        if res.cache is None:
            return uncached(res)
        colocated = isinstance(res.hardware, ColocatedHardware) and res.cache.reuse.shared_prefix is None
        if not colocated and (not isinstance(res.hardware, DisaggregatedHardware) or ppd_applies(res)):
            return math.inf
        try:  # colocated: the model without the cache (under n+1 the degraded one's, cached): every rate's means
            model = build(dataclasses.replace(res, cache=None) if colocated else res)
        except NoFeasiblePlanError:  # at this cache rate: the search decides (another may hold)
            return math.inf
        if isinstance(model, ColocatedModel):
            return model.decode_rate_bound()
        return model.decode_limit().rate_rps

    return bound


def _line_goodput(
    base: ResolvedScenario[Any],
    bound_res: ResolvedScenario[Any],
    target_rps: float | None,
    redundancy: str,
    start_rps: float | None = None,
    probes: PpdProbes | None = None,
) -> Found:
    """:func:`_goodput` of ``bound_res`` (the deployment bound to ``base``, on its decode line: None, the one-line
    fit). With a prefix cache the hit rates are those at the target rate when there is one (the plan must hold there),
    else at the goodput itself (:func:`pdplan.serving.build.goodput_model`)."""
    slo = base.scenario.slo
    d, line = bound_res.hardware.deployment, bound_res.decode_line

    def bound(dep: Disaggregated | Colocated) -> ResolvedScenario[Any]:
        return bound_res if dep is d else dataclasses.replace(bind(base, dep), decode_line=line)

    res = bound_res
    if res.cache is None:
        return _uncached_goodput(base, res, d, redundancy, bound)
    if target_rps is not None:
        res = with_cache_rate(res, target_rps)
        model = build_model(res)
        down = with_cache_rate(bound(degraded(d)), target_rps) if redundancy == "n+1" else None
        capacity = model if down is None else build_model(down)
        return res, model, capacity, find_goodput(capacity, slo)
    if redundancy == "n+1":
        down, capacity, good = line_goodput_model(bound(degraded(d)), slo, start_rps, probes)
        res = with_cache_rate(res, good.rate_rps)
        return res, build_model(res), capacity, good
    res, model, good = line_goodput_model(res, slo, start_rps, probes)
    return res, model, model, good


def _uncached_goodput(
    base: ResolvedScenario[Any],
    res: ResolvedScenario[Any],
    d: Disaggregated | Colocated,
    redundancy: str,
    bound: Callable[[Disaggregated | Colocated], ResolvedScenario[Any]],
) -> Found:
    """:func:`_goodput` of ``res`` (``d`` bound to ``base`` on its decode line by ``bound``, without a cache); its
    outcome is kept by :func:`_goodput` (a function of ``d``, the redundancy and ``base`` alone)."""
    model = build_model(res)
    capacity = build_model(bound(degraded(d))) if redundancy == "n+1" else model
    return res, model, capacity, find_goodput(capacity, base.scenario.slo)


def _itl_mean_s(snap: Snapshot) -> float:
    """Mean time between output tokens over every token after the first: TPOT per bin weighted by its decode
    steps (a request of n tokens has n - 1 gaps; one-token requests have none)."""
    steps = snap.decode_steps if snap.tpot_defined is None else np.where(snap.tpot_defined, snap.decode_steps, 0.0)
    weights = snap.prob * steps
    total = float(np.sum(weights))
    return float((snap.tpot.bin_mean_s @ weights)[0] / total) if total > 0 else 0.0


def _plan(
    res: ResolvedScenario[Any], good: Goodput, point: OperatingPoint, binding: str, warnings: tuple[str, ...]
) -> Plan:
    """The exactly evaluated plan of ``res``'s deployment at ``point`` (the target rate, or just below goodput)."""
    d = res.hardware.deployment
    plan = Plan.of(
        d,
        max_num_seqs=res.max_num_seqs,
        num_gpus=d.num_gpus,
        goodput_rps=good.rate_rps,
        output_tokens_per_s=good.rate_rps * res.lengths.mean_output(),
        cost_usd_per_hour=res.cost_usd_per_hour(),
        operating_rate_rps=point.rate_rps,
        ttft_s=_latency(point.ttft_s),
        tpot_s=_latency(point.tpot_s),
        attainment=point.attainment,
        utilisation=point.utilisation,
        memory_headroom=_headroom(res),
        binding_constraint=binding,
        tpot_mean_s=float(point.tpot_s.mean),
        exact=True,
        warnings=warnings,
    )
    return dataclasses.replace(plan, priced=priced_record(res))


def _goodput_or_zero(model: ServingModel, slo: SloSpec, near_rps: float | None = None) -> float:
    try:
        return find_goodput(model, slo, near_rps).rate_rps
    except NoFeasiblePlanError:
        return 0.0


def _meets(goodput_rps: float, need_rps: float) -> bool:
    """Whether a recomputed goodput still meets the need, to the goodput root's own resolution: its tolerance
    ``GOODPUT_REL_TOL`` of the stable limit plus the step of up to twice that back to the feasible side
    (:func:`pdplan.serving.find_goodput`), so an unchanged deployment does not read 55.5353 < 55.5354 as a miss."""
    return goodput_rps >= need_rps * (1.0 - 3.0 * GOODPUT_REL_TOL)


def sensitivity(pick: Exact, *, target_rps: float | None) -> tuple[Sensitivity, ...]:
    """The pick under rate ±20 %, link bandwidth ×0.5, SLO thresholds ±20 % and ISL / OSL ±20 % (one input at a
    time), with the plan's margins (headroom, redundancy) applied to every recomputed goodput."""
    slo = pick.res.scenario.slo
    need = target_rps if target_rps is not None else pick.plan.operating_rate_rps
    rows = list(rate_rows(pick))
    if isinstance(pick.res.hardware, DisaggregatedHardware):
        link = pick.res.hardware.link
        slower = link.model_copy(update={"line_rate_bytes_per_s": link.line_rate_bytes_per_s * 0.5})
        good = _law_goodput(pick, _rebuilt(pick, link=slower), slo)
        rows.append(Sensitivity("link bandwidth x0.5", good, None, _meets(good, need)))
    capacity = pick.capacity or pick.model
    lines = pick.capacity_lines
    for factor in (0.8, 1.2):
        scaled = slo.model_copy(update={"ttft": slo.ttft * factor, "tpot": slo.tpot * factor})
        if line_count(dataclasses.replace(capacity.res, decode_line=None)) == 0:
            good = pick.goodput_rps(capacity, scaled)  # the model does not depend on the SLO: reuse it
        else:  # another SLO may run on another line of a concave decode law: each line's model, built once
            good = _law_goodput(pick, capacity.res, scaled, lambda r: lines[r.decode_line or 0])
        rows.append(Sensitivity(f"SLO thresholds x{factor:g}", good, None, _meets(good, need)))
    for which in ("input", "output"):
        for factor in (0.8, 1.2):
            good = _law_goodput(pick, _rebuilt(pick, lengths=_scaled_lengths(pick.res, which, factor)), slo)
            name = "ISL" if which == "input" else "OSL"
            rows.append(Sensitivity(f"{name} x{factor:g} (every {which} length)", good, None, _meets(good, need)))
    return tuple(rows)


def _scaled_lengths(res: ResolvedScenario[Any], which: str, factor: float) -> ResolvedScenario[Any]:
    """``res`` with every input (or output) length scaled by ``factor`` (at least one token), bins and
    probabilities kept."""
    lens = res.lengths
    if which == "input":
        inputs = np.maximum(lens.input_tokens * factor, 1.0)
        scaled = dataclasses.replace(lens, input_tokens=inputs)
        return dataclasses.replace(res, lengths=scaled, input_points=np.maximum(res.input_points * factor, 1.0))
    outputs = np.maximum(lens.output_tokens * factor, 1.0)
    return dataclasses.replace(res, lengths=dataclasses.replace(lens, output_tokens=outputs))


def _rebuilt(
    pick: Exact, *, link: LinkSpec | None = None, lengths: ResolvedScenario[Any] | None = None
) -> ResolvedScenario[Any]:
    """The pick's capacity scenario (one instance of each pool down under n+1) with a slower link or scaled lengths."""
    res = lengths if lengths is not None else pick.res
    if pick.capacity is not None:
        res = bind(res, degraded(res.hardware.deployment))  # before the link: bind looks the link up again
    if link is not None:
        res = dataclasses.replace(res, hardware=dataclasses.replace(res.hardware, link=link))
    return res


def _law_goodput(
    pick: Exact,
    res: ResolvedScenario[Any],
    slo: SloSpec,
    build: Callable[[ResolvedScenario[Any]], LocalModel] = build_model,
) -> float:
    """The goodput the plan reports (margins applied) for the model of ``res`` under ``slo``: on each line of a
    concave decode law, the best (:mod:`pdplan.serving.decode_lines`); the one model otherwise. ``build``: the model
    of ``res`` on a line (:func:`build_model`, or models already built: :attr:`Exact.capacity_lines`)."""
    return best_line(dataclasses.replace(res, decode_line=None), lambda r: pick.goodput_rps(build(r), slo), float)
