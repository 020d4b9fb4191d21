"""The capacity review's planning extras around a search: the margins it was run with, GPUs a cost search skips for
want of a price, the colocated baseline at a comparable size, the pick's sensitivity to GPU prices and why each GPU
type / TP size the search tried is absent from the reported plans ("why not")."""

from __future__ import annotations

from typing import Any

import numpy as np

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.io.planning_defaults import planning_defaults
from pdplan.search.inputs_record import PlanningMargins
from pdplan.search.plans import Plan, PriceSensitivity
from pdplan.search.pool import Pool
from pdplan.search.select import Metrics, needs_price, rank
from pdplan.search.space import Space
from pdplan.serving import RoleHardware
from pdplan.specs.command_line import flag

HEADROOM_MEANING = (
    "the SLO must hold at (1 + headroom) x the operating rate: a plan's goodput is its SLO-meeting rate / "
    "(1 + headroom)"
)
REDUNDANCY_MEANING = {
    "none": "every instance up",
    "n+1": "the SLO must hold with one instance of each pool down (goodput of the plan less one instance per pool)",
}


def planning_inputs(space: Space) -> PlanningMargins:
    """The margins of the search as every report prints them (``inputs.planning``)."""
    return PlanningMargins(
        headroom=space.headroom,
        headroom_meaning=HEADROOM_MEANING,
        redundancy=space.redundancy,
        redundancy_meaning=REDUNDANCY_MEANING[space.redundancy],
        budget_usd_per_hour=space.budget_usd_per_hour,
        sources=dict(planning_defaults().sources),
    )


def plan_metrics(plans: list[Plan]) -> Metrics:
    """The objective's numbers of evaluated plans (NaN cost where unpriced)."""
    return Metrics(
        *(
            np.array([getattr(p, f) or np.nan for p in plans], dtype=np.float64)
            for f in ("goodput_rps", "num_gpus", "cost_usd_per_hour", "output_tokens_per_s")
        )
    )


def _options(space: Space) -> list[tuple[str, RoleHardware]]:
    return [
        *(("prefill", h) for h in space.prefill),
        *(("decode", h) for h in space.decode),
        *(("colocated", h) for h in space.colocated),
    ]


def unpriced(space: Space) -> list[str]:
    """GPU types of the search that have no price (after ``--price`` overrides), sorted."""
    return sorted({h.gpu.name for _, h in _options(space) if h.gpu.price is None})


def _price_reason(space: Space) -> str:
    what = "a dollar budget" if space.objective not in ("cost", "tokens-per-dollar") else f"objective {space.objective}"
    return f"no price in the catalogue, and {what} ranks by price"


def unpriced_warnings(space: Space) -> tuple[str, ...]:
    """One warning per GPU a cost search skipped (no silent vanishing): why, and how to price it."""
    if not needs_price(space.objective, space.budget_usd_per_hour):
        return ()
    return tuple(
        f"{name} skipped: {_price_reason(space)}; give {flag('prices')} {name}=USD_PER_GPU_HOUR to include it"
        for name in unpriced(space)
    )


def unpriced_infeasible(pool: Pool, space: Space) -> SpecError | None:
    """The error when every candidate meeting the SLO was skipped for want of a price (else None): bad input (exit 2),
    the missing price, not an infeasible question — the same search with ``--price`` has plans."""
    m = pool.metrics
    if not needs_price(space.objective, space.budget_usd_per_hour) or not (m.goodput_rps > 0).any():
        return None
    if np.isfinite(m.cost_usd_per_hour[m.goodput_rps > 0]).any():
        return None
    names = ", ".join(unpriced(space))
    return SpecError(
        f"every candidate meeting the SLO uses a GPU without a price ({names}); give {flag('prices')} "
        "GPU=USD_PER_GPU_HOUR",
        field=flag("prices"),
    )


def comparable_baseline(pool: Pool, order: np.ndarray, pick: Plan, space: Space, count: int | None) -> np.ndarray:
    """The colocated candidates of ``order`` at a size comparable to the pick: ``count`` instances when asked
    (``--colocated N``), else the best instance type at the most instances within the pick's GPU count (at
    least one); with a target rate, the ranking's own (fewest GPUs meeting it). Falls back to ``order``."""
    start = pool.screened.size
    colocated = [int(i) for i in order if i >= start]
    if space.rate_rps is not None or not colocated:
        return order
    if count is not None:
        sized = [i for i in colocated if pool.colocated[i - start].instance.count == count]
        return np.array(sized or colocated, dtype=np.intp)
    first = pool.colocated[colocated[0] - start].instance
    same = [
        i
        for i in colocated
        if ((role := pool.colocated[i - start].instance).gpu, role.tp, role.pp) == (first.gpu, first.tp, first.pp)
        and pool.metrics.num_gpus[i] <= pick.num_gpus
    ]
    if not same:
        return order
    return np.array([max(same, key=lambda i: pool.metrics.num_gpus[i])], dtype=np.intp)


def _cost(plan: Plan, prices: dict[str, float | None]) -> float:
    total = 0.0
    for role in (plan.prefill, plan.decode, plan.colocated):
        if role is not None:
            price = prices.get(role.gpu)
            if price is None:
                return float("nan")
            total += price * role.gpus
    return total


def price_sensitivity(plans: list[Plan], space: Space, catalog: Catalog) -> tuple[PriceSensitivity, ...]:
    """Each priced GPU's price moved by ±``price_sensitivity`` (planning defaults, 20 %): the pick's $/h and which
    of the exactly evaluated plans the objective then ranks first (the plans are re-ranked, not re-searched)."""
    step = planning_defaults().price_sensitivity
    names = sorted({r.gpu for p in plans for r in (p.prefill, p.decode, p.colocated) if r is not None})
    base: dict[str, float | None] = {}
    for name in names:
        price = catalog.gpu(name).price
        base[name] = None if price is None else price.typical_usd_per_gpu_hour
    rows: list[PriceSensitivity] = []
    for name in names:
        typical = base[name]
        if typical is None:
            continue
        for factor in (1.0 - step, 1.0 + step):
            moved = {**base, name: typical * factor}
            costs = np.array([_cost(p, moved) for p in plans])
            m = plan_metrics(plans)
            m = Metrics(m.goodput_rps, m.num_gpus, costs, m.output_tokens_per_s)
            order = rank(
                m,
                objective=space.objective,
                budget_gpus=space.budget_gpus,
                rate_rps=space.rate_rps,
                budget_usd_per_hour=space.budget_usd_per_hour,
            )
            winner = plans[int(order[0])].label if order.size else None
            rows.append(
                PriceSensitivity(name, factor, typical * factor, float(costs[0]), winner, winner != plans[0].label)
            )
    return tuple(rows)


def _role_indices(pool: Pool, role: str, hw: RoleHardware) -> np.ndarray:
    """Pool indices of the candidates that use instance type ``hw`` in ``role``."""
    c = pool.screened
    if role == "colocated":
        hits = [
            pool.screened.size + j
            for j, d in enumerate(pool.colocated)
            if (d.instance.gpu, d.instance.tp, d.instance.pp) == (hw.gpu.name, hw.tp, hw.pp)
        ]
        return np.array(hits, dtype=np.intp)
    if role == "prefill":
        options = np.array([b.hw.label == hw.label for b in pool.bases])
        return np.flatnonzero(options[c.prefill]) if c.size else np.zeros(0, dtype=np.intp)
    options = np.array([t.hw.label == hw.label for t in pool.tables])
    return np.flatnonzero(options[c.decode]) if c.size else np.zeros(0, dtype=np.intp)


def _used(plans: tuple[Plan, ...], role: str, hw: RoleHardware) -> bool:
    """Whether a reported plan runs instance type ``hw`` in ``role`` (GPU, TP, PP, attention DP, EP, expert gather:
    MoE instance types of one GPU and TP differ in these)."""
    shape = (hw.gpu.name, hw.tp, hw.pp, hw.dp, hw.ep, hw.expert_gather and hw.ep > 1)
    for p in plans:
        r = getattr(p, role)
        if r is not None and (r.gpu, r.tp, r.pp, r.dp, r.ep, r.expert_gather and r.ep > 1) == shape:
            return True
    return False


def _outranked(space: Space, m: Metrics, best_of: np.ndarray, pick: Plan) -> str:
    """Why a feasible instance type is in no reported plan, in the objective's own terms: at a target rate under
    ``cost`` / ``tokens-per-dollar``, its cheapest candidate's $/h beside the pick's; within a budget, its best
    goodput (``cost``) or output tokens/s (``tokens-per-dollar``) per $/h; else its best goodput per GPU."""
    cost = m.cost_usd_per_hour[best_of]
    priced = np.isfinite(cost) & (cost > 0)
    head = "feasible but outranked: "
    if space.objective in ("cost", "tokens-per-dollar") and priced.any() and pick.cost_usd_per_hour:
        if space.rate_rps is not None:
            cheapest = float(np.min(cost[priced]))
            return f"{head}cheapest ${cheapest:,.2f}/h (screened) against the pick's ${pick.cost_usd_per_hour:,.2f}/h"
        if space.objective == "cost":
            best = float(np.max(m.goodput_rps[best_of][priced] / cost[priced]))
            theirs = pick.goodput_rps_per_usd_hour or 0.0
            return f"{head}best {best:.4f} req/s per $/h (screened) against the pick's {theirs:.4f}"
        best = float(np.max(m.output_tokens_per_s[best_of][priced] / cost[priced]))
        theirs = pick.output_tokens_per_s_per_usd_hour or 0.0
        return f"{head}best {best:.1f} output tok/s per $/h (screened) against the pick's {theirs:.1f}"
    per_gpu = float(np.max(m.goodput_rps[best_of] / m.num_gpus[best_of]))
    return f"{head}best {per_gpu:.3f} req/s per GPU (screened) against the pick's {pick.goodput_rps_per_gpu:.3f}"


def why_not(
    pool: Pool, space: Space, order: np.ndarray, pick: Plan, plans: tuple[Plan, ...] = ()
) -> tuple[dict[str, Any], ...]:
    """Each GPU type / TP size the search tried (or dropped) that no reported plan uses, with the binding reason:
    dropped before the screen (TP/node/heads, weights), skipped for want of a price, no candidate meeting the SLO
    (the most common binding constraint), none within the budget or reaching the target, or outranked (its best
    candidate's goodput per GPU beside the pick's)."""
    rows = [dict(r) for r in space.rejected]
    feasible = np.zeros(pool.size, dtype=bool)
    feasible[order] = True
    shown = plans or (pick,)
    priced = needs_price(space.objective, space.budget_usd_per_hour)
    for role, hw in _options(space):
        if _used(shown, role, hw):
            continue
        idx = _role_indices(pool, role, hw)
        row: dict[str, Any] = {"role": role, "gpu": hw.gpu.name, "tp": hw.tp, "pp": hw.pp, "dp": hw.dp, "ep": hw.ep}
        row["expert_gather"] = hw.expert_gather and hw.ep > 1  # ZeRO-Prefill: the same shape, its own instance type
        row["stage"] = "screen"
        m = pool.metrics
        if idx.size == 0:
            row["reason"] = "no decode table: the longest request's KV cache does not fit"
        elif priced and hw.gpu.price is None:
            row["reason"] = _price_reason(space)
        elif feasible[idx].any():
            row["reason"] = _outranked(space, m, idx[feasible[idx]], pick)
        elif (m.goodput_rps[idx] > 0).any():
            row["reason"] = "meets the SLO only outside the GPU / dollar budget or below the target rate"
        else:
            words = pool.most_binding(role, hw.label, idx)
            row["reason"] = f"no candidate meets the SLO at any rate; most are bound by {words}"
        rows.append(row)
    return tuple(rows)
