"""The expected error of a plan's own numbers: its engine, mode and GPU's cross-validated band, and where the plan
sits outside what the validation covered.

The bands are the cross-GPU validation's (``pdplan/data/cross_gpu_error.yaml``, :mod:`pdplan.specs.cross_gpu_error`;
method: docs/cross_gpu_accuracy.md): the engine profile's end-to-end terms fitted on one GPU's measured runs (the
AIConfigurator 0.12.0 end-to-end sample), the other GPU's runs predicted, per engine, mode (dense, MoE,
disaggregated) and predicted GPU. A plan takes the band of its engine and mode on its GPU:

* its GPU measured (a band predicted on it): that band;
* otherwise the band of the GPU predicted from the H100 rows alone, which is how the shipped profiles were fitted,
  with a note that the plan's GPU was never validated end to end (on a borrowed kernel table that band is a lower
  bound: :meth:`pdplan.specs.cross_gpu_error.CrossGpuError.warning`);
* several GPUs in one plan: the widest of their bands (largest TPOT + TTFT median).

An engine priced with one profile per version (SGLang 0.5.1.post1 and 0.5.6-0.5.9) has bands per profile version
too: a plan takes its own version's first, the engine's pooled band where its version has none there (with a note).
Where the band's terms were fitted on runs of other engine versions only (a profile whose runs lie on one GPU is
fitted on the other GPU's runs of other versions: docs/cross_gpu_accuracy.md §1), the band's words say so.

Notes name what the validation rows never covered: the plan's GPU, its model family, its engine version, a mode with
no priced rows (then no band: the error is unknown, never guessed), an engine profile without an engine (kernel
tables only). Goodput has no measured counterpart in the rows (they report latencies at a benchmark concurrency, not
the highest rate meeting an SLO), so it has no band of its own: it is the rate at which the SLO percentile of TTFT
and TPOT reaches its limit, and moves with their errors (:data:`GOODPUT_WORDS`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pdplan.io.kernel_tables import cross_gpu_error
from pdplan.serving.resolve import ResolvedScenario
from pdplan.specs.cross_gpu_error import CrossGpuError, ErrorBand, short_gpu

GOODPUT_WORDS = (
    "goodput has no direct validation (the measured runs report latencies at a concurrency, not the highest rate "
    "meeting an SLO); it is the rate at which the SLO percentile of TTFT and TPOT reaches its limit, so it moves with "
    "their errors: latencies priced too slow understate it, too fast overstate it"
)
"""How far to trust goodput (module docstring): no invented number."""
GOODPUT_SHORT = "goodput not validated directly (follows TTFT/TPOT through the SLO)"


@dataclass(frozen=True, slots=True)
class MetricBand:
    """One latency's band, in %: median and P90 absolute error, signed median (+: pdplan prices it slower)."""

    median_abs_pct: float
    p90_abs_pct: float
    signed_median_pct: float

    def words(self) -> str:
        """``median |error| (90 % of runs within P90 |error|; bias signed median)``: "P90" is left to the latency
        percentiles of the report, which this is not."""
        return (
            f"{self.median_abs_pct:.0f} % median (90 % of runs within {self.p90_abs_pct:.0f} %; "
            f"bias {self.signed_median_pct:+.0f} %)"
        )

    def to_document(self) -> dict[str, float]:
        return {
            "median_abs_pct": self.median_abs_pct,
            "p90_abs_pct": self.p90_abs_pct,
            "signed_median_pct": self.signed_median_pct,
        }


@dataclass(frozen=True, slots=True)
class ExpectedError:
    """A plan's expected error (module docstring); ``tpot``/``ttft`` None where the validation has no band."""

    engine: str
    engine_version: str
    mode: str
    """``dense``, ``moe`` or ``disagg`` (the validation's groups)."""
    gpus: tuple[str, ...]
    band_gpu: str | None
    """The GPU whose predicted runs gave the band (None: no band)."""
    fitted_on: str | None
    fitted_versions: tuple[str, ...]
    """The engine versions of the runs the band's terms were fitted on (empty: not recorded)."""
    band_version: str | None
    """The profile version whose runs alone gave the band (None: the engine's runs of every version)."""
    rows: int
    tpot: MetricBand | None
    ttft: MetricBand | None
    outside: tuple[str, ...]
    """Where the plan sits outside what the validation covered, one note each."""
    source: str

    def band_words(self) -> str:
        """The band in one line (no notes), goodput's words last."""
        if self.tpot is None or self.ttft is None or self.band_gpu is None:
            return f"unknown, no validated band ({self.engine} {self.mode}); {GOODPUT_SHORT}"
        on = short_gpu(self.band_gpu) + (", the widest of the plan's GPUs" if len(self.gpus) > 1 else "")
        engine = self.engine + (f" {self.band_version}" if self.band_version else "")
        fitted = ""
        known = self.fitted_versions and "?" not in self.fitted_versions  # "?": a run's version not recorded
        if known and self.engine_version not in self.fitted_versions and self.fitted_on:
            fitted = (
                f", terms fitted on {short_gpu(self.fitted_on)} runs of other versions "
                f"({', '.join(self.fitted_versions)})"
            )
        return (
            f"{engine} {self.mode} on {on}, cross-GPU over {self.rows} runs{fitted}: TPOT {self.tpot.words()}, "
            f"TTFT {self.ttft.words()} (bias +: priced slower than measured); {GOODPUT_SHORT}"
        )

    def lines(self) -> list[str]:
        """The report's one or two lines: the band, then the notes (if any)."""
        return [f"expected error: {self.band_words()}"] + (
            [f"outside validation: {'; '.join(self.outside)}"] if self.outside else []
        )

    def to_document(self) -> dict[str, Any]:
        """The JSON ``expected_error`` block (docs/json_keys.md)."""
        return {
            "engine": self.engine,
            "engine_version": self.engine_version,
            "mode": self.mode,
            "gpus": list(self.gpus),
            "band_gpu": self.band_gpu,
            "fitted_on": self.fitted_on,
            "fitted_versions": list(self.fitted_versions),
            "band_version": self.band_version,
            "rows": self.rows,
            "tpot": None if self.tpot is None else self.tpot.to_document(),
            "ttft": None if self.ttft is None else self.ttft.to_document(),
            "goodput": GOODPUT_WORDS,
            "outside_validation": list(self.outside),
            "source": self.source,
        }


def validation_mode(mode: str, moe: bool) -> str:
    """The validation's group of a deployment: ``disagg`` for disaggregated, else ``moe`` or ``dense``."""
    return "disagg" if mode == "disaggregated" else ("moe" if moe else "dense")


def of_resolved(res: ResolvedScenario[Any]) -> ExpectedError:
    """The expected error of the resolved deployment ``res`` (its engine profile, deployment mode, model family and
    GPUs; a GPU whose kernel table is borrowed: :meth:`pdplan.io.catalog.Catalog.borrowed_kernel_table`)."""
    gpus = tuple(hw.gpu.name for _, hw in res.roles)
    borrowed = tuple(hw.gpu.name for _, hw in res.roles if "borrowed" in hw.table.sources)
    mode = validation_mode(res.hardware.deployment.mode, res.model.moe is not None)
    return expected_error(res.engine.engine, res.engine.version, mode, res.model.family, gpus, borrowed)


PRFAAS_NOTE = "PrfaaS (prefill on a remote cluster over a cross-datacenter link): no validation rows"


def of_prfaas(res: ResolvedScenario[Any], remote_gpu: str) -> ExpectedError:
    """A PrfaaS plan's expected error: its local disaggregated part's (:func:`of_resolved`) with the remote prefill
    cluster's GPU among its GPUs, and the note that no PrfaaS run was validated."""
    gpus = (*(hw.gpu.name for _, hw in res.roles), remote_gpu)
    borrowed = tuple(hw.gpu.name for _, hw in res.roles if "borrowed" in hw.table.sources)
    mode = validation_mode(res.hardware.deployment.mode, res.model.moe is not None)
    err = expected_error(res.engine.engine, res.engine.version, mode, res.model.family, gpus, borrowed)
    return dataclasses.replace(err, outside=(PRFAAS_NOTE, *err.outside))


def expected_error(
    engine: str,
    engine_version: str,
    mode: str,
    family: str,
    gpus: tuple[str, ...],
    borrowed: tuple[str, ...] = (),
    data: CrossGpuError | None = None,
) -> ExpectedError:
    """The expected error of a plan of ``engine`` (the profile's ``engine``: ``vllm``, ``sglang``, ``trtllm``,
    ``none``) at ``engine_version``, in validation ``mode`` (:func:`validation_mode`), of a model of ``family``, on
    ``gpus`` (catalogue names, those in ``borrowed`` on a borrowed kernel table); ``data``: the bands (default: the
    packaged file, read once)."""
    data = data or cross_gpu_error()
    gpus = tuple(dict.fromkeys(gpus))
    if engine == "none":
        notes = ["engine profile without an engine (kernel tables only): no end-to-end validation"]
        return _record(engine, engine_version, mode, gpus, None, notes, data.source)
    notes = _coverage_notes(data, engine, engine_version, mode, family)
    cover = data.coverage.get(f"{engine} {mode}")
    # an engine version with bands of its own, in the rows of this mode, but with none on a GPU: say whose it gets
    own = data.has_version(engine, engine_version) and cover is not None and engine_version in cover.versions
    versioned = f"{engine}@{engine_version} "
    picked: list[tuple[str, str]] = []  # (GPU the band is shown for, its key)
    for gpu in gpus:
        key = data.band_key(engine, mode, gpu, engine_version)
        if key is not None and gpu not in borrowed:
            picked.append((gpu, key))
            if own and not key.startswith(versioned):
                notes.append(f"no {engine} {engine_version} {mode} runs on {short_gpu(gpu)}: other versions' band")
            continue
        key = data.transfer_key(engine, mode, version=engine_version)
        if key is None:
            continue
        band = data.bands[key]
        how = "its kernel table borrowed" if gpu in borrowed else "no measured runs on it validated"
        predicted = key.rpartition(" ")[2]
        notes.append(
            f"GPU {gpu}: {how}, band of {short_gpu(predicted)} predicted from {short_gpu(band.fitted_on)} shown"
        )
        picked.append((predicted, key))
    worst = max(
        picked,
        key=lambda gk: data.bands[gk[1]].tpot_median_abs_pct + data.bands[gk[1]].ttft_median_abs_pct,
        default=None,
    )
    chosen = None if worst is None else (worst[0], data.bands[worst[1]])
    mine = worst is not None and worst[1].startswith(versioned)
    return _record(engine, engine_version, mode, gpus, chosen, notes, data.source, engine_version if mine else None)


def _coverage_notes(data: CrossGpuError, engine: str, version: str, mode: str, family: str) -> list[str]:
    """The notes for a mode with no rows, a model family and an engine version the rows never covered."""
    cover = data.coverage.get(f"{engine} {mode}")
    if cover is None:
        return [f"no {engine} {mode} runs in the validation rows: the error is not known"]
    notes = []
    if family not in cover.families:
        notes.append(f"model family {family} never checked on {engine} {mode} ({', '.join(cover.families)} were)")
    if version not in cover.versions:
        known = ", ".join(v for v in cover.versions if v != "?")
        notes.append(f"{engine} {version} not in the validation rows ({known})")
    return notes


def _record(
    engine: str,
    version: str,
    mode: str,
    gpus: tuple[str, ...],
    chosen: tuple[str, ErrorBand] | None,
    notes: list[str],
    source: str,
    band_version: str | None = None,
) -> ExpectedError:
    band = None if chosen is None else chosen[1]
    return ExpectedError(
        engine=engine,
        engine_version=version,
        mode=mode,
        gpus=gpus,
        band_gpu=None if chosen is None else chosen[0],
        fitted_on=None if band is None else band.fitted_on,
        fitted_versions=() if band is None or band.fitted_versions is None else band.fitted_versions,
        band_version=band_version,
        rows=0 if band is None else band.rows,
        tpot=None if band is None else _metric(band, "tpot"),
        ttft=None if band is None else _metric(band, "ttft"),
        outside=tuple(notes),
        source=source,
    )


def _metric(band: ErrorBand, metric: str) -> MetricBand:
    if metric == "tpot":
        return MetricBand(band.tpot_median_abs_pct, band.tpot_p90_abs_pct, band.tpot_signed_median_pct)
    return MetricBand(band.ttft_median_abs_pct, band.ttft_p90_abs_pct, band.ttft_signed_median_pct)
