"""The growth table of ``optimize --growth 20,50,100``: the deployment needed as traffic grows, each re-planned.

A capacity review asks what +20 / +50 / +100 % traffic costs. Each row is the same search (scenario, space,
objective, planning margins, prices) run again as a rate target: the base rate (``--rate``, else the recommended
plan's goodput) × (1 + growth). Nothing is extrapolated: a row is a fresh search, or the reason it found no plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.search.plans import GrowthRow, PlanResult


def parse_growth(text: str | None, flag: str = "--growth") -> tuple[float, ...]:
    """``"20,50,100"`` (percent) → ``(0.2, 0.5, 1.0)``; each must be a finite number > 0 (SpecError naming the
    flag); ``None`` → ``()``."""
    if text is None:
        return ()
    out: list[float] = []
    for word in text.split(","):
        try:
            value = float(word.strip().removesuffix("%"))
        except ValueError:
            value = float("nan")
        if not 0 < value < float("inf"):
            raise SpecError(
                f"expected comma-separated percentages > 0 (e.g. 20,50,100), got {word.strip()!r}", field=flag
            )
        out.append(value / 100.0)
    return tuple(out)


def base_rate_rps(result: PlanResult) -> float:
    """The traffic the growth is measured from: the target rate of a ``--rate`` search, else the recommended plan's
    goodput (a budget search: what the pick serves today)."""
    return result.rate_target_rps if result.rate_target_rps is not None else result.best.goodput_rps


def growth_rows(
    result: PlanResult, growths: Sequence[float], replan: Callable[[float], PlanResult]
) -> tuple[GrowthRow, ...]:
    """One row per growth: ``replan(rate)`` (the same search at that target rate) and its recommended plan, or the
    exit-3 reason as the row's ``infeasible``."""
    base = base_rate_rps(result)
    rows: list[GrowthRow] = []
    for growth in growths:
        rate = base * (1.0 + growth)
        try:
            rows.append(GrowthRow(growth, rate, replan(rate).best))
        except NoFeasiblePlanError as err:
            rows.append(GrowthRow(growth, rate, None, str(err)))
    return tuple(rows)
