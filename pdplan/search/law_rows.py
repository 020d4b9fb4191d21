"""A pick's rows at rates other than its goodput, each on the line of its concave decode law that rate runs on.

Where a MoE's decode step is the minimum of lines (:mod:`pdplan.serving.decode_lines`), the mean field runs each rate
on one line, the one with the least mean step there, and that line's model *is* the law's model at that rate (the
derivation is in :mod:`pdplan.serving.decode_lines`). The pick's model was built on the line its goodput was found on;
at a lighter load another line may be the least (the steeper line of a saturating expert read is the lower one at a
small batch), and the pick's line then prices at least the law's step, a pessimistic row. So the report's rows away
from the goodput, the latency-vs-rate curve and the sensitivity's rate ±20 %, and the operating point at a target
rate, read each rate's own line here, as ``pdplan evaluate --rate`` does
(:func:`pdplan.serving.build.model_at_rate`). The hit rates of a prefix cache stay those the pick was built at (the
target rate, or its goodput), as before: only the decode line moves with the rate.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import numpy as np

from pdplan.search.plans import Plan, Sensitivity
from pdplan.serving import LocalModel, ResolvedScenario, build_model
from pdplan.serving.build import mean_step_s
from pdplan.serving.decode_lines import least_step_lines, line_count


class Pick(Protocol):
    """What the rows read of a plan evaluated exactly (:class:`pdplan.search.exact.Exact`): its bound scenario, the
    model built on it, that model on each line of its decode law (:func:`line_models`, built once per plan) and the
    plan (its operating rate)."""

    @property
    def res(self) -> ResolvedScenario[Any]: ...

    @property
    def model(self) -> LocalModel: ...

    @property
    def lines(self) -> tuple[LocalModel, ...]: ...

    @property
    def plan(self) -> Plan: ...


def line_models(res: ResolvedScenario[Any], model: LocalModel) -> tuple[LocalModel, ...]:
    """The model of ``res``'s deployment on each line of its decode law (``model``, built on ``res``, kept for
    ``res``'s own line); ``(model,)`` where the law is one line."""
    count = line_count(dataclasses.replace(res, decode_line=None))
    if count == 0:
        return (model,)
    return tuple(
        model if line == res.decode_line else build_model(dataclasses.replace(res, decode_line=line))
        for line in range(count)
    )


def model_at(res: ResolvedScenario[Any], model: LocalModel, rate_rps: float) -> LocalModel:
    """The model of ``res``'s deployment at ``rate_rps`` (``model``: the one built on ``res``'s line)."""
    models = line_models(res, model)
    return models[int(least_step_lines(models, np.array([rate_rps]), mean_step_s)[0])]


def _limit_rps(models: tuple[LocalModel, ...]) -> float:
    """The law's stable limit: the largest of its lines' (:mod:`pdplan.serving.decode_lines`)."""
    return max(m.limit().rate_rps for m in models)


def rate_curve(pick: Pick, points: int = 24) -> tuple[tuple[float, float, float, float], ...]:
    """(rate, attainment, TTFT P, TPOT P) of the pick from light load to its stable limit, for the plot; each rate on
    its own decode line."""
    models = pick.lines
    slo = pick.res.scenario.slo
    rates = _limit_rps(models) * np.linspace(0.05, 0.98, points)
    lines = least_step_lines(models, rates, mean_step_s)
    att, ttft, tpot = (np.empty(points) for _ in range(3))
    for index, model in enumerate(models):
        on = lines == index
        if not on.any():
            continue
        snap = model.snapshot(rates[on])
        att[on] = snap.attainment(slo.ttft, slo.tpot)
        ttft[on] = snap.ttft_at_percentile_s(slo.percentile)  # only the SLO's percentile: P50/P99 go unread
        tpot[on] = snap.tpot_at_percentile_s(slo.percentile)
    return tuple((float(r), float(a), float(t), float(p)) for r, a, t, p in zip(rates, att, ttft, tpot, strict=True))


def rate_rows(pick: Pick) -> tuple[Sensitivity, ...]:
    """The offered rate ±20 %: the plan does not change, so its goodput (a highest rate) does not either; the
    rows report what does — the attainment at that rate and the requests/s meeting both SLOs there
    (rate × attainment), the quantity a moved load changes — each rate on its own decode line."""
    slo = pick.res.scenario.slo
    models = pick.lines
    limit = _limit_rps(models)
    rate = pick.plan.operating_rate_rps
    rows = []
    for factor in (0.8, 1.2):
        r = rate * factor
        att = 0.0
        if r < limit:
            model = models[int(least_step_lines(models, np.array([r]), mean_step_s)[0])]
            att = float(model.snapshot(np.array([r])).attainment(slo.ttft, slo.tpot)[0])
        note = "goodput here: req/s meeting both SLOs at this rate (rate x attainment)"
        if r >= limit:
            note += f"; beyond the stable limit of {limit:.4g} req/s"
        rows.append(Sensitivity(f"rate x{factor:g} ({r:.4g} req/s)", r * att, att, att >= slo.attainment, note))
    return tuple(rows)
