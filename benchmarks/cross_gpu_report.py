"""Markdown tables and gate figures of ``benchmarks/cross_gpu_accuracy.py`` (its docstring gives the method).

Errors are predicted/measured − 1 in %; a cell ``a / b / c`` is the median absolute error, the P90 absolute error
and the signed median over the rows of its group. Targets (issue #23, "Done when"): fitted on one GPU and predicting
the other, dense rows TPOT ≤ 10 % and TTFT ≤ 25 % median absolute error per engine, MoE and disaggregated rows
≤ 15 % / 30 %.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from cross_gpu_fit import FITTED, MEANING, UNFITTED

BEGIN, END = "<!-- BEGIN cross_gpu_accuracy -->", "<!-- END cross_gpu_accuracy -->"
TARGETS: Mapping[str, tuple[float, float]] = {"dense": (10.0, 25.0), "moe": (15.0, 30.0), "disagg": (15.0, 30.0)}
"""Mode → (TPOT, TTFT) median |error| targets, % (issue #23)."""
MODES = ("dense", "moe", "disagg")
REGIMES: Mapping[str, int] = {"vllm": 1, "vllm-0.18": 1, "sglang": 0, "sglang-0.5.9": 0, "trtllm": 1}
"""Regimes chosen on the H100 rows besides the fitted numbers (``steady_arrivals: spread``; cross_gpu_fit)."""


class Flat:
    """Every profile's rows side by side, with each experiment's predictions as whole-length arrays."""

    def __init__(self, runs: list[Any]) -> None:
        self.rows = [r for run in runs for r in run.rows]
        self.meas = {
            "ttft": np.concatenate([run.meas_ttft for run in runs]),
            "tpot": np.concatenate([run.meas_tpot for run in runs]),
        }
        labels = {k for run in runs for k in run.preds}
        self.preds: dict[str, dict[str, np.ndarray]] = {}
        for label in labels:
            parts = [run.preds.get(label, (np.full(len(run.rows), np.nan),) * 2) for run in runs]
            self.preds[label] = {
                "ttft": np.concatenate([p[0] for p in parts]),
                "tpot": np.concatenate([p[1] for p in parts]),
            }

    def errors(self, label: str, metric: str, mask: np.ndarray) -> np.ndarray:
        """Finite % errors of experiment ``label`` on the masked rows (none for an experiment not run)."""
        if label not in self.preds:
            return np.empty(0)
        e = (self.preds[label][metric][mask] / self.meas[metric][mask] - 1.0) * 100.0
        return np.asarray(e[np.isfinite(e)])

    def keys(self, key: Callable[[dict[str, Any]], str]) -> np.ndarray:
        """``key`` of every row (compare with ``==`` for a group's mask)."""
        return np.array([key(r) for r in self.rows], dtype=object)


def stats(e: np.ndarray) -> tuple[int, float, float, float]:
    """(rows, median |error|, P90 |error|, signed median)."""
    if e.size == 0:
        return 0, float("nan"), float("nan"), float("nan")
    return int(e.size), float(np.median(np.abs(e))), float(np.percentile(np.abs(e), 90)), float(np.median(e))


def cell(e: np.ndarray) -> str:
    n, med, p90, signed = stats(e)
    return "–" if n == 0 else f"{med:.1f} / {p90:.1f} / {signed:+.1f}"


def _engine(r: dict[str, Any]) -> str:
    return str(r["engine"])


def _mode_order(key: str) -> tuple[str, int, str]:
    engine, mode, extra = key.split("|")
    return engine, MODES.index(mode), extra


def _met(mode: str, tpot: np.ndarray, ttft: np.ndarray) -> str:
    goal = TARGETS[mode]
    if tpot.size == 0:
        return "–"
    ok = [name for name, e, t in (("TPOT", tpot, goal[0]), ("TTFT", ttft, goal[1])) if stats(e)[1] <= t]
    return " ".join(ok) or "none"


def main_table(flat: Flat, split: Callable[[dict[str, Any]], str] | None = None) -> list[str]:
    """Per engine and mode (and ``split``): in-sample beside cross-GPU for TPOT and TTFT, the shipped profiles'."""
    lines = [
        "| group | rows | TPOT in-sample | TPOT cross-GPU | TTFT in-sample | TTFT cross-GPU | shipped TPOT / TTFT "
        "| targets met (cross-GPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    group = flat.keys(lambda r: f"{_engine(r)}|{r['kind']}|{split(r) if split else ''}")
    for key in sorted(set(group), key=_mode_order):
        engine, mode, extra = key.split("|")
        m = group == key
        cross = {k: flat.errors("cross", k, m) for k in ("tpot", "ttft")}
        shipped = [stats(flat.errors("shipped", k, m))[1] for k in ("tpot", "ttft")]
        name = f"{engine} {mode}" + (f" {extra}" if extra else "")
        lines.append(
            f"| {name} | {cross['tpot'].size} | {cell(flat.errors('in-sample', 'tpot', m))} | {cell(cross['tpot'])} | "
            f"{cell(flat.errors('in-sample', 'ttft', m))} | {cell(cross['ttft'])} | {shipped[0]:.1f} / {shipped[1]:.1f}"
            f" | {_met(mode, cross['tpot'], cross['ttft'])} |"
        )
    return [*lines, ""]


def held_table(flat: Flat) -> list[str]:
    """Leave-one-model-out and leave-one-version-out beside the joint fit, per engine and mode."""
    lines = [
        "| group | rows | TPOT joint fit | TPOT one model out | TPOT one version out | TTFT joint fit | "
        "TTFT one model out | TTFT one version out |",
        "|---|---|---|---|---|---|---|---|",
    ]
    group = flat.keys(lambda r: f"{_engine(r)}|{r['kind']}|")
    for key in sorted(set(group), key=_mode_order):
        m = group == key
        cells = [cell(flat.errors(lab, k, m)) for k in ("tpot", "ttft") for lab in ("joint", "lomo", "lovo")]
        lines.append(f"| {' '.join(key.split('|')[:2])} | {int(m.sum())} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _group_key(r: dict[str, Any]) -> str:
    return f"{r['engine']} {r['version']} {r['model']} {r['kind']} ({r['harness']})"


def matched_table(flat: Flat) -> list[str]:
    """Rows of an engine version and harness measured on both GPUs (the GPU is the only change)."""
    version = flat.keys(lambda r: f"{r['engine']} {r['version']} ({r['harness']})")
    gpu = flat.keys(lambda r: str(r["gpu"]))
    keep = sorted(v for v in set(version) if len(set(gpu[version == v])) == 2)
    lines = [
        "| engine version (harness) | GPU | rows | models | TPOT in-sample | TPOT cross-GPU | TTFT in-sample | "
        "TTFT cross-GPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in keep:
        for g in ("h100", "h200"):
            m = (version == v) & (gpu == g)
            models = ", ".join(sorted({r["model"] for r, x in zip(flat.rows, m, strict=True) if x}))
            cells = [cell(flat.errors(lab, k, m)) for k in ("tpot", "ttft") for lab in ("in-sample", "cross")]
            lines.append(f"| {v} | {g} | {int(m.sum())} | {models} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _config(r: dict[str, Any]) -> str:
    """A row's configuration but for the GPU (engine version, model, deployment, lengths, concurrency)."""
    roles = [f"{side}{r[side]}" for side in ("prefill", "decode") if side in r]
    shape = roles or [f"tp{r.get('tp')} ep{r.get('ep', 1)} dp{r.get('dp', 1)}"]
    lengths = f"{r['isl']}/{r['osl']} C{r['concurrency']}"
    return f"{r['engine']} {r['version']} {r['model']} {r['kind']} {' '.join(shape)} {lengths}"


def pairs_table(flat: Flat) -> list[str]:
    """Configurations measured on both GPUs: the measured H100/H200 ratio of TPOT and TTFT against pdplan's (shipped
    profile; every fitted term at its unfitted value), medians over the configurations of a group (a configuration
    measured more than once: its median)."""
    config = flat.keys(_config)
    gpu = flat.keys(lambda r: str(r["gpu"]))
    group = flat.keys(lambda r: f"{r['engine']} {r['version']} {r['model']} {r['kind']}")
    ratios: dict[str, list[list[float]]] = {}
    for c in sorted(set(config)):
        at = {g: (config == c) & (gpu == g) for g in ("h100", "h200")}
        if not (at["h100"].any() and at["h200"].any()):
            continue
        vals = []
        for metric in ("tpot", "ttft"):
            for source in ("meas", "shipped", "none"):
                arr = flat.meas[metric] if source == "meas" else flat.preds.get(source, {}).get(metric)
                if arr is None:
                    vals.append(float("nan"))
                    continue
                vals.append(float(np.median(arr[at["h100"]]) / np.median(arr[at["h200"]])))
        ratios.setdefault(str(group[config == c][0]), []).append(vals)
    lines = [
        "| engine version model mode | configurations | TPOT H100/H200 measured | shipped | no fitted term | "
        "TTFT H100/H200 measured | shipped | no fitted term |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in sorted(ratios.items()):
        med = np.nanmedian(np.array(rows), axis=0)
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(f"{v:.2f}" for v in med) + " |")
    return [*lines, ""]


def detail_table(flat: Flat) -> list[str]:
    """Per engine version, model, mode, harness and GPU: signed medians under every fit (where the error sits)."""
    lines = [
        "| group | GPU | rows | shipped TPOT / TTFT | no fitted term | in-sample | cross-GPU |",
        "|---|---|---|---|---|---|---|",
    ]
    group = flat.keys(lambda r: f"{_group_key(r)} | {r['gpu']}")
    for key in sorted(set(group)):
        m = group == key
        cells = []
        for lab in ("shipped", "none", "in-sample", "cross"):
            tp, tt = stats(flat.errors(lab, "tpot", m))[3], stats(flat.errors(lab, "ttft", m))[3]
            cells.append("–" if np.isnan(tp) else f"{tp:+.0f} / {tt:+.0f}")
        lines.append(f"| {key} | {int(m.sum())} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _fmt(name: str, value: float) -> str:
    """A term's value for the table: cohorts to two decimals; seconds as ms or µs, below 0.01 µs as 0 (a bound)."""
    if name == "startup_cohorts":
        return f"{value:.2f}"
    if value < 1e-8:
        return "0"
    return f"{value * 1e3:.3g} ms" if value >= 1e-4 else f"{value * 1e6:.3g} µs"


def _verdict(with_: list[float], without: list[float]) -> str:
    """What removing the term does to the pooled cross-GPU medians (TPOT, TTFT): a move of at most 0.5 points
    (``cross_gpu_accuracy.HELPS_POINTS``) is none."""
    parts = []
    for name, a, b in zip(("TPOT", "TTFT"), with_, without, strict=True):
        if b - a > 0.5:
            parts.append(f"helps {name} ({b - a:.1f})")
        elif a - b > 0.5:
            parts.append(f"hurts {name} ({a - b:.1f})")
    return "; ".join(parts) or "no effect (both within 0.5)"


def _pair(medians: list[float]) -> str:
    """TPOT / TTFT medians, or – where a profile's rows have no such prediction (one GPU: no cross-GPU fit)."""
    return "–" if not np.isfinite(medians).all() else f"{medians[0]:.1f} / {medians[1]:.1f}"


def term_rows(run: Any, flat_run: Flat) -> list[str]:
    """One profile's fitted terms: values across the fits, cross-GPU and in-sample error with and without each."""
    out = []
    everything = np.ones(len(run.rows), bool)
    with_cross = [stats(flat_run.errors("cross", k, everything))[1] for k in ("tpot", "ttft")]
    with_in = [stats(flat_run.errors("in-sample", k, everything))[1] for k in ("tpot", "ttft")]
    for t in FITTED[run.profile]:
        values = [
            th[t]
            for lab, th in run.thetas.items()
            if lab not in ("shipped", "none")
            and not lab.startswith(("without", "reduced"))
            and t not in run.frozen[lab]
        ]
        spread = f"{_fmt(t, min(values))} – {_fmt(t, max(values))} ({len(values)} fits)" if values else "–"
        fits = [run.thetas.get(lab, {}).get(t) for lab in ("fit h100", "fit h200", "joint")]
        shown = " / ".join("–" if v is None else _fmt(t, v) for v in fits)
        w_cross = [stats(flat_run.errors(f"cross without {t}", k, everything))[1] for k in ("tpot", "ttft")]
        w_in = [stats(flat_run.errors(f"in-sample without {t}", k, everything))[1] for k in ("tpot", "ttft")]
        verdict = _verdict(with_cross, w_cross) if np.isfinite(with_cross).all() else "no cross-GPU rows (one GPU)"
        out.append(
            f"| {run.profile} | `{t}` | {MEANING[t]} | {_fmt(t, run.thetas['shipped'][t])} | {shown} | {spread} | "
            f"{_pair(with_cross)} → {_pair(w_cross)} | "
            f"{with_in[0]:.1f} / {with_in[1]:.1f} → {w_in[0]:.1f} / {w_in[1]:.1f} | {verdict} |"
        )
    return out


def term_table(runs: list[Any]) -> list[str]:
    lines = [
        "| profile | term | stands for | shipped | fitted H100 / H200 / joint | "
        "range over the fits (all terms free: one GPU, joint, folds) | "
        "cross-GPU TPOT / TTFT median \\|err\\| % with → without | in-sample with → without | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        lines += term_rows(run, Flat([run]))
    counts = ", ".join(f"{run.profile} {len(FITTED[run.profile])} (+{REGIMES[run.profile]} regime)" for run in runs)
    return [*lines, "", f"Fitted end-to-end terms per shipped profile: {counts}.", "", *reduced_table(runs)]


def reduced_table(runs: list[Any]) -> list[str]:
    """Every term that does not help removed at once, the rest refitted: cross-GPU and in-sample error before/after."""
    lines = [
        "Every term whose removal alone does not worsen the cross-GPU TPOT or TTFT median by more than 0.5 points, "
        "removed together, the others refitted (\\|error\\| medians / P90 / signed, pooled over the profile's rows):",
        "",
        "| profile | terms now | removed | terms after | TPOT cross-GPU now → after | TTFT cross-GPU now → after | "
        "TPOT in-sample now → after | TTFT in-sample now → after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        if "cross reduced" not in run.preds:
            continue
        flat, every = Flat([run]), np.ones(len(run.rows), bool)
        cells = [
            f"{cell(flat.errors(a, k, every))} → {cell(flat.errors(b, k, every))}"
            for a, b in (("cross", "cross reduced"), ("in-sample", "in-sample reduced"))
            for k in ("tpot", "ttft")
        ]
        n = len(FITTED[run.profile])
        removed = ", ".join(f"`{t}`" for t in run.removed) or "none"
        lines.append(f"| {run.profile} | {n} | {removed} | {n - len(run.removed)} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def left_out(left: list[tuple[dict[str, Any], str]]) -> list[str]:
    counts: dict[str, int] = {}
    for r, why in left:
        key = f"{r.get('gpu', '?')} {r['engine']} {r['model']} {r.get('mode', '')}: {why.replace(r['id'] + ': ', '')}"
        counts[key] = counts.get(key, 0) + 1
    return [f"- {n} × {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))] + [""]


def _preamble(rows: int, left: int, header: Mapping[str, Any]) -> str:
    """The generated block's first paragraph: when, how, on which data, what a cell holds."""
    unfitted = ", ".join(f"`{k}` {_fmt(k, v)}" for k, v in UNFITTED.items())
    return (
        f"Generated {header['date']} by `{header['command']}` ({header['seconds']:.0f} s). Data: AIConfigurator 0.12.0 "
        f"end-to-end sample, {header['data']}. {rows} rows priced, {left} left out (§7). Cells: "
        "median \\|error\\| / P90 \\|error\\| / signed median, in %, over the rows of the group; a fit on one GPU is "
        f"scored on the other (cross-GPU) and on its own rows (in-sample). Unfitted values of the terms: {unfitted}."
        + (f" Runs {header['reused']} (`--reuse`)." if header.get("reused") else "")
    )


def generated(runs: list[Any], left: list[tuple[dict[str, Any], str]], header: Mapping[str, Any]) -> list[str]:
    """The Markdown between the markers (sections 1-7)."""
    flat = Flat(runs)
    return [
        _preamble(len(flat.rows), len(left), header),
        "",
        "## 1. Cross-GPU error per engine and mode",
        "",
        *main_table(flat),
        "## 2. Per predicted GPU",
        "",
        "Cross-GPU on an H200 row: fitted on the H100 rows; on an H100 row: fitted on the H200 rows. A profile "
        "whose rows lie on one GPU (`sglang`, SGLang 0.5.1.post1: H100 only) has its terms fitted on the other "
        "GPU's rows of its engine, other versions priced with that profile (`cross_gpu_accuracy.donor_rows`): its "
        "cross-GPU figure is cross-version too, which can only add error.",
        "",
        *main_table(flat, lambda r: f"on {r['gpu'].upper()}"),
        "## 3. Engine versions measured on both GPUs",
        "",
        "Rows whose engine version and harness (the dump named in `silicon_data_source`) appear on both GPUs, so "
        "that the GPU is the one change between fit and prediction (the models may differ).",
        "",
        *matched_table(flat),
        "Configurations measured on both GPUs (same engine version, model, deployment, lengths and concurrency): "
        "how much faster the H200 ran, measured and as pdplan prices it. The host terms are the same on both GPUs, "
        "so this ratio is the kernel tables' and the closed loop's; 1.43 is the HBM bandwidth ratio (4.8 / 3.35 "
        "TB/s), 1.0 the compute ratio.",
        "",
        *pairs_table(flat),
        "## 4. Held out: one model, one engine version",
        "",
        "The joint fit takes every row of both GPUs, each GPU's rows weighted to half the total "
        "(`cross_gpu_fit.gpu_balanced_weights`); each fold leaves out one model's (one engine version's) rows "
        "on both GPUs and predicts them.",
        "",
        *held_table(flat),
        "## 5. Fitted end-to-end terms",
        "",
        "Each term of each shipped profile that was fitted on end-to-end rows. Shipped: since issue #23 item 2 the "
        "joint fit of both GPUs' rows, each GPU weighted to half the total (`benchmarks/fit_shipped_profile.py`), "
        "for vllm, vllm-0.18, sglang-0.5.9 and trtllm (TensorRT-LLM's iterated to convergence, `--converged`, "
        "since 2026-12-07: its rows' engine versions differ per GPU, so the fit mixes them, §8.4); SGLang "
        "0.5.1.post1 (`sglang`, H100 rows only since issue #23 item 3: its H200 fit is on the SGLang 0.5.6-0.5.9 "
        'H200 rows, §2) keeps its H100 fit (`benchmarks/cross_gpu_fit.py` names the fitters). "Without": the term '
        "held at its unfitted "
        "value and the others refitted; errors pooled over both directions (cross-GPU) or both GPUs (in-sample) on "
        "the profile's rows. Verdict: what the term does to the cross-GPU medians, in points (helps: removing it "
        "worsens the median by more than 0.5 points; hurts: removing it improves it by more than 0.5).",
        "",
        *term_table(runs),
        "## 6. Where the error sits: per engine version, model, mode, harness and GPU",
        "",
        "Signed median TPOT / TTFT error in % under the shipped profile, with every fitted term at its unfitted value, "
        "refitted on the row's own GPU (in-sample) and on the other GPU (cross-GPU). A group that is off by the "
        "same amount under every column is off in the kernel time or the closed-loop model, not in a fitted term.",
        "",
        *detail_table(flat),
        "## 7. Rows left out",
        "",
        *left_out(left),
    ]


def write_doc(path: Path, runs: list[Any], left: list[tuple[dict[str, Any], str]], header: Mapping[str, Any]) -> None:
    """Rewrite the generated block of ``path`` (the text before ``BEGIN`` and after ``END`` is kept)."""
    text = path.read_text(encoding="utf-8") if path.exists() else f"# Cross-GPU accuracy\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    body = "\n".join(generated(runs, left, header))
    path.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}", encoding="utf-8")


def gate_figures(runs: list[Any]) -> dict[str, dict[str, float]]:
    """Per engine and mode: rows and the cross-GPU and in-sample median |error| of TPOT and TTFT (the CI gate's)."""
    flat = Flat(runs)
    out = {}
    group = flat.keys(lambda r: f"{_engine(r)} {r['kind']}")
    for key in sorted(set(group)):
        m = group == key
        fig: dict[str, float] = {"rows": int(flat.errors("cross", "tpot", m).size)}
        for lab in ("cross", "in-sample"):
            for k in ("tpot", "ttft"):
                fig[f"{lab} {k}"] = round(stats(flat.errors(lab, k, m))[1], 2)
        out[key] = fig
    return out


ERROR_YAML_HEADER = """\
# Expected error of a plan's latencies (pdplan/specs/cross_gpu_error.py, pdplan/evaluation/error_band.py): the
# cross-GPU validation of benchmarks/cross_gpu_accuracy.py, each engine profile's end-to-end terms fitted on one
# GPU's measured runs and the other GPU's runs predicted (kernel terms from each GPU's own kernel table). Per engine,
# mode and predicted GPU: median / P90 absolute error and signed median (predicted/measured - 1, + = pdplan slower) of
# mean TPOT and TTFT, in %, and the engine versions of the rows the terms were fitted on (fitted_versions); for an
# engine priced with several profiles also per profile version ("<engine>@<version> <mode> <gpu>", that profile's rows
# alone; a profile whose rows lie on one GPU is fitted on the other GPU's rows of other versions); per engine and
# mode: what the rows covered (engine versions, model families and models, GPUs). Generated: do not edit by hand,
# rerun the script.
"""


def trained_versions(runs: list[Any]) -> dict[tuple[str, str], set[str]]:
    """(profile, GPU label) → the engine versions of the rows that profile's fit on that GPU was trained on: its own
    rows there, or, for a profile whose rows lie on the other GPU alone, the donor rows
    (``cross_gpu_accuracy.donor_rows``: other versions of the engine)."""
    out: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        for r in run.rows:
            out.setdefault((run.profile, str(r["gpu"])), set()).add(str(r["version"]))
        if run.donor_gpu is not None:  # a class default: runs pickled before donor rows existed have None
            out[(run.profile, run.donor_gpu)] = set(run.donor_versions)
    return out


def _band(flat: Flat, m: np.ndarray, fitted_on: str, versions: list[str]) -> dict[str, Any]:
    """One group's cross-GPU band (rows counted on TPOT; TTFT over the same rows, both finite where priced), and the
    engine versions of the rows its terms were fitted on."""
    out: dict[str, Any] = {"rows": int(flat.errors("cross", "tpot", m).size), "fitted_on": fitted_on}
    for k in ("tpot", "ttft"):
        _, med, p90, signed = stats(flat.errors("cross", k, m))
        out |= {f"{k}_median_abs_pct": round(med, 1), f"{k}_p90_abs_pct": round(p90, 1)}
        out[f"{k}_signed_median_pct"] = round(signed, 1)
    out["fitted_versions"] = versions
    return out


def _bands(runs: list[Any], version: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """Per ``"<engine> <mode> <gpu>"`` the band of every row of the engine; for an engine priced with several
    profiles also per ``"<engine>@<profile version> <mode> <gpu>"`` the band of that profile's rows alone."""
    flat = Flat(runs)
    names = {r["gpu"]: r["gpu_name"] for r in flat.rows}
    trained = trained_versions(runs)
    profiles: dict[str, set[str]] = {}
    for r in flat.rows:
        profiles.setdefault(_engine(r), set()).add(str(r["profile"]))

    def head(r: dict[str, Any]) -> str:
        return _engine(r) if len(profiles[_engine(r)]) == 1 else f"{_engine(r)}@{version(str(r['profile']))}"

    bands = {}
    for key_of in (
        lambda r: f"{_engine(r)} {r['kind']} {r['gpu_name']}",
        lambda r: f"{head(r)} {r['kind']} {r['gpu_name']}",
    ):
        group = flat.keys(key_of)
        for key in sorted(set(group) - set(bands), key=lambda k: _mode_order(k.replace(" ", "|", 2))):
            m = group == key
            gpu = flat.rows[int(np.flatnonzero(m)[0])]["gpu"]
            other = "h100" if gpu == "h200" else "h200"
            used = {str(r["profile"]) for r, x in zip(flat.rows, m, strict=True) if x}
            versions = sorted(set().union(*(trained.get((p, other), set()) for p in used)))
            bands[key] = _band(flat, m, names[other], versions)
    return bands


def error_yaml(
    runs: list[Any], header: Mapping[str, Any], family: Callable[[str], str], version: Callable[[str], str]
) -> str:
    """``pdplan/data/cross_gpu_error.yaml`` (schema 2) from the runs' cross-GPU predictions: the bands of
    :func:`_bands` (per ``"<engine> <mode> <gpu>"``, the predicted GPU's catalogue name, and per profile version of an
    engine with several profiles), per ``"<engine> <mode>"`` the coverage; ``family`` maps a catalogue model name to
    its family, ``version`` a profile name to its engine version."""
    import yaml

    flat = Flat(runs)
    bands = _bands(runs, version)
    coverage: dict[str, dict[str, list[str]]] = {}
    by_mode = flat.keys(lambda r: f"{_engine(r)} {r['kind']}")
    for key in sorted(set(by_mode), key=lambda k: _mode_order(k.replace(" ", "|") + "|")):
        rows = [r for r, x in zip(flat.rows, by_mode == key, strict=True) if x]
        coverage[key] = {
            "versions": sorted({str(r["version"]) for r in rows}),
            "families": sorted({family(r["model"]) for r in rows}),
            "models": sorted({str(r["model"]) for r in rows}),
            "gpus": sorted({str(r["gpu_name"]) for r in rows}),
        }
    doc = {
        "schema_version": 2,
        "source": f"benchmarks/cross_gpu_accuracy.py (docs/cross_gpu_accuracy.md §1-§2), generated {header['date']} "
        f"by `{header['command']}`"
        + (f" ({header['reused']})" if header.get("reused") else "")
        + f" on the AIConfigurator 0.12.0 end-to-end sample: {header['data']}",
        "bands": bands,
        "coverage": coverage,
    }

    class Dumper(yaml.SafeDumper):
        """Each band on one flow mapping (with its list of versions), the rest as ``safe_dump`` writes it."""

    def mapping(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.MappingNode:
        return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True if "rows" in data else None)

    Dumper.add_representer(dict, mapping)
    body = yaml.dump(doc, Dumper=Dumper, sort_keys=False, width=118, default_flow_style=None, allow_unicode=True)
    return ERROR_YAML_HEADER + body


PARTIAL_SECTIONS = ("## 1. ", "## 2. ", "## 7. ")
"""The sections :func:`write_partial_doc` rewrites: those a ``--yaml-only`` run's fits fill (in-sample, cross-GPU,
shipped) and the rows left out."""


def write_partial_doc(
    path: Path, runs: list[Any], left: list[tuple[dict[str, Any], str]], header: Mapping[str, Any], note: str
) -> None:
    """Rewrite §1, §2 and §7 of the generated block of ``path`` from ``runs`` (``--yaml-only --reuse``), keep §3-§6
    as they were, and put ``note`` (which sections are whose run) after the preamble, which is rewritten."""
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    block, tail = rest.split(END, 1)
    fresh = "\n".join(generated(runs, left, header))

    def sections(body: str) -> list[str]:
        parts = body.split("\n## ")
        return [parts[0], *("## " + p for p in parts[1:])]

    old, new = sections(block.strip("\n")), sections(fresh)
    if [s.split("\n", 1)[0] for s in old[1:]] != [s.split("\n", 1)[0] for s in new[1:]]:
        raise SystemExit(f"{path}: the generated block's sections differ from this script's; rerun it whole")
    out = [new[0].rstrip("\n") + "\n\n" + note + "\n"]
    out += [n if n.startswith(PARTIAL_SECTIONS) else o for o, n in zip(old[1:], new[1:], strict=True)]
    body = "\n".join(s.rstrip("\n") + "\n" for s in out)
    path.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}", encoding="utf-8")
