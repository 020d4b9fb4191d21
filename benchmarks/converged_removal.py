"""Settle one fitted term by issue #23's removal rule with fits iterated to convergence (Gauss–Newton).

Issue #23's rule (docs/cross_gpu_accuracy.md §8.4): a fitted end-to-end term is removed (held at its unfitted value,
``cross_gpu_fit.UNFITTED``) when no cross-GPU median |error| of TPOT or TTFT, pooled over both directions on the
profile's rows, worsens by more than ``cross_gpu_accuracy.HELPS_POINTS`` (0.5 point) with the rest refitted.
``benchmarks/cross_gpu_accuracy.py`` refits by chord passes on a Jacobian taken at the shipped values, whose result
depends on that point (TensorRT-LLM ``startup_cohorts``: 26.1 vs 27.0 % TTFT from two points, §8.4); here every fit
is ``cross_gpu_fit.fit_converged`` (the same staged objective, re-linearised until every term moves by less than a
tenth of its 1σ).

The profile's fitted terms are ``cross_gpu_fit.FITTED``'s and the term (added back, free, where the profile has
removed it: the check reruns from the shipped profile either way). Rows: the profile's rows of AIConfigurator
0.12.0's end-to-end sample, H100 and H200 (``benchmarks/cross_gpu_accuracy.load_rows``; the rows of
``cross_gpu_accuracy.py``). Fits, on each GPU's rows:
*with* every fitted term free, *without* the term held at its unfitted value; each from two starts, the shipped
values (start A) and the other fit's converged values (start B: *without*'s terms for *with*, the term at its
unfitted value; *with*'s terms for *without*, the term then held at it), so that each fit is reached from a point
that keeps the term and from one that does not. Then the *joint* fit (both GPUs' rows, each GPU weighted to
half, ``cross_gpu_fit.gpu_balanced_weights``; ``benchmarks/fit_shipped_profile.py``'s objective) from the shipped
values, scored against the H100 fit by ``fit_shipped_profile``'s rule (GPU-balanced in-sample median |error|) and per
GPU.

Prints every fit's terms, 1σ, linearisations and whether it converged; how far start B landed from start A (in σ and
in median points); the cross-GPU medians with → without, pooled and per mode; the rule's verdict. Run:
``python benchmarks/converged_removal.py --profile trtllm --term startup_cohorts [--workers 2] [--json FILE]``
(TensorRT-LLM: about 40 exact passes over each GPU's rows; half an hour on two cores).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cross_gpu_accuracy import GPUS, HELPS_POINTS, Pricer, load_rows
from cross_gpu_fit import FITTED, UNFITTED, Converged, Fit, fit_converged, gpu_balanced_weights
from cross_gpu_rows import PricePool
from fit_shipped_profile import balanced_median

from pdplan.calibrate import benchmarks as cb
from pdplan.io.catalog import open_catalog


def median_abs(pred: np.ndarray, meas: np.ndarray, mask: np.ndarray) -> float:
    """Median |pred/meas − 1| in % over the finite rows of ``mask``."""
    e = np.abs(pred[mask] / meas[mask] - 1.0) * 100.0
    e = e[np.isfinite(e)]
    return float(np.median(e)) if e.size else float("nan")


def cross(fits: Mapping[str, Converged], gpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the (TTFT, TPOT) of the fit on the other GPU's rows."""
    ttft, tpot = np.full(gpu.size, np.nan), np.full(gpu.size, np.nan)
    for g in GPUS:
        other = next(h for h in GPUS if h != g)
        mask = gpu == g
        ttft[mask], tpot[mask] = fits[other].fit.ttft_ms[mask], fits[other].fit.tpot_ms[mask]
    return ttft, tpot


def groups(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Pooled, per mode, per GPU and per mode on each GPU (non-empty)."""
    gpu = np.array([r["gpu"] for r in rows])
    kind = np.array([r["kind"] for r in rows])
    out = {"pooled": np.ones(len(rows), bool), **{f"on {g}": gpu == g for g in GPUS}}
    for m in sorted(set(kind)):
        out[m] = kind == m
        out.update({f"{m} on {g}": (kind == m) & (gpu == g) for g in GPUS})
    return {k: v for k, v in out.items() if v.any()}


def _fmt(terms: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" if k == "startup_cohorts" else f"{k} {v * 1e3:.4g} ms" for k, v in terms.items())


def describe(label: str, c: Converged) -> str:
    sig = ", ".join(f"{k} ±{v:.3g}" if k == "startup_cohorts" else f"{k} ±{v * 1e3:.3g} ms" for k, v in c.std.items())
    state = "converged" if c.converged else "NOT converged"
    return f"{label}: {_fmt(c.fit.theta)} (1σ {sig}); {len(c.path)} linearisations, {state}"


def distance(a: Converged, b: Converged) -> float:
    """Largest |Δterm| between two fits in units of the larger 1σ of the two."""
    return max(
        (abs(a.fit.theta[k] - b.fit.theta[k]) / max(a.std.get(k, 0.0), b.std.get(k, 0.0), 1e-12) for k in a.std),
        default=0.0,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="trtllm")
    ap.add_argument("--term", default="startup_cohorts")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write every fit's terms and the medians here")
    ap.add_argument("--no-joint", action="store_true", help="skip the joint fit")
    ap.add_argument("--every", type=int, default=1, help="every k-th row of each GPU (a quick look)")
    args = ap.parse_args()
    catalog = open_catalog()
    pool = PricePool(args.workers)
    record: dict[str, Any] = {"profile": args.profile, "term": args.term, "fits": {}}
    try:
        by_profile, _ = load_rows(catalog, pool, args.every)
        rows = by_profile[args.profile]
        base = catalog.engine(args.profile)
        terms = FITTED[args.profile] + (() if args.term in FITTED[args.profile] else (args.term,))
        shipped = {k: cb.term_value(base, k) for k in terms}
        gpu = np.array([r["gpu"] for r in rows])
        meas_ttft = np.array([r["ttft_ms"] for r in rows])
        meas_tpot = np.array([r["tpot_ms"] for r in rows])
        every = np.ones(len(rows), bool)
        print(f"{args.profile}: {len(rows)} rows ({', '.join(f'{g} {int((gpu == g).sum())}' for g in GPUS)})")
        print(f"shipped: {_fmt(shipped)}", flush=True)
        with tempfile.TemporaryDirectory(prefix="pdplan-converged-") as tmp:
            price = Pricer(base, rows, pool, Path(tmp))
            held = {args.term: UNFITTED[args.term]}
            fits: dict[str, dict[str, Converged]] = {}

            def run(label: str, g: str, start: Mapping[str, float], fixed: Mapping[str, float]) -> Converged:
                train = gpu == g
                w = gpu_balanced_weights(gpu, train)
                c = fit_converged(price, start, meas_ttft, meas_tpot, train, fixed=fixed, need=every, weights=w)
                fits.setdefault(label, {})[g] = c
                print(describe(f"{label} on {g}", c), flush=True)
                record["fits"][f"{label} {g}"] = {
                    "theta": c.fit.theta,
                    "std": c.std,
                    "linearisations": len(c.path),
                    "converged": c.converged,
                    "path": list(c.path),
                }
                return c

            for g in GPUS:
                run("with A", g, shipped, {})
                run("without A", g, shipped, held)
                run("with B", g, {**fits["without A"][g].fit.theta, **held}, {})
                run("without B", g, fits["with A"][g].fit.theta, held)
            print(f"passes so far: {price.count}, rows priced {price.priced}", flush=True)
            report(rows, fits, meas_ttft, meas_tpot, record)
            if not args.no_joint:
                for label, fixed in (("with", {}), ("without", held)):
                    h100 = fits[f"{label} A"]["h100"].fit
                    joint_vs_h100(price, rows, shipped, h100, meas_ttft, meas_tpot, record, label, fixed)
    finally:
        pool.close()
    if args.json:
        args.json.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def report(
    rows: list[dict[str, Any]],
    fits: Mapping[str, Mapping[str, Converged]],
    meas_ttft: np.ndarray,
    meas_tpot: np.ndarray,
    record: dict[str, Any],
) -> None:
    """Start agreement, the cross-GPU medians with → without and the rule's verdict."""
    gpu = np.array([r["gpu"] for r in rows])
    for cfg in ("with", "without"):
        for g in GPUS:
            a, b = fits[f"{cfg} A"][g], fits[f"{cfg} B"][g]
            print(f"{cfg} on {g}: start B lands {distance(a, b):.2f} σ from start A")
    medians: dict[str, dict[str, list[float]]] = {}
    for label in ("with A", "without A", "with B", "without B"):
        ttft, tpot = cross(fits[label], gpu)
        medians[label] = {
            name: [median_abs(tpot, meas_tpot, m), median_abs(ttft, meas_ttft, m)] for name, m in groups(rows).items()
        }
    record["cross_gpu_medians"] = medians
    print("cross-GPU median |err| TPOT / TTFT %: with -> without (start A) | with -> without (start B)")
    for name in medians["with A"]:
        cells = []
        for s in ("A", "B"):
            w, o = medians[f"with {s}"][name], medians[f"without {s}"][name]
            cells.append(f"{w[0]:.1f} / {w[1]:.1f} -> {o[0]:.1f} / {o[1]:.1f}")
        n = int(groups(rows)[name].sum())
        print(f"  {name} ({n} rows): {' | '.join(cells)}")
    for s in ("A", "B"):
        w, o = medians[f"with {s}"]["pooled"], medians[f"without {s}"]["pooled"]
        worse = max(o[0] - w[0], o[1] - w[1])
        verdict = "remove" if worse <= HELPS_POINTS else "keep"
        record[f"verdict {s}"] = verdict
        print(f"rule (start {s}): without the term the pooled medians worsen by at most {worse:+.2f} points: {verdict}")


def joint_vs_h100(
    price: Pricer,
    rows: list[dict[str, Any]],
    shipped: Mapping[str, float],
    h100: Fit,
    meas_ttft: np.ndarray,
    meas_tpot: np.ndarray,
    record: dict[str, Any],
    label: str,
    fixed: Mapping[str, float],
) -> None:
    """The converged joint fit (``fixed`` terms held, the rest free, from the shipped values) against the converged
    H100 fit ``h100`` of the same terms, per GPU, pooled and GPU-balanced (``fit_shipped_profile``'s rule)."""
    gpu = np.array([r["gpu"] for r in rows])
    every = np.ones(len(rows), bool)
    w = gpu_balanced_weights(gpu, every)
    joint = fit_converged(price, shipped, meas_ttft, meas_tpot, every, fixed=fixed, need=every, weights=w)
    print(describe(f"joint {label} (both GPUs, balanced)", joint), flush=True)
    record.setdefault("fits", {})[f"joint {label}"] = {
        "theta": joint.fit.theta,
        "std": joint.std,
        "converged": joint.converged,
    }
    out = {}
    for label, f in (("h100 fit", h100), ("joint fit", joint.fit)):
        cells = {}
        for metric, pred, meas in (("tpot", f.tpot_ms, meas_tpot), ("ttft", f.ttft_ms, meas_ttft)):
            per = {g: median_abs(pred, meas, gpu == g) for g in GPUS}
            cells[metric] = {
                **per,
                "pooled": median_abs(pred, meas, every),
                "balanced": balanced_median(pred, meas, gpu),
            }
        out[label] = cells
        print(
            f"  {label}: "
            + "; ".join(f"{m.upper()} " + ", ".join(f"{k} {v:.1f}" for k, v in c.items()) for m, c in cells.items())
        )
    record[f"joint_vs_h100 {label}"] = out
    worse = [
        m for m in ("tpot", "ttft") if out["joint fit"][m]["balanced"] - out["h100 fit"][m]["balanced"] > HELPS_POINTS
    ]
    print(
        f"  fit_shipped_profile's rule: {'joint refused, worsens ' + ', '.join(worse) if worse else 'joint accepted'}"
    )


if __name__ == "__main__":
    main()
