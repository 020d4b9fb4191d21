"""The closest candidate of a search with no feasible plan, and by how much it misses (exit 3, issue #25).

When no candidate meets the SLO at any rate, the plan that misses it least is the one whose latency at light load
(0.1 % of its stability limit, where queueing adds nothing) is nearest its threshold: the larger of TTFT and TPOT at
the SLO's percentile over their thresholds, as :func:`pdplan.serving.goodput.latency_binding` reads them at rate
zero. One candidate per instance-type pair is evaluated exactly (the smallest of each: light-load latency does not
depend on the instance counts), at most :data:`MAX_TRIED`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pdplan.errors import NoFeasiblePlanError
from pdplan.search.pool import Pool, screen_plan
from pdplan.serving import ResolvedScenario, bind, build_model
from pdplan.serving.build import model_at_rate

MAX_TRIED = 16
"""Instance-type pairs evaluated at light load (a bounded cost on a path that already failed)."""
LIGHT_LOAD = 1e-3
"""Light load as a share of the candidate's stability limit."""


def _one_per_pair(pool: Pool) -> list[int]:
    """The first candidate of each (prefill, decode) instance-type pair, then of each colocated instance type."""
    c = pool.screened
    seen: dict[object, int] = {}
    for i in range(c.size):
        seen.setdefault((int(c.prefill[i]), int(c.decode[i])), i)
    for j, d in enumerate(pool.colocated):
        seen.setdefault((d.instance.gpu, d.instance.tp, d.instance.pp), c.size + j)
    return list(seen.values())[:MAX_TRIED]


def light_load_miss(res: ResolvedScenario[Any], pool: Pool, index: int) -> tuple[float, str] | None:
    """(worst latency / threshold, words) of candidate ``index`` at light load; None when it cannot be built."""
    slo = res.scenario.slo
    try:
        bound = bind(res, pool.deployment(index))
        rate = LIGHT_LOAD * build_model(bound).limit().rate_rps
        snap = model_at_rate(bound, rate).snapshot(np.array([rate]))  # a concave decode law's line there
    except NoFeasiblePlanError:
        return None
    q = slo.percentile / 100.0
    pct = f"P{slo.percentile:g}"
    ttft, tpot = float(snap.ttft.quantile(q)[0]), float(snap.tpot_reported.quantile(q)[0])
    ratios = {"TTFT": (ttft / slo.ttft, ttft, slo.ttft), "TPOT": (tpot / slo.tpot, tpot, slo.tpot)}
    name, (ratio, value, limit) = max(ratios.items(), key=lambda kv: kv[1][0])
    return ratio, (
        f"{name} {pct} {value * 1e3:,.1f} ms against the SLO's {limit * 1e3:,.1f} ms even at light load "
        f"({(ratio - 1.0) * 100.0:.1f} % over)"
    )


def with_closest(err: NoFeasiblePlanError, res: ResolvedScenario[Any], pool: Pool) -> NoFeasiblePlanError:
    """``err`` naming the closest candidate and by how much it misses, where it names none (no candidate meets the
    SLO at any rate); unchanged otherwise."""
    if err.closest is not None or pool.size == 0:
        return err
    misses = [(m, i) for i in _one_per_pair(pool) if (m := light_load_miss(res, pool, i)) is not None]
    if not misses:
        return err
    (_, words), index = min(misses, key=lambda t: t[0][0])
    label = screen_plan(pool, index).label
    return NoFeasiblePlanError(
        f"{err}; closest: {label}, {words}", binding_constraint=err.binding_constraint, closest=label
    )
