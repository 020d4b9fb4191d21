"""The host terms a phase-time fit puts in a kernel table, and those an engine profile would count a second time.

Beside its kernel efficiencies a fitted table (:func:`pdplan.calibrate.phase_times.fit`) can carry three additive
host terms (:data:`HOST_TERMS`): a per-step time (``framework.decode_step_overhead_s``, paid by every pass, prefill
and decode: :func:`pdplan.perf.roofline.phase_time`), a latency added to every all-reduce's α (two per layer at
TP > 1) and a launch gap added to every kernel's fixed overhead. They hold the host work of the measured steps:
scheduling, sampling, launches. An engine profile adds its own host terms to whatever table it runs
(:func:`pdplan.serving.engine_bind.with_engine`: ``step_s`` to the per-step time, ``launch_gap_s_per_layer`` per
layer, ``collective_s`` per all-reduce), so a host cost both carry is priced twice: the vLLM profile's fitted
``step_s`` of 1.81 ms on top of a table whose fit found 1.12 ms per step prices 2.93 ms of host time per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pdplan.specs.engine import EngineProfile


@dataclass(frozen=True)
class HostTermKind:
    """One additive knob of the phase-time fit: what it is paid per, the engine-profile term that covers the same
    host work, and which rows it needs (:func:`pdplan.calibrate.phase_times._start_knobs`)."""

    knob: str
    per: str
    profile_term: str
    needs: str


HOST_TERMS = (
    HostTermKind("decode_step_overhead_s", "per step", "step_s", "decode rows"),
    HostTermKind("collective_latency_s", "per all-reduce", "collective_s", "rows at TP > 1"),
    HostTermKind(
        "launch_gap_s",
        "per kernel launch",
        "launch_gap_s_per_layer",
        "rows of two models, or prefill rows only: one model's decode steps cannot tell it from a per-step cost",
    ),
)


@dataclass(frozen=True)
class HostTerm:
    """A host term of the fit: ``value_s`` as fitted; ``found`` unless it sits at the lower bound of its range (the
    rows show none of it)."""

    kind: HostTermKind
    value_s: float
    found: bool


def fitted_host_terms(knobs: Mapping[str, float], floors_s: Mapping[str, float]) -> tuple[HostTerm, ...]:
    """The host terms among the fitted ``knobs``, in :data:`HOST_TERMS` order; a value within 1 % of its lower bound
    (``floors_s``) is not found."""
    return tuple(
        HostTerm(kind, knobs[kind.knob], knobs[kind.knob] > 1.01 * floors_s[kind.knob])
        for kind in HOST_TERMS
        if kind.knob in knobs
    )


def seconds_text(value_s: float) -> str:
    """Three significant figures in ms (from 0.1 ms) or µs: ``1.12 ms``, ``3.1 µs``."""
    return f"{value_s * 1e3:.3g} ms" if value_s >= 1e-4 else f"{value_s * 1e6:.3g} µs"


def describe(terms: tuple[HostTerm, ...]) -> str:
    """One line naming what the fit found per host term, and the terms it could not fit and why."""
    parts = [
        f"{seconds_text(t.value_s)} {t.kind.per}" if t.found else f"none {t.kind.per} (at its range's lower bound)"
        for t in terms
    ]
    fitted = {t.kind.knob for t in terms}
    missing = [f"{k.per} (needs {k.needs})" for k in HOST_TERMS if k.knob not in fitted]
    line = "host terms fitted into the table: " + ("; ".join(parts) if parts else "none")
    return line + ("; not fitted: " + "; ".join(missing) if missing else "")


def double_counted(terms: tuple[HostTerm, ...], engine: EngineProfile, label: str) -> list[str]:
    """A warning for each found term whose engine-profile counterpart is not 0 (module docstring); ``label`` names
    the profile as the user would pick it."""
    out = []
    for t in (t for t in terms if t.found):
        profile_s = getattr(engine.overheads, t.kind.profile_term).value
        if profile_s > 0.0:
            out.append(
                f"the {label} engine profile adds its {t.kind.profile_term} of {seconds_text(profile_s)} to this "
                f"table's fitted {seconds_text(t.value_s)} {t.kind.per}: the same host work, counted twice when the "
                f"table runs under it; run the table with --engine kernels (no host terms), or fit that profile's "
                f"terms to benchmark results instead (pdplan calibrate RESULTS... -o ENGINE.yaml)"
            )
    return out


def table_host_note(step_s: float, table: str) -> str | None:
    """For an engine-profile fit on benchmark runs with a user's ``table``: a table whose per-step time is not 0 (a
    phase-time fit's) is part of every predicted step, so the profile's fitted terms are the host time beyond it
    and hold only with that table. None for a table without one (the shipped tables)."""
    if step_s <= 0.0:
        return None
    return (
        f"the kernel table {table} carries {seconds_text(step_s)} of host time per step: the fitted profile's terms "
        "are the host time beyond it, so run the profile with this table (--kernel-table); with another table the "
        "steps would miss or double that time"
    )


def framework_source(term: HostTerm, rows: int) -> str:
    """The fitted table's ``sources.framework``: what the fit found per step (replaces the shipped tables' "not
    fitted, 0 s")."""
    what = seconds_text(term.value_s) if term.found else f"none ({seconds_text(term.value_s)}, its range's lower bound)"
    return (
        f"FITTED by pdplan calibrate to {rows} phase rows: {what} per step, the host time of the measured steps "
        "(scheduling, sampling, launches); an engine profile's step_s adds to it (pdplan/calibrate/host_terms.py)"
    )
