"""Reports of ``pdplan optimize``: a :class:`~pdplan.search.results.PlanResult` as a terminal table, CSV,
a Markdown capacity review, JSON, or (optional matplotlib) a PNG/SVG plot.

Pure functions of the result: no I/O except :func:`write_plot`, no timestamps, fixed number formatting; SI
values are converted to human units (ms, GiB, %) only here. Library use::

    from pdplan.report import render_optimize
    text = render_optimize(result, "markdown")
"""

from __future__ import annotations

from rich.console import RenderableType

from pdplan.report.csv import to_csv
from pdplan.report.markdown import to_markdown
from pdplan.report.plot import write_plot
from pdplan.report.render import Format, to_json
from pdplan.report.table import optimize_renderable, to_text
from pdplan.search.results import PlanResult

__all__ = ["optimize_renderable", "render_optimize", "to_csv", "to_json_text", "to_markdown", "to_text", "write_plot"]


def to_json_text(result: PlanResult) -> str:
    """The JSON document (ARCHITECTURE §4 keys; NaN/inf as null)."""
    return to_json(result.to_document())


def render_optimize(result: PlanResult, fmt: Format | str, *, top: int | None = 10) -> str | RenderableType:
    """The result in ``fmt``: text for csv/markdown/json, a rich renderable for table (``top`` plans shown)."""
    match Format(fmt):
        case Format.csv:
            return to_csv(result)
        case Format.markdown:
            return to_markdown(result)
        case Format.json:
            return to_json_text(result)
        case Format.table:
            return optimize_renderable(result, top)
