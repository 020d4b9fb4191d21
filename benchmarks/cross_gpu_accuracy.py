"""Cross-GPU accuracy of the engine profiles: fit the end-to-end terms on one GPU's rows, predict the other GPU's.

Data: AIConfigurator 0.12.0's end-to-end sample, H100 and H200 rows (``aiconfigurator-silicon/h100_sxm.csv`` and
``h200_sxm.csv`` via ``benchmarks/data_root.py``), every row pdplan can price (``benchmarks/cross_gpu_rows.py``:
dense and MoE colocated rows, disaggregated rows), each on its own GPU's kernel table and datasheet. A row is priced
with its engine version's shipped profile (``cross_gpu_rows.VERSION_PROFILES``: vLLM 0.18 rows ``vllm-0.18``, SGLang
0.5.6 to 0.5.9 rows ``sglang-0.5.9``), as ``benchmarks/engine_accuracy.py`` prices it (vLLM's split alone there).

Per profile, the terms the shipped profile fitted on end-to-end rows (``benchmarks/cross_gpu_fit.py``, which names
them and their fitters) are refitted, the kernel terms staying the kernel tables' (per GPU, never from these rows):

* **in-sample**: fitted on one GPU's rows, scored on the same rows;
* **cross-GPU**: fitted on the H100 rows, scored on the H200 rows, and the reverse; a profile whose rows lie on one
  GPU (``sglang``, 0.5.1.post1: H100 only) is fitted on the other GPU's rows of its engine, other versions priced
  with this profile (:func:`donor_rows`), so that its figure is cross-GPU and cross-version (conservative);
* **joint**: fitted on both GPUs' rows (the issue's "once per engine version, jointly on both GPUs"), each GPU's
  rows weighted to half the total (``cross_gpu_fit.gpu_balanced_weights``): what the shipped profiles carry since
  issue #23 item 2 (``benchmarks/fit_shipped_profile.py``);
* **leave one model out** / **leave one engine version out**: fitted on both GPUs' rows but one model's (one
  version's), weighted as the joint fit, scored on those held out; versions only where the profile's rows span
  several;
* **without a term**: the cross-GPU fits again with one term held at its unfitted value
  (``cross_gpu_fit.UNFITTED``), the others refitted;
* **shipped** (the profiles as they are) and **no fitted term** (every fitted term at its unfitted value).

Writes the block between the ``BEGIN``/``END`` markers of ``docs/cross_gpu_accuracy.md`` (the hand-written findings
outside it are kept): per engine and mode (dense, MoE, disaggregated) the median and P90 absolute error and the signed
median of TPOT and TTFT, in-sample beside cross-GPU; the fitted terms with their values across the fits and the
cross-GPU error without each; and ``pdplan/data/cross_gpu_error.yaml``, the bands every report prints
(``cross_gpu_report.error_yaml``: per engine, mode and predicted GPU the cross-GPU median / P90 |error| and signed
median, and the engine versions, model families and GPUs the rows cover). ``--yaml-only`` runs only the fits that
file needs (in-sample and cross-GPU, as the gate) and writes only it. ``--gate FILE`` writes the figures the CI gate
compares against instead (``tests/reference/test_cross_gpu_accuracy.py``). ``--profiles P --reuse FILE`` reruns
only the profiles P and takes every other profile's run from ``FILE`` (pickled by ``--save`` on an earlier tree):
for a change that moves one profile's rows only, as a profile's fits use its own rows alone; the rows left out are
this run's, and the header names both. With ``--yaml-only`` as well it rewrites §1, §2 and §7 of the document (the
sections those fits fill) and says that §3 to §6 are the last whole run's.
Run: ``python benchmarks/cross_gpu_accuracy.py [--workers N]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from cross_gpu_fit import FITTED, UNFITTED, Fit, fit, gpu_balanced_weights, linearise
from cross_gpu_rows import SILICON, PricePool, read_gpu, why_not
from data_root import calibration_path

from pdplan.calibrate import benchmarks as cb
from pdplan.io.catalog import Catalog, open_catalog

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cross_gpu_accuracy.md"
GPUS = ("h100", "h200")


@dataclass
class ProfileRun:
    """One profile's rows, their measurements, the held-out predictions of every experiment and every fit's terms."""

    profile: str
    rows: list[dict[str, Any]]
    meas_ttft: np.ndarray
    meas_tpot: np.ndarray
    preds: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Experiment → (TTFT, TPOT) ms per row, NaN where the experiment predicts no held-out value for the row."""
    thetas: dict[str, dict[str, float]] = field(default_factory=dict)
    frozen: dict[str, frozenset[str]] = field(default_factory=dict)
    removed: tuple[str, ...] = ()
    """The terms whose removal does not worsen the cross-GPU error (:func:`removal_candidates`)."""
    donor_gpu: str | None = None
    """Where the profile's rows lie on one GPU: the other GPU, whose rows of other versions of the engine its
    cross-GPU fit was trained on (:func:`donor_rows`); None otherwise."""
    donor_versions: tuple[str, ...] = ()
    """The engine versions of those donor rows."""


HELPS_POINTS = 0.5
"""A term helps when holding it at its unfitted value worsens the cross-GPU median |error| of TPOT or TTFT, pooled over
both directions on the profile's rows, by more than this many points (smaller moves are within a refit's noise)."""


def _pooled_median(run: ProfileRun, label: str, metric: str) -> float:
    pred = run.preds[label][0 if metric == "ttft" else 1]
    meas = run.meas_ttft if metric == "ttft" else run.meas_tpot
    e = np.abs(pred / meas - 1.0) * 100.0
    e = e[np.isfinite(e)]
    return float(np.median(e)) if e.size else float("nan")


def removal_candidates(run: ProfileRun, terms: tuple[str, ...]) -> tuple[str, ...]:
    """The fitted terms that do not help the cross-GPU error (:data:`HELPS_POINTS`), removed together in the
    "reduced" fits (each one alone in the "without" fits); none where the profile's rows lie on one GPU (no
    cross-GPU prediction to judge by)."""
    if not np.isfinite(run.preds["cross"][1]).any():
        return ()
    out = []
    for t in terms:
        worse = [
            _pooled_median(run, f"cross without {t}", k) - _pooled_median(run, "cross", k) for k in ("tpot", "ttft")
        ]
        if max(worse) <= HELPS_POINTS:
            out.append(t)
    return tuple(out)


class Pricer:
    """Terms → exact predictions of one profile's rows, each trial profile written to its own YAML file."""

    def __init__(self, base: Any, rows: list[dict[str, Any]], pool: PricePool, folder: Path) -> None:
        self.base, self.rows, self.pool, self.folder, self.count, self.priced = base, rows, pool, folder, 0, 0

    def __call__(self, terms: Mapping[str, float], mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        self.count += 1
        path = self.folder / f"{self.base.name}-trial-{self.count}.yaml"
        path.write_text(cb.profile_yaml(cb.with_terms(self.base, terms)))
        idx = np.arange(len(self.rows)) if mask is None else np.flatnonzero(mask)
        self.priced += idx.size
        ttft, tpot = np.full(len(self.rows), np.nan), np.full(len(self.rows), np.nan)
        ttft[idx], tpot[idx] = self.pool([self.rows[i] for i in idx], str(path))
        return ttft, tpot


def _held(fits: Mapping[str, Fit], key: np.ndarray, label: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the prediction of the fit named ``label + key[row]`` (NaN where there is no such fit)."""
    ttft, tpot = np.full(key.size, np.nan), np.full(key.size, np.nan)
    for value in np.unique(key):
        f = fits.get(f"{label}{value}")
        if f is not None:
            mask = key == value
            ttft[mask], tpot[mask] = f.ttft_ms[mask], f.tpot_ms[mask]
    return ttft, tpot


def donor_rows(profile: str, by_profile: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """For a profile whose rows lie on one GPU, the other GPU's rows of the same engine (other profiles' rows, so
    other engine versions), on which its cross-GPU fit is trained: the profile's terms fitted there, the rows priced
    with this profile, its own GPU's rows predicted. The figure is then cross-GPU and cross-version, which can only
    add error (conservative). Empty where the profile's rows span both GPUs. (SGLang 0.5.1.post1: its 78 rows are
    H100 only since issue #23 item 3 split off ``sglang-0.5.9``; as before the split, its terms are fitted on the
    SGLang H200 rows, now 0.5.6.post2 to 0.5.9.)"""
    own = by_profile[profile]
    gpus = {r["gpu"] for r in own}
    engines = {r["engine"] for r in own}
    if len(gpus) != 1:
        return []
    return [
        r
        for p, rows in by_profile.items()
        if p != profile
        for r in rows
        if r["engine"] in engines and r["gpu"] not in gpus
    ]


def _experiments(
    rows: list[dict[str, Any]], terms: tuple[str, ...], full: bool, own: np.ndarray
) -> list[tuple[str, np.ndarray, dict[str, float], bool]]:
    """(label, training rows, terms held fixed, whether only the held-out rows need predicting) of every fit;
    ``own`` masks the profile's own rows (the rest are donor rows, :func:`donor_rows`, trained on by the fits of
    their GPU alone)."""
    gpu = np.array([r["gpu"] for r in rows])
    out = [(f"fit {g}", gpu == g, {}, False) for g in GPUS]
    if not full:
        return out
    out.append(("joint", own.copy(), {}, False))
    for key, label in (("model", "lomo"), ("version", "lovo")):
        values = np.array([r[key] for r in rows])
        if key == "version" and np.unique(values[own]).size < 2:
            continue
        out += [(f"{label} {v}", (values != v) & own, {}, True) for v in np.unique(values[own])]
    out += [(f"without {t} fit {g}", gpu == g, {t: UNFITTED[t]}, False) for t in terms for g in GPUS]
    return out


def _held_out(fits: Mapping[str, Fit], rows: list[dict[str, Any]], terms: tuple[str, ...]) -> dict[str, Any]:
    """Each experiment's held-out predictions per row (module docstring)."""
    gpu = np.array([r["gpu"] for r in rows])
    other = np.where(gpu == "h100", "h200", "h100")
    preds = {
        "in-sample": _held(fits, gpu, "fit "),
        "cross": _held(fits, other, "fit "),
        "lomo": _held(fits, np.array([r["model"] for r in rows]), "lomo "),
        "lovo": _held(fits, np.array([r["version"] for r in rows]), "lovo "),
        **{f"cross without {t}": _held(fits, other, f"without {t} fit ") for t in terms},
        **{f"in-sample without {t}": _held(fits, gpu, f"without {t} fit ") for t in terms},
    }
    for label in ("shipped", "none", "joint"):
        if label in fits:
            preds[label] = (fits[label].ttft_ms, fits[label].tpot_ms)
    return preds


def run_profile(
    profile: str,
    rows: list[dict[str, Any]],
    pool: PricePool,
    catalog: Catalog,
    tmp: Path,
    *,
    full: bool = True,
    donors: list[dict[str, Any]] | None = None,
) -> ProfileRun:
    """Every experiment of the module docstring for one profile (``full`` False: the in-sample and cross-GPU fits
    only, as the CI gate runs them); ``donors`` (:func:`donor_rows`) are trained on by the fits of their GPU and
    left out of the result, whose rows are the profile's own."""
    run = _run_all(profile, rows + list(donors or []), pool, catalog, tmp, full=full)
    if not donors:
        return run
    keep = np.arange(len(rows))
    run.preds = {k: (t[keep], p[keep]) for k, (t, p) in run.preds.items()}
    run.rows, run.meas_ttft, run.meas_tpot = rows, run.meas_ttft[keep], run.meas_tpot[keep]
    run.donor_gpu = str(donors[0]["gpu"])
    run.donor_versions = tuple(sorted({str(r["version"]) for r in donors}))
    return run


def _run_all(
    profile: str, rows: list[dict[str, Any]], pool: PricePool, catalog: Catalog, tmp: Path, *, full: bool
) -> ProfileRun:
    """:func:`run_profile` on ``rows``, the profile's own rows first and any donor rows after them."""
    t0 = time.perf_counter()
    base = catalog.engine(profile)
    terms = FITTED[profile]
    own = np.array([r["profile"] == profile for r in rows])
    run = ProfileRun(profile, rows, np.array([r["ttft_ms"] for r in rows]), np.array([r["tpot_ms"] for r in rows]))
    price = Pricer(base, rows, pool, tmp)
    lin = linearise(price, {k: cb.term_value(base, k) for k in terms})
    fits: dict[str, Fit] = {"shipped": Fit(dict(lin.theta0), frozenset(), lin.ttft_ms, lin.tpot_ms)}
    if full:
        none = {k: UNFITTED[k] for k in terms}
        fits["none"] = Fit(none, frozenset(), *price(none, own))
    gpu = np.array([r["gpu"] for r in rows])
    for label, train, fixed, held in _experiments(rows, terms, full, own):
        if train.sum() >= len(terms):
            need = ~train & own if held else own
            weights = gpu_balanced_weights(gpu, train)
            fits[label] = fit(lin, price, run.meas_ttft, run.meas_tpot, train, fixed=fixed, need=need, weights=weights)
    run.preds = {
        k: (np.where(own, t, np.nan), np.where(own, p, np.nan)) for k, (t, p) in _held_out(fits, rows, terms).items()
    }
    if full:
        run.removed = removal_candidates(run, terms)
        for g in GPUS:
            if (gpu == g).sum() < len(terms):
                continue  # no rows on this GPU to fit on (a profile of one GPU's rows)
            fixed = {t: UNFITTED[t] for t in run.removed}
            fits[f"reduced fit {g}"] = fit(lin, price, run.meas_ttft, run.meas_tpot, gpu == g, fixed=fixed, need=own)
        other = np.where(gpu == "h100", "h200", "h100")
        for label, key in (("cross reduced", other), ("in-sample reduced", gpu)):
            ttft, tpot = _held(fits, key, "reduced fit ")
            run.preds[label] = (np.where(own, ttft, np.nan), np.where(own, tpot, np.nan))
    run.thetas = {k: f.theta for k, f in fits.items()}
    run.frozen = {k: f.frozen for k, f in fits.items()}
    seconds = time.perf_counter() - t0
    print(
        f"{profile}: {len(rows)} rows, {len(fits)} fits, {price.priced} rows priced, {seconds:.0f} s", file=sys.stderr
    )
    return run


def load_rows(
    catalog: Catalog, pool: PricePool, every: int = 1
) -> tuple[dict[str, list[dict[str, Any]]], list[tuple[dict[str, Any], str]]]:
    """Rows by profile (every ``every``-th row of each GPU that its shipped profile can price) and the rows left out
    with the reason."""
    by_profile: dict[str, list[dict[str, Any]]] = {}
    left: list[tuple[dict[str, Any], str]] = []
    for g in GPUS:
        rows, skipped = read_gpu(g)
        left += skipped
        rows = rows[::every]
        ttft, _ = pool(rows)
        for r, t in zip(rows, ttft, strict=True):
            if not np.isfinite(t):
                left.append((r, why_not(r, catalog) or "non-finite prediction"))
            elif r["profile"] in FITTED:
                by_profile.setdefault(r["profile"], []).append(r)
    return by_profile, left


GATE_EVERY = 16
"""The CI gate prices every 16th row of each GPU (about a tenth of a full run's passes: ~10 s on one core)."""


def gate_run(every: int = GATE_EVERY, workers: int = 1) -> dict[str, dict[str, float]]:
    """The CI gate's figures: the in-sample and cross-GPU fits of every profile on every ``every``-th row
    (``cross_gpu_report.gate_figures``)."""
    from cross_gpu_report import gate_figures

    catalog = open_catalog()
    pool = PricePool(workers)
    try:
        by_profile, _ = load_rows(catalog, pool, every)
        with tempfile.TemporaryDirectory(prefix="pdplan-xgpu-") as tmp:
            runs = [
                run_profile(p, by_profile[p], pool, catalog, Path(tmp), full=False, donors=donor_rows(p, by_profile))
                for p in FITTED
            ]
    finally:
        pool.close()
    return gate_figures(runs)


def data_version() -> str:
    """The data files' names and SHA-256 prefixes."""
    out = []
    for g in GPUS:
        path = calibration_path(SILICON[g][0])
        out.append(f"`{SILICON[g][0]}` sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:12]}")
    return ", ".join(out)


def compute(
    workers: int, every: int, profiles: list[str], full: bool = True
) -> tuple[list[ProfileRun], list[tuple[dict[str, Any], str]], dict[str, Any]]:
    """Every profile's experiments, the rows left out and the document's header (date, command, data, time)."""
    start = time.perf_counter()
    catalog = open_catalog()
    pool = PricePool(workers)
    try:
        by_profile, left = load_rows(catalog, pool, every)
        with tempfile.TemporaryDirectory(prefix="pdplan-xgpu-") as tmp:
            runs = [
                run_profile(p, by_profile[p], pool, catalog, Path(tmp), full=full, donors=donor_rows(p, by_profile))
                for p in profiles
            ]
    finally:
        pool.close()
    command = "python benchmarks/cross_gpu_accuracy.py" + (f" --every {every}" if every > 1 else "")
    command += "" if full else " --yaml-only"
    header = {
        "date": datetime.now(UTC).date().isoformat(),
        "command": command,
        "data": data_version(),
        "seconds": time.perf_counter() - start,
    }
    return runs, left, header


ERROR_YAML = ROOT / "pdplan" / "data" / "cross_gpu_error.yaml"


def write_error_yaml(path: Path, runs: list[ProfileRun], header: Mapping[str, Any]) -> None:
    """The bands file (``cross_gpu_report.error_yaml``), model families and profile versions from the catalogue."""
    from cross_gpu_report import error_yaml

    catalog = open_catalog()
    text = error_yaml(runs, header, lambda name: catalog.model(name).family, lambda p: catalog.engine(p).version)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


def reuse(runs: list[ProfileRun], header: dict[str, Any], path: Path) -> tuple[list[ProfileRun], dict[str, Any]]:
    """This run's profiles and, in :data:`FITTED` order, every other profile's run pickled in ``path`` (``--save``);
    the header's command names the file and its run's date and command."""
    import __main__

    __main__.ProfileRun = ProfileRun  # type: ignore[attr-defined]  # pickles written by the script's own main
    old, _, old_header = pickle.loads(path.read_bytes())
    fresh = {r.profile: r for r in runs}
    merged = [fresh.get(p) or next(r for r in old if r.profile == p) for p in FITTED]
    if set(fresh) - set(FITTED):
        raise SystemExit(f"--reuse: unknown profiles {sorted(set(fresh) - set(FITTED))}")
    kept = ", ".join(p for p in FITTED if p not in fresh)
    command = f"{header['command']} --profiles {','.join(fresh)} --reuse FILE"
    reused = f"{kept} reused from the {old_header['date']} run of {old_header['command']}"
    return merged, {**header, "command": command, "reused": reused}


def main() -> None:
    from cross_gpu_report import write_doc

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--every", type=int, default=1, help="price every k-th row of each GPU (quick look)")
    ap.add_argument("--profiles", default=",".join(FITTED))
    ap.add_argument("--gate", type=Path, help="write the gate's recorded figures (JSON) here instead of the doc")
    ap.add_argument("-o", "--output", type=Path, default=DOC)
    ap.add_argument("--save", type=Path, help="also pickle the runs here (to rewrite the tables with --load)")
    ap.add_argument("--load", type=Path, help="write the tables from runs pickled by --save (no pricing)")
    ap.add_argument(
        "--error-yaml",
        type=Path,
        help="where the bands file goes (default: the packaged one, on a run of "
        "every row of every profile; a partial run writes it only here)",
    )
    ap.add_argument("--yaml-only", action="store_true", help="the in-sample and cross-GPU fits only; the bands file")
    ap.add_argument("--reuse", type=Path, help="take the profiles not in --profiles from runs pickled by --save")
    args = ap.parse_args()
    if args.gate:
        record = {
            "how": f"python benchmarks/cross_gpu_accuracy.py --gate {args.gate.as_posix()} (the vendored slice: "
            "PDPLAN_CALIBRATION_DIR unset)",
            "every": GATE_EVERY,
            "groups": gate_run(),
        }
        args.gate.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return
    if args.load:
        runs, left, header = pickle.loads(args.load.read_bytes())
    else:
        runs, left, header = compute(args.workers, args.every, args.profiles.split(","), full=not args.yaml_only)
    if args.save:
        args.save.write_bytes(pickle.dumps((runs, left, header)))
    if args.reuse:
        runs, header = reuse(runs, header, args.reuse)
    whole = args.every == 1 and {r.profile for r in runs} == set(FITTED)
    if args.error_yaml or whole:
        write_error_yaml(args.error_yaml or ERROR_YAML, runs, header)
    if args.yaml_only and args.reuse:
        from cross_gpu_report import write_partial_doc

        note = (
            "§1, §2 and §7 are this run's (the command above: the rerun profiles' in-sample and cross-GPU fits, the "
            "other profiles' runs reused); §3 to §6 are the last whole run's, from before this run's change (rerun "
            "the script whole to refresh them)."
        )
        write_partial_doc(args.output, runs, left, header, note)
        print(f"wrote §1, §2, §7 of {args.output}", file=sys.stderr)
    if args.yaml_only:
        return
    write_doc(args.output, runs, left, header)
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
