"""Terminal view of an optimisation: rich renderables in human units (ms, req/s), fixed formatting.

Header (question, objective), the top plans with the colocated baseline as a last section (two tables keyed by rank,
so that each fits a 100-column terminal), the disaggregated / colocated ratio, the Pareto front and the warnings.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pdplan.report import common as c
from pdplan.report.cache import cache_columns, cache_rows
from pdplan.report.kv_words import KV_LIMIT_NOTE, binds_on_kv
from pdplan.report.prfaas import other_plans, prfaas_facts, prfaas_pick
from pdplan.report.render import table_to_text
from pdplan.search.plans import PlanResult

_NUMERIC = {
    "GPUs",
    "goodput req/s",
    "req/s per GPU",
    "req/s per $/h",
    "output tok/s",
    *(f"{which} P{pct} ms" for which in ("TTFT", "TPOT") for pct in (50, 90, 99)),
    "tok/s per user",
    "$/h",
    "$/month",
    "$/year",
    "tok/s per GPU",
    "E2E mean s",
    "ITL mean ms",
    "target req/s",
    "+GPUs",
    "traffic",
}


_MIN_WIDTH = {"plan": 14, "binding constraint": 14}
"""Text columns that wrap at spaces, never mid-word for the catalogue's names and the binding words
(``a100-pcie-80gb``, ``(max_num_seqs)``: 14 characters); a longer word folds."""


def _stacked(name: str) -> str:
    """A header with one word per line (``req/s\nper\nGPU``): a column is then as wide as its longest word or value."""
    return name.replace(" ", "\n")


def _table(title: str, header: tuple[str, ...]) -> Table:
    """Numbers never wrap and headers stack their words, so that the plans fit a 100-column terminal with the text
    columns wrapped at spaces."""
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for name in header:
        numeric = name in _NUMERIC
        table.add_column(
            _stacked(name),
            justify="right" if numeric else "left",
            overflow="fold",
            no_wrap=numeric,
            min_width=_MIN_WIDTH.get(name),
        )
    return table


def plans_table(result: PlanResult, top: int | None = None) -> Table:
    """Ranked plans (``top`` first ones), then the baseline in its own section: the summary columns."""
    pct = c.shown_percentile(result)
    table = _table("Plans", c.at_columns(c.PLAN_SUMMARY_COLUMNS, pct))
    for rank, plan in enumerate(result.plans[:top], start=1):
        table.add_row(*c.plan_cells_of(c.PLAN_SUMMARY_COLUMNS, str(rank), plan, pct))
    if result.baseline is not None:
        table.add_section()
        cells = c.plan_cells_of(c.PLAN_SUMMARY_COLUMNS, "", result.baseline, pct)  # the rank column stays 4 wide
        cells[1] = f"baseline: {cells[1]}"
        table.add_row(*cells, style="dim")
    return table


def plan_metrics_table(result: PlanResult, top: int | None = None) -> Table:
    """The same plans by rank (``baseline`` last): cost efficiency, tokens/s per GPU and per user, E2E and ITL."""
    table = _table("Plans: throughput and latency (by rank)", c.PLAN_METRIC_COLUMNS)
    for rank, plan in enumerate(result.plans[:top], start=1):
        table.add_row(*c.plan_cells_of(c.PLAN_METRIC_COLUMNS, str(rank), plan))
    if result.baseline is not None:
        table.add_section()
        table.add_row(*c.plan_cells_of(c.PLAN_METRIC_COLUMNS, "baseline", result.baseline), style="dim")
    return table


def growth_table(result: PlanResult) -> Table:
    """``--growth``: the deployment the same search picks at each grown rate."""
    table = _table("Growth: " + c.growth_base_line(result), c.GROWTH_COLUMNS)
    for row in result.growth:
        table.add_row(*c.growth_cells(result, row))
    return table


def pareto_table(result: PlanResult) -> Table:
    """The Pareto front: goodput per GPU against tokens/s per user."""
    columns = c.at_columns(c.PARETO_COLUMNS, c.shown_percentile(result))
    table = _table("Pareto front (goodput per GPU vs tokens/s per user)", columns)
    for plan in c.pareto_sorted(result):
        table.add_row(*c.pareto_cells(result, plan))
    return table


def why_not_table(result: PlanResult) -> Table:
    """GPU types / TP sizes the search tried that no reported plan uses, with the binding reason."""
    table = _table("Why not (GPU types / TP sizes in no reported plan)", c.WHY_NOT_COLUMNS)
    for row in result.rejected:
        table.add_row(*c.why_not_cells(row))
    return table


def cache_table(result: PlanResult) -> Table | None:
    """The plans' prefix cache by rank (None when no plan has one: a workload without reuse)."""
    rows = cache_rows(result)
    if not rows:
        return None
    table = _table("Prefix cache (by rank)", cache_columns(result))
    for row in rows:
        table.add_row(*row)
    return table


def prfaas_table(result: PlanResult) -> Table | None:
    """The recommended PrfaaS plan's threshold, paths, link and gains (None when the pick is not PrfaaS)."""
    pick = prfaas_pick(result)
    if pick is None or pick.prfaas is None:
        return None
    table = Table(
        title="Prefill-as-a-Service (recommended plan)", title_justify="left", show_edge=False, pad_edge=False
    )
    table.add_column("quantity", overflow="fold")
    table.add_column("value", overflow="fold")
    for name, value in [*prfaas_facts(pick.prfaas.to_document()), *other_plans(result)]:
        table.add_row(name, value)
    return table


def _header(result: PlanResult) -> Text:
    text = Text()
    text.append(result.question, style="bold")
    text.append(
        f"\nobjective: {result.objective}; {result.search.candidates:,} candidates, "
        f"{result.search.feasible:,} feasible, {result.search.refined:,} re-evaluated"
    )
    text.append("\n" + c.planning_line(result))
    text.append("\n" + c.rates_line(result))
    return text


def optimize_renderable(result: PlanResult, top: int | None = 10, *, warnings: bool = True) -> RenderableType:
    """Everything for stdout as one rich renderable; ``warnings=False`` leaves the warnings out (the CLI prints them
    on stderr)."""
    parts: list[RenderableType] = [_header(result), plans_table(result, top), plan_metrics_table(result, top)]
    shown = [p for _, p in c.ranked_with_baseline(result)]
    if any(not p.exact for p in shown):
        parts.append(Text("* screened estimate (vectorised screen only)", style="dim"))
    if binds_on_kv(p.binding_constraint for p in shown):
        parts.append(Text(KV_LIMIT_NOTE, style="dim"))
    if result.growth:
        parts.append(growth_table(result))
    cache = cache_table(result)
    if cache is not None:
        parts.append(cache)
    prfaas = prfaas_table(result)
    parts += [prfaas] if prfaas is not None else [Text(c.ratio_line(result), style="bold")]
    if result.best.expected_error is not None:  # the recommended plan's (every plan's: JSON, CSV)
        parts.append(Text("\n".join(result.best.expected_error.lines())))
    if result.pareto:
        parts.append(pareto_table(result))
    if result.rejected:
        parts.append(why_not_table(result))
    lines = c.all_warnings(result) if warnings else []
    if lines:
        parts.append(Text("\n".join(f"warning: {w}" for w in lines), style="yellow"))
    return Group(*parts)


to_text = table_to_text
"""Plain text of a renderable (no colour); the same function as :func:`pdplan.report.render.table_to_text`."""
