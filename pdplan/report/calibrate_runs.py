"""``pdplan calibrate`` on benchmark runs: per-run predictions and errors, the error summary and the fitted terms.

JSON keys (docs/architecture.md §4, "calibrate from benchmarks"): ``mape`` (median absolute % error over the TTFT and
TPOT
errors together), ``n`` (runs), ``rows`` (each run's fields plus ``predicted_ttft_ms``, ``predicted_tpot_ms``,
``ttft_error_pct``, ``tpot_error_pct``: signed, predicted/measured − 1), ``ttft`` / ``tpot`` (median and P90
absolute % error), ``engine`` (``name``, ``version``, ``fitted``) and after a fit ``terms`` (each term's
``value_s``, ``std_s`` and ``status``; seconds, except ``startup_cohorts``: a count of cohorts) with ``uncertainty``
saying what ``std_s`` is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.report.render import View

if TYPE_CHECKING:
    from pdplan.calibrate.benchmarks import RunsReport

UNCERTAINTY_WORDS = (
    "std_s: 1-sigma standard error from the Jacobian of the log residuals at the fit (s^2 (J^T J)^-1; TPOT residuals "
    "for the step terms, TTFT for request_s and startup_cohorts); none for a term at a bound or not constrained by "
    "the runs; value_s and std_s of startup_cohorts are counts of cohorts, not seconds"
)


def _combined_mape(report: RunsReport) -> float:
    errors = [abs(r[k]) for r in report.rows for k in ("ttft_error_pct", "tpot_error_pct")]
    return float(np.median(errors))


def runs_document(report: RunsReport) -> dict[str, Any]:
    """The JSON document (module docstring)."""
    doc: dict[str, Any] = {
        "mape": _combined_mape(report),
        "n": report.ttft.n,
        "ttft": {"median_abs_pct": report.ttft.median_abs_pct, "p90_abs_pct": report.ttft.p90_abs_pct},
        "tpot": {"median_abs_pct": report.tpot.median_abs_pct, "p90_abs_pct": report.tpot.p90_abs_pct},
        "engine": {"name": report.engine.name, "version": report.engine.version, "fitted": report.engine.fitted},
    }
    if report.terms:
        doc["terms"] = {t.name: {"value_s": t.value_s, "std_s": t.std_s, "status": t.status} for t in report.terms}
        doc["uncertainty"] = UNCERTAINTY_WORDS
        doc["exact_passes"] = report.passes
    doc["rows"] = report.rows
    return doc


def _term_cell(name: str, value_s: float, std_s: float | None, status: str) -> str:
    if name == "startup_cohorts":  # a count, not seconds
        text = f"{value_s:.3g} cohorts" + (f" ± {std_s:.2g}" if std_s is not None else "")
        return text if status == "fitted" else f"{text} ({status})"
    text = f"{value_s * 1e3:.4g} ms" if value_s >= 1e-4 else f"{value_s * 1e6:.3g} µs"
    if std_s is not None:
        text += f" ± {std_s * 1e3:.2g} ms" if value_s >= 1e-4 else f" ± {std_s * 1e6:.2g} µs"
    return text if status == "fitted" else f"{text} ({status})"


def runs_view(report: RunsReport) -> View:
    """The terminal table: the error summary and the fitted terms; CSV and Markdown list every run."""
    summary: list[dict[str, Any]] = [
        {"what": "runs", "value": str(report.ttft.n)},
        {"what": "TTFT median |error|", "value": f"{report.ttft.median_abs_pct:.1f} %"},
        {"what": "TPOT median |error|", "value": f"{report.tpot.median_abs_pct:.1f} %"},
        {"what": "engine profile", "value": f"{report.engine.name} {report.engine.version}"},
    ]
    summary += [{"what": t.name, "value": _term_cell(t.name, t.value_s, t.std_s, t.status)} for t in report.terms]
    return View(
        records=report.rows,
        document=runs_document(report),
        title="calibration against benchmark runs (fitted terms: 1σ from the Jacobian)"
        if report.terms
        else "benchmark runs against the engine profile",
        table_records=summary,
    )
