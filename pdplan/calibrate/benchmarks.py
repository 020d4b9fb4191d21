"""``pdplan calibrate`` on closed-loop benchmark runs: predict each run through the library's ``evaluate``, compare,
and fit the engine profile's closed-loop terms (overheads and start-up cohorts: :mod:`pdplan.calibrate.engine_fit`).

Each run becomes the scenario ``pdplan evaluate --model M --gpu G --tp T --colocated 1 --isl I --osl O --dtype D
--kv-dtype K --engine E --concurrency C`` would build (the packaged default scenario with those overrides: one
colocated instance, fixed lengths at the run's means rounded to whole tokens), evaluated at the run's concurrency
in closed loop (with the run's measured request count where the file records it: ``num_prompts``); the predicted
TTFT and TPOT are the means over requests as the benchmark tools report them (the evaluation's benchmark average).
During a fit each trial profile is written to a temporary YAML file and named by its path, exactly as a user's
``--engine FILE`` (the public path: the fit sees what a user of the written profile will see).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pdplan.calibrate.engine_fit import COUNT_TERMS, TERMS, OverheadFit, TermFit, fit_overheads
from pdplan.calibrate.fit import ErrorStats, error_stats
from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.evaluation.evaluate import evaluate
from pdplan.evaluation.record import Evaluation
from pdplan.io.benchmark_results import catalogue_model_name
from pdplan.io.catalog import Catalog
from pdplan.io.overrides import apply_overrides
from pdplan.io.scenario import load_scenario
from pdplan.specs.benchmark import BenchmarkRun
from pdplan.specs.command_line import ScenarioOverrides
from pdplan.specs.engine import EngineProfile, Sourced
from pdplan.specs.scenario import Scenario
from pdplan.types import FloatArray


@dataclass(frozen=True)
class RunsReport:
    """Per-run predictions against the measurements, the error summaries and (after a fit) the fitted profile."""

    rows: list[dict[str, Any]]
    ttft: ErrorStats
    tpot: ErrorStats
    engine: EngineProfile
    terms: tuple[TermFit, ...] = ()
    passes: int = 0
    jacobian: FloatArray | None = None
    """After a fit: d(TTFT, TPOT stacked, s)/d(term) at the fit (:class:`~pdplan.calibrate.engine_fit.OverheadFit`)."""


def default_scenario() -> Scenario:
    """The packaged default scenario every run's overrides apply to (its SLO does not enter the predictions)."""
    return load_scenario(Path(str(resources.files("pdplan"))) / "data" / "default_scenario.yaml")


def run_scenario(run: BenchmarkRun, engine_ref: str, catalog: Catalog, base: Scenario) -> Scenario:
    """The scenario of one run (module docstring)."""
    if run.pp > 1 or run.ep > 1 or run.dp > 1:
        raise SpecError(
            f"pp={run.pp}, ep={run.ep}, dp={run.dp}: calibrate predicts colocated TP-only runs; allowed: 1",
            source=run.source,
            field="pp" if run.pp > 1 else "ep" if run.ep > 1 else "dp",
        )
    if not engines_wired():
        raise SpecError(
            "this build has no engine profiles in its scenarios (--engine); benchmark runs cannot be predicted",
            field="engine",
        )
    overrides = ScenarioOverrides.model_validate(
        {
            "model": catalogue_model_name(run.model, catalog.names("model")),
            "gpu": run.gpu,
            "tp": run.tp,
            "colocated": 1,
            "isl": max(1, round(run.isl)),
            "osl": max(1, round(run.osl)),
            "dtype": run.dtype,
            "kv_dtype": run.kv_dtype,
            "engine": engine_ref,
        }
    )
    return apply_overrides(base, overrides)


def engines_wired() -> bool:
    """Whether scenarios carry an engine profile (``--engine``; the engine-profile work of issue #11 item 2)."""
    return "engine" in ScenarioOverrides.model_fields


RunsPredictor = Callable[[Sequence[BenchmarkRun], str, Catalog], tuple[FloatArray, FloatArray]]
"""(runs, engine profile name or path, catalogue) → mean TTFT and TPOT (s) per run: :func:`predict_runs`, or a
caller's parallel version of it."""


def predict_runs(runs: Sequence[BenchmarkRun], engine_ref: str, catalog: Catalog) -> tuple[FloatArray, FloatArray]:
    """Mean TTFT and TPOT (s) of every run under the profile ``engine_ref`` (a name or a YAML path)."""
    base = default_scenario()
    ttft, tpot = np.empty(len(runs)), np.empty(len(runs))
    for i, run in enumerate(runs):
        try:
            sc = run_scenario(run, engine_ref, catalog, base)
            ev = evaluate(sc, catalog=catalog, concurrency=run.concurrency, requests=run.num_requests)
        except (SpecError, NoFeasiblePlanError) as err:
            raise SpecError(f"this run cannot be predicted: {err}", source=run.source) from None
        ttft[i], tpot[i] = _benchmark_means(ev)
    return ttft, tpot


def _benchmark_means(ev: Evaluation) -> tuple[float, float]:
    """Mean TTFT and TPOT as the benchmark tool reports them: the evaluation's benchmark average (start-up burst
    and the measured requests included) where it has one, else the closed loop's operating point."""
    bench = ev.benchmark
    if bench is not None:
        return float(bench.mean_ttft_s), float(bench.mean_tpot_s)
    point = ev.operating_point
    assert point is not None
    return float(point.ttft_s.mean), float(point.tpot_s.mean)


SCHEDULING_TERMS = frozenset({"startup_cohorts"})
"""Fitted terms that live in the profile's ``scheduling`` block, not its ``overheads``."""
_NO_COHORTS = "unset in the base profile: the burst cohort alone (1), as the closed loop reads an unset value"


def with_terms(profile: EngineProfile, terms: Mapping[str, float], note: str | None = None) -> EngineProfile:
    """``profile`` with closed-loop terms replaced (``note`` becomes each replaced term's source when given): the
    overheads, and ``startup_cohorts`` in the scheduling policy."""
    sched = profile.scheduling
    update = {
        k: Sourced(value=max(0.0, float(v)), source=note or _source(getattr(profile.overheads, k)))
        for k, v in terms.items()
        if k not in SCHEDULING_TERMS
    }
    if "startup_cohorts" in terms:
        was = sched.startup_cohorts.source if sched.startup_cohorts is not None else _NO_COHORTS
        cohorts = Sourced(value=max(0.0, float(terms["startup_cohorts"])), source=note or was)
        sched = sched.model_copy(update={"startup_cohorts": cohorts})
    overheads = profile.overheads.model_copy(update=update)
    return profile.model_copy(update={"overheads": overheads, "scheduling": sched})


def _source(term: Sourced | None) -> str:
    return term.source if term is not None else "unset in the base profile (0)"


def term_value(profile: EngineProfile, name: str) -> float:
    """A closed-loop term's value in ``profile`` (``startup_cohorts`` unset: 1, the burst cohort alone, as the closed
    loop reads it: :func:`pdplan.benchmark.loop_inputs.loop_inputs`; an unset optional overhead: 0)."""
    if name == "startup_cohorts":
        cohorts = profile.scheduling.startup_cohorts
        return 1.0 if cohorts is None else cohorts.value
    term: Sourced | None = getattr(profile.overheads, name)
    return term.value if term is not None else 0.0


def profile_yaml(profile: EngineProfile) -> str:
    """An engine profile as YAML (``pdplan calibrate -o ENGINE.yaml``), keys in schema order."""
    return yaml.safe_dump(
        profile.model_dump(mode="json", exclude_none=True), sort_keys=False, width=110, allow_unicode=True
    )


class TrialProfiles:
    """Trial profiles as files in a temporary folder, each under a new name (profiles are cached by path)."""

    def __init__(self, base: EngineProfile) -> None:
        self.base = base
        self._dir = tempfile.TemporaryDirectory(prefix="pdplan-calibrate-")
        self._ids = count()

    def path_for(self, terms: Mapping[str, float]) -> str:
        path = Path(self._dir.name) / f"trial-{next(self._ids)}.yaml"
        path.write_text(profile_yaml(with_terms(self.base, terms)))
        return str(path)

    def close(self) -> None:
        self._dir.cleanup()


def _rows(runs: Sequence[BenchmarkRun], ttft: FloatArray, tpot: FloatArray) -> list[dict[str, Any]]:
    out = []
    for run, p_ttft, p_tpot in zip(runs, ttft, tpot, strict=True):
        out.append(
            {
                "source": run.source,
                "engine": run.engine,
                "gpu": run.gpu,
                "model": run.model,
                "tp": run.tp,
                "isl": run.isl,
                "osl": run.osl,
                "concurrency": run.concurrency,
                "ttft_ms": run.ttft_s * 1e3,
                "tpot_ms": run.tpot_s * 1e3,
                **run.extra,
                "predicted_ttft_ms": float(p_ttft) * 1e3,
                "predicted_tpot_ms": float(p_tpot) * 1e3,
                "ttft_error_pct": (float(p_ttft) / run.ttft_s - 1.0) * 100.0,
                "tpot_error_pct": (float(p_tpot) / run.tpot_s - 1.0) * 100.0,
                "from_flags": ",".join(run.from_flags),
            }
        )
    return out


def _report(
    runs: Sequence[BenchmarkRun], ttft: FloatArray, tpot: FloatArray, engine: EngineProfile, fit: OverheadFit | None
) -> RunsReport:
    meas_ttft, meas_tpot = (np.array([getattr(r, k) for r in runs]) for k in ("ttft_s", "tpot_s"))
    return RunsReport(
        _rows(runs, ttft, tpot),
        error_stats(ttft, meas_ttft),
        error_stats(tpot, meas_tpot),
        engine,
        fit.terms if fit is not None else (),
        fit.passes if fit is not None else 0,
        fit.jacobian if fit is not None else None,
    )


def check_runs(
    runs: Sequence[BenchmarkRun], catalog: Catalog, engine: str | None, predictor: RunsPredictor = predict_runs
) -> RunsReport:
    """How well the profile ``engine`` (name or path) predicts the runs; ``None``: each run's own engine's
    packaged profile (the report then names the first)."""
    if engine is not None:
        ttft, tpot = predictor(runs, engine, catalog)
        return _report(runs, ttft, tpot, catalog.engine(engine), None)
    ttft, tpot = np.empty(len(runs)), np.empty(len(runs))
    for name in sorted({r.engine.lower() for r in runs}):
        idx = [i for i, r in enumerate(runs) if r.engine.lower() == name]
        ttft[idx], tpot[idx] = predictor([runs[i] for i in idx], name, catalog)
    return _report(runs, ttft, tpot, catalog.engine(runs[0].engine.lower()), None)


def one_engine(runs: Sequence[BenchmarkRun]) -> str:
    """The one engine all runs were measured on (a profile holds one engine's overheads)."""
    engines = sorted({r.engine.lower() for r in runs})
    if len(engines) != 1:
        raise SpecError(
            f"fitting needs runs of one engine, got {engines}; split the files or use --check", field="engine"
        )
    return engines[0]


def fit_runs(
    runs: Sequence[BenchmarkRun],
    catalog: Catalog,
    engine: str,
    *,
    files: Sequence[str],
    name: str,
    predictor: RunsPredictor = predict_runs,
    held: Sequence[str] = (),
) -> RunsReport:
    """Fit the closed-loop terms (:data:`~pdplan.calibrate.engine_fit.TERMS`) of the profile ``engine`` to the runs,
    except those named in ``held``, which keep the profile's values; the report carries the fitted profile, whose
    terms' sources say what they were fitted on, and its predictions of the runs."""
    base = catalog.engine(engine)
    trials = TrialProfiles(base)
    try:

        def predict(terms: Mapping[str, float]) -> tuple[FloatArray, FloatArray]:
            return predictor(runs, trials.path_for(terms), catalog)

        start = {k: term_value(base, k) for k in TERMS if k not in held}
        fixed = {k: term_value(base, k) for k in held}
        meas = [np.array([getattr(r, k) for r in runs]) for k in ("ttft_s", "tpot_s")]
        result = fit_overheads(predict, start, meas[0], meas[1], fixed=fixed)
    finally:
        trials.close()
    fitted = fitted_profile(base, result, files=files, rows=len(runs), name=name)
    return _report(runs, result.ttft_s, result.tpot_s, fitted, result)


def fitted_profile(
    base: EngineProfile, result: OverheadFit, *, files: Sequence[str], rows: int, name: str
) -> EngineProfile:
    """``base`` with the fitted terms, each sourced "fitted by pdplan calibrate on FILES, N rows, DATE"."""
    day = datetime.now(UTC).date().isoformat()
    names = [Path(f).name for f in files]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more files" if len(names) > 3 else "")
    where = f"fitted by pdplan calibrate on {shown}, {rows} rows, {day}"
    profile = base
    for term in result.terms:
        if term.status == "not constrained":
            continue
        unit = "cohorts" if term.name in COUNT_TERMS else "s"
        error = f" ± {term.std_s:.3g} {unit} (1σ, from the Jacobian)" if term.std_s is not None else ""
        error = error or f" ({term.status})"
        profile = with_terms(profile, {term.name: term.value_s}, f"{where}: {term.value_s:.4g} {unit}{error}")
    kept = [t.name for t in result.terms if t.status == "not constrained"]
    note = f"{where}; kept from {base.name} {base.version} (not constrained by the runs): {', '.join(kept) or 'none'}"
    return profile.model_copy(update={"name": name, "fitted": True, "sources": {**profile.sources, "calibrate": note}})
