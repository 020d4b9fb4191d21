"""Fit each shipped engine profile's end-to-end terms once, jointly on the H100 and H200 runs, and write them.

Issue #23 item 2: host and engine terms (per step, per request, start-up) are CPU-side, so each engine version's
profile takes them from one fit on the rows of both GPUs together, not from one GPU's rows.

Rows: every row of AIConfigurator 0.12.0's end-to-end sample (``aiconfigurator-silicon/h100_sxm.csv`` and
``h200_sxm.csv`` via ``benchmarks/data_root.py``) that the profile prices, dense and MoE colocated and disaggregated,
each on its own GPU's kernel table and datasheet (``benchmarks/cross_gpu_rows.py``; the rows of
``benchmarks/cross_gpu_accuracy.py``, whose profile is the row's engine version: ``vllm-0.18`` for vLLM 0.18 rows,
``sglang-0.5.9`` for SGLang 0.5.6 to 0.5.9 rows).

Terms: the profile's fitted terms (``cross_gpu_fit.FITTED``; the rest stay as the profile has them). Method:
``cross_gpu_fit.fit`` on all the rows (staged bounded robust least squares of log residuals, linearised at the
shipped values, chord passes), each row weighted by ``cross_gpu_fit.gpu_balanced_weights`` so that each GPU's rows
carry half the total weight whatever their count.

``--converged`` iterates the same objective to convergence by Gauss–Newton (``cross_gpu_fit.fit_converged``, from
the shipped values, re-linearised until every term moves by less than a tenth of its 1σ): unlike the chord passes'
its result does not depend on where it was linearised (docs/cross_gpu_accuracy.md §8.4). TensorRT-LLM's joint values
were written so (2026-12-07: 5 linearisations, about 18 minutes on two shared cores); a run that does not converge
is not written. The source text names the
engine versions of the rows and their count per GPU: one profile per engine version is the aim, and where a profile
prices rows of several versions (TensorRT-LLM: no version has rows on both GPUs) the joint fit mixes them;
``--version V`` fits the profile's rows of version V alone (printed, never written: the profile prices the others).

Rule (issue #23: a term stays as fitted only if it does not worsen the error): the joint values replace the shipped
ones unless they worsen the GPU-balanced in-sample median |error| (:func:`balanced_median`: the mean of the two GPUs'
medians over the profile's rows, the score that matches the weighting) of TPOT or TTFT by more than
:data:`WORSE_POINTS`; then the profile keeps its values and the script says so.

Prints per profile the fitted terms (shipped → joint) and the in-sample median |error| of TPOT and TTFT per mode and
GPU, shipped → joint; with ``--write`` replaces each fitted term's ``value`` and ``source`` in
``pdplan/data/engines/<profile>.yaml`` (the rest of the file untouched). The cross-GPU folds of
``benchmarks/cross_gpu_accuracy.py`` (fit on one GPU, score the other) do not read these values except as the point
their Jacobian is taken at. Run:
``python benchmarks/fit_shipped_profile.py [--profiles vllm,...] [--converged] [--write | --version V]``.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cross_gpu_accuracy import GPUS, HELPS_POINTS, Pricer, load_rows
from cross_gpu_fit import FITTED, MEANING, Converged, Fit, fit, fit_converged, gpu_balanced_weights, linearise
from cross_gpu_rows import PricePool

from pdplan.calibrate import benchmarks as cb
from pdplan.io.catalog import open_catalog
from pdplan.io.engines import ENGINE_DIR, version_has_prefix

SCRIPT = "benchmarks/fit_shipped_profile.py"
WORSE_POINTS = HELPS_POINTS
"""A joint fit is refused when it worsens a GPU-balanced median |error| by more than this many points: the 0.5 points
below which ``benchmarks/cross_gpu_accuracy.py`` calls a term's effect noise."""


def _median_abs(pred: np.ndarray, meas: np.ndarray, mask: np.ndarray) -> float:
    e = np.abs(pred[mask] / meas[mask] - 1.0) * 100.0
    e = e[np.isfinite(e)]
    return float(np.median(e)) if e.size else float("nan")


def balanced_median(pred: np.ndarray, meas: np.ndarray, gpu: np.ndarray) -> float:
    """Mean over the GPUs present of each GPU's median |error| (%), so each GPU counts half whatever its rows."""
    return float(np.mean([_median_abs(pred, meas, gpu == g) for g in np.unique(gpu)]))


def worsened(rows: list[dict[str, Any]], shipped: Fit, joint: Fit) -> list[str]:
    """The metrics whose GPU-balanced median |error| the joint fit worsens by more than :data:`WORSE_POINTS`."""
    gpu = np.array([r["gpu"] for r in rows])
    out = []
    for metric, idx in (("tpot", 1), ("ttft", 0)):
        meas = np.array([r[f"{metric}_ms"] for r in rows])
        old = balanced_median((shipped.ttft_ms, shipped.tpot_ms)[idx], meas, gpu)
        new = balanced_median((joint.ttft_ms, joint.tpot_ms)[idx], meas, gpu)
        if new - old > WORSE_POINTS:
            out.append(f"the joint fit worsens {metric.upper()} {old:.2f} -> {new:.2f} %")
    return out


def _groups(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Row masks: all rows, each GPU, each kind (dense, MoE, disaggregated), each kind on each GPU (non-empty)."""
    gpu = np.array([r["gpu"] for r in rows])
    kind = np.array([r["kind"] for r in rows])
    out = {"all": np.ones(len(rows), bool), **{g: gpu == g for g in GPUS}}
    for m in sorted(set(kind)):
        out[m] = kind == m
        out.update({f"{m} {g}": (kind == m) & (gpu == g) for g in GPUS})
    return {k: v for k, v in out.items() if v.any()}


def joint_fit(
    profile: str, rows: list[dict[str, Any]], pool: PricePool, tmp: Path, converged: bool = False
) -> tuple[Fit, Fit, Converged | None]:
    """(shipped, joint) fits of one profile on its rows of both GPUs (module docstring), and with ``converged`` the
    Gauss–Newton run behind the joint fit (its 1σ and linearisations; None for the chord fit)."""
    base = open_catalog().engine(profile)
    price = Pricer(base, rows, pool, tmp)
    theta0 = {k: cb.term_value(base, k) for k in FITTED[profile]}
    meas_ttft = np.array([r["ttft_ms"] for r in rows])
    meas_tpot = np.array([r["tpot_ms"] for r in rows])
    train = np.ones(len(rows), bool)
    weights = gpu_balanced_weights(np.array([r["gpu"] for r in rows]), train)
    if converged:
        ttft, tpot = price(theta0)
        run = fit_converged(price, theta0, meas_ttft, meas_tpot, train, weights=weights)
        return Fit(dict(theta0), frozenset(), ttft, tpot), run.fit, run
    lin = linearise(price, theta0)
    joint = fit(lin, price, meas_ttft, meas_tpot, train, weights=weights)
    return Fit(dict(lin.theta0), frozenset(), lin.ttft_ms, lin.tpot_ms), joint, None


def _fmt(term: str, value: float) -> str:
    if term == "startup_cohorts":
        return f"{value:.3g}"
    return f"{value * 1e3:.3g} ms"


def summary(
    profile: str, rows: list[dict[str, Any]], shipped: Fit, joint: Fit, run: Converged | None = None
) -> list[str]:
    """The printed lines of one profile: terms (with 1σ and the linearisations of a converged fit) and in-sample
    medians, shipped → joint."""
    meas = {"ttft": np.array([r["ttft_ms"] for r in rows]), "tpot": np.array([r["tpot_ms"] for r in rows])}
    counts = {g: sum(r["gpu"] == g for r in rows) for g in GPUS}
    lines = [f"{profile}: {len(rows)} rows ({', '.join(f'{g} {n}' for g, n in counts.items())})"]
    lines.append(f"  engine versions: {versions_text(rows)}")
    if run is not None:
        state = "converged" if run.converged else "NOT converged"
        lines.append(f"  Gauss-Newton: {len(run.path)} linearisations, {state}; terms {joint.theta}")
    for k in FITTED[profile]:
        frozen = " (not constrained: kept)" if k in joint.frozen else ""
        lines.append(f"  {k}: {_fmt(k, shipped.theta[k])} -> {_value_text(k, joint, run)}{frozen}")
    for name, mask in _groups(rows).items():
        cells = []
        for metric, idx in (("TPOT", 1), ("TTFT", 0)):
            old = _median_abs((shipped.ttft_ms, shipped.tpot_ms)[idx], meas[metric.lower()], mask)
            new = _median_abs((joint.ttft_ms, joint.tpot_ms)[idx], meas[metric.lower()], mask)
            cells.append(f"{metric} {old:.1f} -> {new:.1f} %")
        lines.append(f"  {name} ({int(mask.sum())} rows): median |err| {', '.join(cells)}")
    gpu = np.array([r["gpu"] for r in rows])
    cells = []
    for metric, idx in (("TPOT", 1), ("TTFT", 0)):
        old = balanced_median((shipped.ttft_ms, shipped.tpot_ms)[idx], meas[metric.lower()], gpu)
        new = balanced_median((joint.ttft_ms, joint.tpot_ms)[idx], meas[metric.lower()], gpu)
        cells.append(f"{metric} {old:.2f} -> {new:.2f} %")
    lines.append(f"  GPU-balanced median |err|: {', '.join(cells)}")
    return lines


WAS: Mapping[str, str] = {"sglang-0.5.9": "carried from the sglang (0.5.1.post1) profile's H100 fit"}
"""How a profile's shipped value came about, where not "fitted on H100 rows alone" (the source text's "was")."""


def _version(row: dict[str, Any]) -> str:
    """The row's engine version; ``unnamed`` where the sample gives none (read as ``?``)."""
    return str(row["version"]) if row["version"] not in ("", "?") else "unnamed"


def versions_text(rows: list[dict[str, Any]]) -> str:
    """The engine versions of the rows with their count per GPU, e.g. ``1.0.0rc3 (479 H100), 0.8.1.post1 (61
    H200)``, and whether the fit mixes versions (which of them have rows on both GPUs)."""
    out, shared = [], []
    for v in sorted({_version(r) for r in rows}):
        n = {g: sum(_version(r) == v and r["gpu"] == g for r in rows) for g in GPUS}
        out.append(f"{v} ({', '.join(f'{c} {g.upper()}' for g, c in n.items() if c)})")
        shared += [v] if all(n.values()) else []
    if len(out) == 1:
        return out[0]
    both = f"on both GPUs only {', '.join(shared)}" if shared else "no version has rows on both GPUs"
    return f"{', '.join(out)} ({both}: the fit mixes versions)"


def _value_text(term: str, joint: Fit, run: Converged | None) -> str:
    """The fitted value, with its 1σ where the fit was iterated to convergence."""
    text = _fmt(term, joint.theta[term])
    if run is None or term not in run.std:
        return text
    scale, unit = (1.0, "") if term == "startup_cohorts" else (1e3, " ms")
    return f"{text.removesuffix(unit)} +- {run.std[term] * scale:.2g}{unit}"


def source_text(
    profile: str, term: str, rows: list[dict[str, Any]], shipped: Fit, joint: Fit, run: Converged | None = None
) -> str:
    """The ``source`` of a jointly fitted term (``run``: the Gauss–Newton run behind a ``--converged`` fit)."""
    meas_tpot = np.array([r["tpot_ms"] for r in rows])
    meas_ttft = np.array([r["ttft_ms"] for r in rows])
    gpu = np.array([r["gpu"] for r in rows])
    counts = ", ".join(f"{sum(r['gpu'] == g for r in rows)} {g.upper()}" for g in GPUS)
    kinds = ", ".join(sorted({r["kind"] for r in rows}))
    tpot = (balanced_median(shipped.tpot_ms, meas_tpot, gpu), balanced_median(joint.tpot_ms, meas_tpot, gpu))
    ttft = (balanced_median(shipped.ttft_ms, meas_ttft, gpu), balanced_median(joint.ttft_ms, meas_ttft, gpu))
    date = datetime.now(UTC).date().isoformat()
    command, method = SCRIPT, "the staged robust fit of log residuals of benchmarks/cross_gpu_fit.py"
    if run is not None:
        command += " --converged"
        method += (
            f" iterated to convergence by Gauss-Newton (fit_converged, {len(run.path)} linearisations, 1σ at the last)"
        )
    return (
        f"FITTED by pdplan jointly on the H100 and H200 closed-loop runs of "
        f"tests/data/calibration/aiconfigurator-silicon/h100_sxm.csv and h200_sxm.csv (AIConfigurator 0.12.0 "
        f"end-to-end sample; the {len(rows)} rows this profile prices, {counts}, {kinds} rows; engine versions "
        f"{versions_text(rows)}; {command}, {date}: {method}, each GPU's rows weighted to half the total so neither "
        f"GPU dominates by row count; issue #23 item 2): {_value_text(term, joint, run)}, {MEANING[term]}; was "
        f"{_fmt(term, shipped.theta[term])} {WAS.get(profile, 'fitted on H100 rows alone')}; GPU-balanced "
        f"in-sample median |err| (the mean of the two GPUs' medians) TPOT {tpot[0]:.1f} -> {tpot[1]:.1f} %, TTFT "
        f"{ttft[0]:.1f} -> {ttft[1]:.1f} %. Cross-GPU check of the term: docs/cross_gpu_accuracy.md §5"
    )


def _wrap(text: str, indent: str, width: int = 118) -> list[str]:
    """``source: "text"`` as YAML plain-scalar continuation lines (double-quoted, no escapes needed)."""
    if '"' in text or "\\" in text:
        raise ValueError(f"source text must not hold quotes or backslashes: {text!r}")
    words, lines, line = text.split(" "), [], f'{indent}source: "'
    for w in words:
        if len(line) + len(w) + 1 > width and line.strip() not in ('source: "',):
            lines.append(line.rstrip())
            line = indent + "  "
        line += w + " "
    lines.append(line.rstrip() + '"')
    return lines


def replace_term(text: str, term: str, value: float, source: str) -> str:
    """``text`` (an engine YAML) with the block ``term:`` / ``value:`` / ``source: "..."`` replaced."""
    lines = text.splitlines()
    heads = [i for i, s in enumerate(lines) if re.fullmatch(rf"\s*{term}:\s*", s)]
    if len(heads) != 1:
        raise ValueError(f"{term}: expected one block '{term}:' in the profile, found {len(heads)}")
    i = heads[0]
    indent = re.match(r"\s*", lines[i + 1]).group(0)  # type: ignore[union-attr]
    if not lines[i + 1].strip().startswith("value:") or not lines[i + 2].strip().startswith('source: "'):
        raise ValueError(f"{term}: block is not 'value:' then 'source: \"...'")
    end = i + 2
    while not lines[end].rstrip().endswith('"') or lines[end].strip() == 'source: "':
        end += 1
    new = [f"{indent}value: {value:.6g}", *_wrap(source, indent)]
    return "\n".join([*lines[: i + 1], *new, *lines[end + 1 :]]) + "\n"


def write_profile(profile: str, terms: Mapping[str, float], sources: Mapping[str, str]) -> None:
    """Replace the fitted terms in the shipped YAML and check that the profile reads them back."""
    path = ENGINE_DIR / f"{profile}.yaml"
    text = path.read_text(encoding="utf-8")
    for k, v in terms.items():
        text = replace_term(text, k, v, sources[k])
    path.write_text(text, encoding="utf-8")
    data = yaml.safe_load(text)
    for k, v in terms.items():
        got = (data["scheduling"] if k == "startup_cohorts" else data["overheads"])[k]["value"]
        if abs(float(got) - float(f"{v:.6g}")) > 1e-12:
            raise RuntimeError(f"{profile}.{k}: wrote {v}, read back {got}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default=",".join(FITTED))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", action="store_true", help="write the joint values into the engine YAMLs")
    ap.add_argument(
        "--converged", action="store_true", help="iterate the joint fit to convergence (cross_gpu_fit.fit_converged)"
    )
    ap.add_argument(
        "--version",
        help="fit only the profile's rows of this engine version (prefix by whole components, e.g. 0.8.1): a "
        "per-version joint fit, printed, never written",
    )
    args = ap.parse_args()
    if args.version and args.write:
        ap.error("--version fits a part of the profile's rows: it is printed, not written")
    pool = PricePool(args.workers)
    try:
        by_profile, _ = load_rows(open_catalog(), pool)
        with tempfile.TemporaryDirectory(prefix="pdplan-jointfit-") as tmp:
            for profile in args.profiles.split(","):
                rows = by_profile[profile]
                if args.version:
                    rows = [r for r in rows if version_has_prefix(str(r["version"]), args.version)]
                shipped, joint, run = joint_fit(profile, rows, pool, Path(tmp), args.converged)
                print("\n".join(summary(profile, rows, shipped, joint, run)), flush=True)
                refused = worsened(rows, shipped, joint)
                if run is not None and not run.converged:
                    refused.append(f"the fit did not converge in {len(run.path)} linearisations")
                if refused:
                    print(f"  kept the shipped values: {'; '.join(refused)}", flush=True)
                elif args.write:
                    terms = {k: joint.theta[k] for k in FITTED[profile] if k not in joint.frozen}
                    sources = {k: source_text(profile, k, rows, shipped, joint, run) for k in terms}
                    write_profile(profile, {k: float(f"{v:.3g}") for k, v in terms.items()}, sources)
    finally:
        pool.close()


if __name__ == "__main__":
    main()
