"""Terminal view of an optimisation: rich renderables in human units (ms, req/s), fixed formatting.

Header (question, objective), the top plans with the colocated baseline as a last section, the
disaggregated / colocated ratio, the Pareto front and the warnings.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pdplan.report import common as c
from pdplan.report.render import table_to_text
from pdplan.search.results import PlanResult

_NUMERIC = {
    "GPUs",
    "goodput req/s",
    "req/s per GPU",
    "req/s per $/h",
    "output tok/s",
    "TTFT P90 ms",
    "TPOT P90 ms",
    "tok/s per user",
    "$/h",
    "tok/s per GPU",
    "E2E mean s",
    "ITL mean ms",
}


def _table(title: str, header: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for name in header:
        table.add_column(name, justify="right" if name in _NUMERIC else "left", overflow="fold")
    return table


def plans_table(result: PlanResult, top: int | None = None) -> Table:
    """Ranked plans (``top`` first ones), then the baseline in its own section."""
    table = _table("Plans", c.PLAN_COLUMNS)
    for rank, plan in enumerate(result.plans[:top], start=1):
        table.add_row(*c.plan_cells(str(rank), plan))
    if result.baseline is not None:
        table.add_section()
        table.add_row(*c.plan_cells("baseline", result.baseline), style="dim")
    return table


def pareto_table(result: PlanResult) -> Table:
    """The Pareto front: goodput per GPU against tokens/s per user."""
    table = _table("Pareto front (goodput per GPU vs tokens/s per user)", c.PARETO_COLUMNS)
    for plan in c.pareto_sorted(result):
        table.add_row(*c.pareto_cells(result, plan))
    return table


def why_not_table(result: PlanResult) -> Table:
    """GPU types / TP sizes the search tried that no reported plan uses, with the binding reason."""
    table = _table("Why not (GPU types / TP sizes in no reported plan)", c.WHY_NOT_COLUMNS)
    for row in result.rejected:
        table.add_row(*c.why_not_cells(row))
    return table


def _header(result: PlanResult) -> Text:
    text = Text()
    text.append(result.question, style="bold")
    text.append(
        f"\nobjective: {result.objective}; {result.search.candidates:,} candidates, "
        f"{result.search.feasible:,} feasible, {result.search.refined:,} re-evaluated"
    )
    text.append("\n" + c.planning_line(result))
    return text


def optimize_renderable(result: PlanResult, top: int | None = 10) -> RenderableType:
    """Everything for stdout as one rich renderable."""
    parts: list[RenderableType] = [_header(result), plans_table(result, top)]
    if any(not p.exact for _, p in c.ranked_with_baseline(result)):
        parts.append(Text("* screened estimate (vectorised screen only)", style="dim"))
    parts.append(Text(c.ratio_line(result), style="bold"))
    if result.pareto:
        parts.append(pareto_table(result))
    if result.rejected:
        parts.append(why_not_table(result))
    warnings = c.all_warnings(result)
    if warnings:
        parts.append(Text("\n".join(f"warning: {w}" for w in warnings), style="yellow"))
    return Group(*parts)


to_text = table_to_text
"""Plain text of a renderable (no colour); the same function as :func:`pdplan.report.render.table_to_text`."""
