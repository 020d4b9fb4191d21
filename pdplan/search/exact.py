"""Exact re-evaluation of the screen's best candidates with the full serving model, and the pick's sensitivity.

A candidate is a :class:`~pdplan.serving.deployment.Deployment`, bound to the search's resolved scenario (resolved
once per search) and modelled exactly as ``pdplan evaluate`` does (:func:`pdplan.serving.evaluate.build`), then
turned into a :class:`~pdplan.search.results.Plan` with latencies at the operating rate (the target rate, or the
goodput).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pdplan.errors import NoFeasiblePlanError
from pdplan.search.results import Latency, Plan, Sensitivity
from pdplan.serving import (
    GOODPUT_REL_TOL,
    Deployment,
    Goodput,
    LatencySummary,
    OperatingPoint,
    ResolvedScenario,
    ServingModel,
    bind,
    build_model,
    check_operating_point,
    find_goodput,
    instance_budget,
    operating_point,
)
from pdplan.serving.vendors import cross_vendor_warning
from pdplan.specs.scenario import SloSpec


def _latency(s: LatencySummary) -> Latency:
    return Latency(s.mean, s.p50, s.p90, s.p99)


def _headroom(res: ResolvedScenario) -> dict[str, float]:
    """Free HBM per GPU after weights and workspace, in bytes, per role (KV occupancy is in the utilisations)."""
    out: dict[str, float] = {}
    for role, hw in (("prefill", res.prefill), ("decode", res.decode), ("colocated", res.colocated)):
        if hw is not None:
            out[f"{role}_kv_free_bytes_per_gpu"] = float(np.ravel(instance_budget(hw, role).kv_free_bytes)[0])
    return out


@dataclass(frozen=True)
class Exact:
    """A plan evaluated exactly, with the objects the sensitivity analysis reuses."""

    plan: Plan
    res: ResolvedScenario
    model: ServingModel


def evaluate_exact(
    base: ResolvedScenario,
    d: Deployment,
    *,
    target_rps: float | None,
    failures: list[NoFeasiblePlanError] | None = None,
    shared_warnings: tuple[str, ...] = (),
) -> Exact | None:
    """Exact goodput and operating point of one deployment; None when it cannot meet the SLO (or the target),
    with the reason appended to ``failures``. ``shared_warnings`` (those of the base scenario, e.g. context-window
    clipping, the same for every candidate) are reported once for the whole result, not per plan."""
    slo = base.scenario.slo
    try:
        res = bind(base, d)
        model = build_model(res)
        good = find_goodput(model, slo)
        if target_rps is not None and good.rate_rps < target_rps:
            raise NoFeasiblePlanError(
                f"reaches {good.rate_rps:.4g} of {target_rps:g} req/s", binding_constraint=good.binding
            )
    except NoFeasiblePlanError as err:
        if failures is not None:
            failures.append(err)
        return None
    rate = target_rps if target_rps is not None else good.rate_rps * (1.0 - 1e-6)
    snap = model.snapshot(np.array([rate]))
    check_operating_point(res, model, rate, snapshot=snap)  # a plan that breaks physics is a bug, never output
    point = operating_point(snap, slo)
    binding = good.binding if target_rps is None else point.binding_constraint
    own = tuple(w for w in res.warnings if w not in shared_warnings)
    vendors = cross_vendor_warning(res)
    plan = _plan(res, good, point, binding, own if vendors is None else (*own, vendors))
    return Exact(plan, res, model)


def _plan(res: ResolvedScenario, good: Goodput, point: OperatingPoint, binding: str, warnings: tuple[str, ...]) -> Plan:
    """The exactly evaluated plan of ``res``'s deployment at ``point`` (the target rate, or just below goodput)."""
    d = res.deployment
    tau = float(point.tpot_s.mean)
    return Plan(
        mode=d.mode,
        prefill=d.prefill,
        decode=d.decode,
        colocated=d.colocated,
        granularity=d.granularity,
        link=d.link,
        routing=d.routing,
        scheduler=d.scheduler,
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
        tokens_per_s_per_user=1.0 / tau if tau > 0 else 0.0,
        exact=True,
        warnings=warnings,
    )


def _goodput_or_zero(model: ServingModel, slo: SloSpec) -> float:
    try:
        return find_goodput(model, slo).rate_rps
    except NoFeasiblePlanError:
        return 0.0


def _meets(goodput_rps: float, need_rps: float) -> bool:
    """Whether a recomputed goodput still meets the need, to the goodput root's own resolution: its tolerance
    ``GOODPUT_REL_TOL`` of the stable limit plus the step of up to twice that back to the feasible side
    (:func:`pdplan.serving.find_goodput`), so an unchanged deployment does not read 55.5353 < 55.5354 as a miss."""
    return goodput_rps >= need_rps * (1.0 - 3.0 * GOODPUT_REL_TOL)


def sensitivity(pick: Exact, *, target_rps: float | None) -> tuple[Sensitivity, ...]:
    """The pick under rate ±20 %, link bandwidth ×0.5 and SLO thresholds ±20 % (one input at a time)."""
    slo = pick.res.scenario.slo
    model = pick.model
    limit = model.limit().rate_rps
    rate = pick.plan.operating_rate_rps
    need = target_rps if target_rps is not None else rate
    rows: list[Sensitivity] = []
    for factor in (0.8, 1.2):
        r = rate * factor
        att = float(model.snapshot(np.array([r])).attainment(slo.ttft, slo.tpot)[0]) if r < limit else 0.0
        note = "" if r < limit else f"beyond the stable limit of {limit:.4g} req/s"
        rows.append(
            Sensitivity(f"rate x{factor:g} ({r:.4g} req/s)", pick.plan.goodput_rps, att, att >= slo.attainment, note)
        )
    if pick.res.link is not None:
        link = pick.res.link
        slower = link.model_copy(update={"line_rate_bytes_per_s": link.line_rate_bytes_per_s * 0.5})
        good = _goodput_or_zero(build_model(dataclasses.replace(pick.res, link=slower)), slo)
        rows.append(Sensitivity("link bandwidth x0.5", good, None, _meets(good, need)))
    for factor in (0.8, 1.2):
        scaled = slo.model_copy(update={"ttft": slo.ttft * factor, "tpot": slo.tpot * factor})
        good = _goodput_or_zero(model, scaled)  # the model does not depend on the SLO: reuse it
        rows.append(Sensitivity(f"SLO thresholds x{factor:g}", good, None, _meets(good, need)))
    return tuple(rows)


def rate_curve(pick: Exact, points: int = 24) -> tuple[tuple[float, float, float, float], ...]:
    """(rate, attainment, TTFT P, TPOT P) of the pick from light load to its stable limit, for the plot."""
    model = pick.model
    slo = pick.res.scenario.slo
    rates = model.limit().rate_rps * np.linspace(0.05, 0.98, points)
    snap = model.snapshot(rates)
    att = snap.attainment(slo.ttft, slo.tpot)
    ttft = [s.at_percentile for s in snap.ttft_summary(slo.percentile)]
    tpot = [s.at_percentile for s in snap.tpot_summary(slo.percentile)]
    return tuple((float(r), float(a), float(t), float(p)) for r, a, t, p in zip(rates, att, ttft, tpot, strict=True))
