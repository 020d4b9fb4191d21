"""Calibration of engine profiles from benchmark runs, held out: writes docs/accuracy_engines_calibration.md.

Usage: python benchmarks/engine_calibration_loo.py [--data FILE] [--out FILE] [--engines vllm,sglang,trtllm]

Data: the colocated (``mode: agg``) rows of dense catalogue models in AIConfigurator's H100 silicon runs (the
AIConfigurator 0.12.0 end-to-end sample, ``aiconfigurator-silicon/h100_sxm.csv`` via ``benchmarks/data_root.py``:
TensorRT-LLM 1.0.0rc3 Llama-3.1-8B and Qwen3-32B fp8, vLLM 0.12.0 Qwen3-32B and (version not recorded) Llama-3.1-70B
fp8, SGLang 0.5.1.post1/0.5.8.post1 Qwen3-32B;
fixed ISL/OSL, closed-loop concurrency = the ``batch_size`` column, mean TTFT/TPOT). The KV-cache dtype is not
recorded: bf16 is assumed. The benchmark recipe is not recorded either: AIConfigurator's aiperf script, 20·C measured
requests (``num_requests``), is assumed as in ``benchmarks/engine_accuracy.py``. A row pdplan cannot evaluate with
the shipped profile is dropped and counted.

Per engine (one profile holds one engine's overheads):

1. the shipped profile's errors (no fit);
2. the fit on all rows (:func:`pdplan.calibrate.benchmarks.fit_runs`: Gauss–Newton on the exact model);
3. leave-one-model-out and leave-one-TP-out: for each fold the closed-loop terms are fitted on the other rows only and
   the held-out rows are predicted exactly (a fresh ``evaluate`` per row with the fold's profile). To keep the
   run within minutes, a fold's fit minimises its training rows' residuals on the model linearised at the all-rows
   fit (predictions and slopes there are properties of the model; no held-out measurement enters a fold's fit).
   A term the fold's rows cannot separate from an earlier one (:func:`pdplan.calibrate.engine_fit.unidentified`:
   one model's rows cannot tell ``launch_gap_s_per_layer`` from ``step_s``, TP > 1 rows alone cannot tell it from
   ``collective_s``) keeps the shipped profile's value, as ``pdplan calibrate`` keeps it;
4. the round trip through the files a user would write: the engine's rows as a benchmark CSV, split 80/20 by a
   fixed seed, ``calibrate`` on the 80 % (written profile), that profile checked on the 80 % and on the held-back
   20 %.

vLLM is reported twice (``--version-sections``): on all its rows, and on the rows of the profile's own version
(0.12.0: Qwen3-32B only). A profile holds one engine version; the vLLM rows of the CSV are two versions that are also
two models (0.12.0 Qwen3-32B, unversioned Llama-3.1-70B fp8), so on all rows "leave one model out" also leaves a
version out, and on the 0.12.0 rows it is not defined (one model).

Targets (issue #11 item 5): held-out TPOT median absolute error ≤ 6 %, TTFT ≤ 15 %.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
from data_root import SILICON_H100, SILICON_H100_NAME, calibration_path
from silicon_runs import REPO, ParallelPredictor, silicon_runs

from pdplan.calibrate import benchmarks as cb
from pdplan.calibrate.engine_fit import solve_linearised, unidentified
from pdplan.io.benchmark_results import read_benchmark_csv
from pdplan.io.catalog import Catalog, open_catalog
from pdplan.specs.benchmark import BenchmarkRun
from pdplan.specs.engine import EngineProfile
from pdplan.types import FloatArray

TARGET_TPOT_PCT, TARGET_TTFT_PCT = 6.0, 15.0


PREDICT: Callable[[Sequence[BenchmarkRun], str, Catalog], tuple[FloatArray, FloatArray]] = cb.predict_runs


def predictable(runs: Sequence[BenchmarkRun], engine: str, catalog: Catalog) -> tuple[list[BenchmarkRun], list[str]]:
    """Runs the shipped profile can evaluate, and the reasons for the others."""
    try:
        PREDICT(runs, engine, catalog)
        return list(runs), []
    except Exception:  # some row fails: find which, one by one
        pass
    kept, dropped = [], []
    for run in runs:
        try:
            cb.predict_runs([run], engine, catalog)
            kept.append(run)
        except Exception as err:  # a row pdplan cannot evaluate is reported, not fitted
            dropped.append(f"{run.source}: {str(err)[:160]}")
    return kept, dropped


def _meas(runs: Sequence[BenchmarkRun]) -> tuple[FloatArray, FloatArray]:
    return np.array([r.ttft_s for r in runs]), np.array([r.tpot_s for r in runs])


def _abs_pct(pred: FloatArray, meas: FloatArray) -> FloatArray:
    out: FloatArray = np.abs(pred / meas - 1.0) * 100.0
    return out


def _median(values: FloatArray) -> float:
    """Median over the rows that have a held-out prediction (NaN when a fold was impossible)."""
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def _fold_terms(
    base: FloatArray,
    jac: FloatArray,
    theta: dict[str, float],
    names: list[str],
    train: np.ndarray,
    meas: tuple[FloatArray, FloatArray],
    profile: EngineProfile,
) -> dict[str, float]:
    """One fold's terms, fitted on the ``train`` rows of the model linearised at the all-rows fit (``base``,
    ``jac``: rows TTFT then TPOT, columns in ``theta`` order); a term those rows cannot separate
    (:func:`~pdplan.calibrate.engine_fit.unidentified`) keeps the shipped profile's value."""
    rows2 = np.concatenate([train, train])
    cols = [list(theta).index(k) for k in names]
    kept = unidentified(jac[rows2][:, cols], base[rows2], names)
    shipped = {k: cb.term_value(profile, k) for k in kept}
    fold_base = base + jac[:, cols] @ np.array([shipped.get(k, theta[k]) - theta[k] for k in names])
    free = [k for k in names if k not in kept]
    fitted = solve_linearised(
        fold_base[rows2],
        jac[rows2][:, [list(theta).index(k) for k in free]],
        {k: theta[k] for k in free},
        meas[0][train],
        meas[1][train],
    )
    return {**shipped, **fitted}


def held_out(
    runs: list[BenchmarkRun],
    catalog: Catalog,
    fit: cb.RunsReport,
    jac: FloatArray,
    engine: str,
    key: Callable[[BenchmarkRun], object],
) -> tuple[list[dict[str, object]], FloatArray, FloatArray]:
    """Folds by ``key``: fit on the rest (linearised at the all-rows fit), predict the fold exactly."""
    n = len(runs)
    theta = {t.name: t.value_s for t in fit.terms}
    names = [t.name for t in fit.terms if t.status != "not constrained"]
    base = np.array([r["predicted_ttft_ms"] for r in fit.rows] + [r["predicted_tpot_ms"] for r in fit.rows]) / 1e3
    meas_ttft, meas_tpot = _meas(runs)
    pred_ttft, pred_tpot = np.empty(n), np.empty(n)
    folds = []
    profile = catalog.engine(engine)
    trials = cb.TrialProfiles(profile)
    try:
        for value in sorted({key(r) for r in runs}, key=str):
            test = np.array([key(r) == value for r in runs])
            if int((~test).sum()) < len(names):  # one model (or TP) only: nothing left to fit on
                folds.append({"held out": str(value), "rows": int(test.sum()), "TTFT": "-", "TPOT": "-"})
                pred_ttft[test], pred_tpot[test] = np.nan, np.nan
                continue
            fold_theta = _fold_terms(base, jac, theta, names, ~test, (meas_ttft, meas_tpot), profile)
            held = [r for r, t in zip(runs, test, strict=True) if t]
            tt, tp = PREDICT(held, trials.path_for({**theta, **fold_theta}), catalog)
            pred_ttft[test], pred_tpot[test] = tt, tp
            folds.append(
                {
                    "held out": str(value),
                    "rows": int(test.sum()),
                    "TTFT": float(np.median(_abs_pct(tt, meas_ttft[test]))),
                    "TPOT": float(np.median(_abs_pct(tp, meas_tpot[test]))),
                    **{k: fold_theta[k] for k in names},
                }
            )
    finally:
        trials.close()
    return folds, pred_ttft, pred_tpot


def round_trip(runs: list[BenchmarkRun], catalog: Catalog, engine: str) -> dict[str, float]:
    """CSV → calibrate on 80 % → written profile → check on the 80 % and on the 20 % held back."""
    rng = np.random.default_rng(11)
    test = rng.random(len(runs)) < 0.2
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for part, mask in (("fit", ~test), ("held", test)):
            path = Path(tmp) / f"{part}.csv"
            lines = ["engine,gpu,model,tp,isl,osl,concurrency,ttft_ms,tpot_ms,dtype,num_requests"]
            lines += [
                f"{r.engine},{r.gpu},{r.model},{r.tp},{r.isl:g},{r.osl:g},{r.concurrency},"
                f"{r.ttft_s * 1e3!r},{r.tpot_s * 1e3!r},{r.dtype},{r.num_requests}"
                for r, m in zip(runs, mask, strict=True)
                if m
            ]
            path.write_text("\n".join(lines) + "\n")
            paths.append(path)
        fit_rows, held_rows = read_benchmark_csv(paths[0]), read_benchmark_csv(paths[1])
        report = cb.fit_runs(
            fit_rows, catalog, engine, files=[paths[0].name], name=f"{engine}-fitted", predictor=PREDICT
        )
        profile = Path(tmp) / f"{engine}-fitted.yaml"
        profile.write_text(cb.profile_yaml(report.engine))
        back = cb.check_runs(fit_rows, catalog, str(profile), PREDICT)
        held = cb.check_runs(held_rows, catalog, str(profile), PREDICT)
    return {
        "fit rows": len(fit_rows),
        "held rows": len(held_rows),
        "fit TTFT": report.ttft.median_abs_pct,
        "fit TPOT": report.tpot.median_abs_pct,
        "back TTFT": back.ttft.median_abs_pct,
        "back TPOT": back.tpot.median_abs_pct,
        "held TTFT": held.ttft.median_abs_pct,
        "held TPOT": held.tpot.median_abs_pct,
    }


def _table(rows: Sequence[Mapping[str, object]]) -> list[str]:
    if not rows:
        return ["(none)"]
    cols = list(rows[0])

    def cell(v: object) -> str:
        if isinstance(v, float):
            if not np.isfinite(v):
                return "-"
            return "0" if abs(v) < 1e-12 else f"{v:.3g}"
        return str(v)

    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for r in rows]
    return out


def engine_section(
    runs: list[BenchmarkRun], catalog: Catalog, engine: str, trip_too: bool
) -> tuple[list[str], dict[str, float]]:
    """Markdown for one engine and its headline figures."""
    t0 = time.perf_counter()
    kept, dropped = predictable(runs, engine, catalog)
    shipped = cb.check_runs(kept, catalog, engine, PREDICT)
    print(f"{engine}: {len(kept)} rows ({len(dropped)} dropped), shipped profile checked", file=sys.stderr)
    base = catalog.engine(engine)
    fitted = cb.fit_runs(
        kept, catalog, engine, files=[Path(SILICON_H100).name], name=f"{engine}-fitted", predictor=PREDICT
    )
    assert fitted.jacobian is not None
    print(f"{engine}: all-rows fit in {fitted.passes} passes", file=sys.stderr)
    lomo, lm_ttft, lm_tpot = held_out(kept, catalog, fitted, fitted.jacobian, engine, lambda r: r.model)
    lotp, lt_ttft, lt_tpot = held_out(kept, catalog, fitted, fitted.jacobian, engine, lambda r: r.tp)
    meas_ttft, meas_tpot = _meas(kept)
    trip = round_trip(kept, catalog, engine) if trip_too and len(kept) >= 20 else {}
    figures = {
        "shipped TTFT": shipped.ttft.median_abs_pct,
        "shipped TPOT": shipped.tpot.median_abs_pct,
        "all-rows fit TTFT": fitted.ttft.median_abs_pct,
        "all-rows fit TPOT": fitted.tpot.median_abs_pct,
        "leave-one-model-out TTFT": _median(_abs_pct(lm_ttft, meas_ttft)),
        "leave-one-model-out TPOT": _median(_abs_pct(lm_tpot, meas_tpot)),
        "leave-one-TP-out TTFT": _median(_abs_pct(lt_ttft, meas_ttft)),
        "leave-one-TP-out TPOT": _median(_abs_pct(lt_tpot, meas_tpot)),
    }
    terms = [
        {"term": t.name, "value": t.value_s, "1σ": t.std_s if t.std_s is not None else "-", "status": t.status}
        for t in fitted.terms
    ]
    lines = [
        f"## {engine} (profile {base.name} {base.version}; {len(kept)} rows, {len(dropped)} dropped; "
        f"{time.perf_counter() - t0:.0f} s)",
        "",
        "Median absolute % error over the rows:",
        "",
        *_table([{"what": k, "median abs %": v} for k, v in figures.items()]),
        "",
        f"All-rows fit ({fitted.passes} exact passes), terms in seconds, `startup_cohorts` in cohorts "
        "(1σ from the Jacobian):",
        "",
        *_table(terms),
        "",
        "Leave-one-model-out folds (median abs % of the held-out rows; the fold's fitted terms, s):",
        "",
        *_table(lomo),
        "",
        "Leave-one-TP-out folds:",
        "",
        *_table(lotp),
        "",
    ]
    if trip:
        lines += [
            "Round trip (CSV of this engine's rows, 80/20 split, seed 11; `calibrate` on the 80 %, the written "
            "profile checked on the 80 % and on the 20 % held back):",
            "",
            *_table([trip]),
            "",
        ]
    if dropped:
        lines += ["Dropped rows (pdplan cannot evaluate them with the shipped profile):", ""]
        lines += [f"- {d}" for d in dropped] + [""]
    return lines, figures


def _hand_written(out: Path) -> str:
    """The hand-written findings of an earlier run (from its first ``## Findings`` heading on), kept under the
    regenerated tables."""
    text = out.read_text() if out.exists() else ""
    at = text.find("\n## Findings")
    return "" if at < 0 else text[at:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help=f"default: {SILICON_H100} (benchmarks/data_root.py)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "accuracy_engines_calibration.md")
    parser.add_argument("--engines", default="vllm,sglang,trtllm")
    parser.add_argument("--max-rows", type=int, default=60, help="rows per engine (every k-th in file order)")
    parser.add_argument("--round-trip", default="vllm", help="engines that get the CSV round trip")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--profile-version-only", action="store_true", help="keep only rows of the profile's own engine version"
    )
    parser.add_argument(
        "--version-sections",
        default="vllm",
        help="engines that also get a section on the rows of the profile's own version (a profile holds one version)",
    )
    args = parser.parse_args()
    global PREDICT
    PREDICT = ParallelPredictor(args.workers)
    catalog = open_catalog()
    runs = silicon_runs(args.data or calibration_path(SILICON_H100))
    body, summary = [], []
    for engine in args.engines.split(","):
        version = catalog.engine(engine).version
        every = [r for r in runs if r.engine == engine]
        if args.profile_version_only:
            every = [r for r in every if r.extra.get("version") == version]
        sets = [("all rows", every)]
        if not args.profile_version_only and engine in args.version_sections.split(","):
            sets.append((f"{version} rows", [r for r in every if r.extra.get("version") == version]))
        for label, rows in sets:
            step = -(-len(rows) // args.max_rows)
            mine = rows[::step]
            body += [f"<!-- {engine} {label}: {len(mine)} of {len(rows)} rows (every {step}) -->", ""]
            trip = engine in args.round_trip.split(",") and label == "all rows"
            lines, figures = engine_section(mine, catalog, engine, trip)
            lines[0] = lines[0].replace(f"## {engine} ", f"## {engine}, {label} ", 1)
            lines[0] += f" — every {step}. of {len(rows)} rows"
            body += lines
            summary.append({"engine": engine if label == "all rows" else f"{engine} ({label})", **figures})
    head = [
        "# Engine calibration from benchmark runs, held out",
        "",
        "Generated by `python benchmarks/engine_calibration_loo.py` (see its docstring for the method). Data: "
        f"the colocated dense-model rows of the {SILICON_H100_NAME} (TensorRT-LLM, vLLM, SGLang)."
        " Each row is predicted by `evaluate` at its concurrency (closed loop) with "
        "the engine's profile; fitted terms: `step_s`, `step_s_per_seq`, `collective_s`, `launch_gap_s_per_layer` "
        "on TPOT, then "
        "`request_s` and `startup_cohorts` (cohorts, not seconds) on TTFT (`pdplan.calibrate.engine_fit`).",
        "",
        f"Targets (issue #11 item 5): held-out TPOT median |error| ≤ {TARGET_TPOT_PCT:g} %, "
        f"TTFT ≤ {TARGET_TTFT_PCT:g} %.",
        "",
        "vLLM is reported on all its rows and on its profile version's rows: a profile holds one engine version, "
        "and the CSV's vLLM rows are two versions that are also two models (0.12.0: Qwen3-32B; version not "
        "recorded: Llama-3.1-70B fp8). On all rows, leave-one-model-out also leaves a version out; on the 0.12.0 "
        "rows it is not defined (one model), so only leave-one-TP-out is held out there.",
        "",
        "## Summary (median absolute % error)",
        "",
        *_table(summary),
        "",
    ]
    args.out.write_text("\n".join(head + body) + _hand_written(args.out))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
