"""Reports: every command's result as a terminal table, CSV, Markdown or JSON (and, for ``optimize``, a plot).

* :mod:`pdplan.report.render`: the :class:`~pdplan.report.render.View` (records + JSON document) most commands
  produce, :func:`~pdplan.report.render.render_view`, and whole-or-nothing file output;
* :mod:`pdplan.report.catalog` (``hardware``, ``models``, ``validate``), :mod:`pdplan.report.perf` (``roofline``,
  ``calibrate``), :mod:`pdplan.report.serving` (``evaluate``, ``simulate``, ``transfer``): the views' builders;
* ``optimize``: a :class:`~pdplan.search.plans.PlanResult` as a table (:mod:`~pdplan.report.table`), CSV
  (:mod:`~pdplan.report.csv`), a Markdown capacity review (:mod:`~pdplan.report.markdown`), JSON, or (optional
  matplotlib) a PNG/SVG plot (:mod:`~pdplan.report.plot`).

Pure functions of the result: no I/O except :func:`write_plot` and
:func:`~pdplan.report.render.write_atomic`, no timestamps, fixed number formatting; SI values are converted to
human units (ms, GiB, %) only here. Library use::

    from pdplan.report import render_optimize
    text = render_optimize(result, "markdown")

Names are imported on first use (PEP 562): the ``optimize`` reports load :mod:`pdplan.search`, which the other
commands (and ``pdplan --version``) do not need.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from pdplan.report.render import Format, to_json

if TYPE_CHECKING:
    from rich.console import RenderableType

    from pdplan.report.csv import to_csv
    from pdplan.report.markdown import to_markdown
    from pdplan.report.plot import write_plot
    from pdplan.report.table import optimize_renderable, to_text
    from pdplan.search.plans import PlanResult

__all__ = ["optimize_renderable", "render_optimize", "to_csv", "to_json_text", "to_markdown", "to_text", "write_plot"]

_LAZY = {
    "optimize_renderable": "pdplan.report.table",
    "to_text": "pdplan.report.table",
    "to_csv": "pdplan.report.csv",
    "to_markdown": "pdplan.report.markdown",
    "write_plot": "pdplan.report.plot",
}


def __getattr__(name: str) -> Any:
    """Import an ``optimize`` report function on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'pdplan.report' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def to_json_text(result: PlanResult) -> str:
    """The JSON document (docs/architecture.md §4 keys; NaN/inf as null)."""
    return to_json(result.to_document())


def render_optimize(
    result: PlanResult,
    fmt: Format | str,
    *,
    top: int | None = 10,
    chart: str | None = None,
    inline_warnings: bool = True,
) -> str | RenderableType:
    """The result in ``fmt``: text for csv/markdown/json, a rich renderable for table (``top`` plans shown);
    ``chart``: the plot's path relative to the Markdown file, embedded in it; ``inline_warnings=False``: the table
    leaves its warnings out (the CLI prints them on stderr)."""
    from pdplan.report.csv import to_csv
    from pdplan.report.markdown import to_markdown
    from pdplan.report.table import optimize_renderable

    match Format(fmt):
        case Format.csv:
            return to_csv(result)
        case Format.markdown:
            return to_markdown(result, chart=chart)
        case Format.json:
            return to_json_text(result)
        case Format.table:
            return optimize_renderable(result, top, warnings=inline_warnings)
