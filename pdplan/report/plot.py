"""``--plot FILE``: the Pareto front and the recommended plan's latency-vs-rate curve (matplotlib, optional).

Left panel: goodput per GPU against tokens/s per user for every Pareto plan, the recommended plan highlighted and
the colocated baseline marked. Right panel: the pick's TTFT P90 and TPOT P90 (ms, log scale) against the Poisson
rate, with the SLO thresholds, and SLO attainment on a twin axis with its target.

matplotlib is imported lazily (``pip install 'pdplan[plot]'``); the figure is drawn with the Agg canvas (no
pyplot, no global backend switch) and written whole or not at all. Output is deterministic: fixed SVG hash salt,
no dates in the metadata.
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError
from pdplan.report import common as c
from pdplan.report.render import write_atomic
from pdplan.search.plans import PlanResult
from pdplan.specs.command_line import flag

SUFFIXES = (".png", ".svg")
_FIELD = flag("plot")


def _matplotlib() -> tuple[Any, Any]:
    """``(Figure, FigureCanvasAgg)``, or a SpecError naming the extra to install."""
    try:
        import matplotlib  # noqa: F401  (imported first so a missing package fails here)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise SpecError(f"{_FIELD} needs matplotlib: pip install 'pdplan[plot]'", field=_FIELD) from err
    return Figure, FigureCanvasAgg


def _finite(values: list[float]) -> list[float]:
    return [v if math.isfinite(v) else math.nan for v in values]


def _pareto_panel(ax: Any, result: PlanResult) -> None:
    front = c.pareto_sorted(result)
    ax.plot(
        [p.tokens_per_s_per_user for p in front],
        [p.goodput_rps_per_gpu for p in front],
        "o-",
        color="tab:blue",
        label="Pareto front",
    )
    pick = result.best
    ax.plot(
        [pick.tokens_per_s_per_user],
        [pick.goodput_rps_per_gpu],
        "*",
        color="tab:red",
        markersize=16,
        label=f"recommended: {pick.label}",
    )
    if result.baseline is not None:
        base = result.baseline
        ax.plot(
            [base.tokens_per_s_per_user],
            [base.goodput_rps_per_gpu],
            "X",
            color="tab:gray",
            markersize=10,
            label=f"colocated baseline: {base.label}",
        )
    ax.set_xlabel("output tokens/s per user")
    ax.set_ylabel("goodput per GPU (req/s)")
    ax.set_title("Pareto front")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")


def _curve_panel(ax: Any, result: PlanResult) -> None:
    ax.set_title(f"Recommended plan vs rate: {result.best.label}", fontsize="medium")
    ax.set_xlabel("Poisson rate (req/s)")
    if not result.rate_curve:
        ax.text(0.5, 0.5, "no rate curve in the result", ha="center", va="center", transform=ax.transAxes)
        return
    rates = [r for r, _, _, _ in result.rate_curve]
    slo = result.inputs.slo
    for index, name, color, threshold_s in ((2, "TTFT", "tab:blue", slo.ttft), (3, "TPOT", "tab:orange", slo.tpot)):
        values = _finite([row[index] * 1e3 for row in result.rate_curve])
        ax.plot(rates, values, "-", color=color, label=f"{name} P90")
        ax.axhline(threshold_s * 1e3, color=color, linestyle="--", linewidth=1, label=f"{name} SLO")
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    ax.axvline(result.best.operating_rate_rps, color="tab:gray", linestyle=":", linewidth=1, label="operating rate")
    twin = ax.twinx()
    twin.plot(rates, _finite([a for _, a, _, _ in result.rate_curve]), "-", color="tab:green", label="attainment")
    twin.axhline(slo.attainment, color="tab:green", linestyle="--", linewidth=1, label="attainment target")
    twin.set_ylim(0.0, 1.05)
    twin.set_ylabel("SLO attainment")
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = twin.get_legend_handles_labels()
    ax.legend(
        lines + more, labels + more_labels, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4
    )
    ax.grid(True, alpha=0.3)


def render_plot(result: PlanResult, fmt: str) -> bytes:
    """The figure as PNG or SVG bytes (``fmt`` is ``"png"`` or ``"svg"``)."""
    figure_cls, canvas_cls = _matplotlib()
    from matplotlib import rc_context

    with rc_context({"svg.hashsalt": "pdplan", "svg.fonttype": "path"}):
        fig = figure_cls(figsize=(13.0, 5.0), layout="constrained")
        canvas_cls(fig)
        left, right = fig.subplots(1, 2)
        _pareto_panel(left, result)
        _curve_panel(right, result)
        fig.suptitle(textwrap.fill(result.question, width=130), fontsize="medium")
        metadata: dict[str, Any] = {"Date": None, "Creator": "pdplan"} if fmt == "svg" else {"Software": "pdplan"}
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, metadata=metadata, dpi=100)
    return buffer.getvalue()


def write_plot(result: PlanResult, path: Path | str) -> None:
    """Write the two-panel figure to ``path`` (``.png`` or ``.svg``), whole or not at all."""
    target = Path(path)
    check_plot_path(target)
    write_atomic(target, render_plot(result, target.suffix.lower()[1:]))


def check_plot_path(path: Path | str) -> None:
    """``path`` can take a plot: a ``.png``/``.svg`` suffix and an existing folder (checked before a long search)."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        raise SpecError(f"unsupported plot file type {suffix or '(none)'!r}; use {' or '.join(SUFFIXES)}", field=_FIELD)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise SpecError("output folder does not exist", source=str(target), field=_FIELD)
