"""Fitting an engine profile's overhead terms to benchmark runs: bounded least squares with a reported uncertainty.

The terms (:data:`TERMS`) are the host costs kernel tables cannot show, as :class:`pdplan.specs.engine.Overheads`
names them: ``step_s`` per engine step, ``collective_s`` per all-reduce (two per layer at TP > 1),
``launch_gap_s_per_layer`` per layer per step, and ``request_s`` per request on TTFT. A prediction of every run
(TTFT and TPOT, through the library's ``evaluate`` at the run's concurrency) is one *pass*; a pass costs tens of
milliseconds per run, so the fit does not hand the exact model to ``least_squares`` (which would spend a pass per
parameter per iteration, for ten or more iterations). Instead, Gauss–Newton on the exact model:

1. linearise the predictions at θ_k: one pass at θ_k and one per term at θ_k + h_j (forward differences, steps
   :data:`STEPS_S`), giving p(θ) ≈ p_k + J_k (θ − θ_k);
2. minimise the log residuals log(p(θ)/measured) of TTFT and TPOT (both, stacked; a 10 % miss counts the same
   on a 20 ms TTFT and a 20 s one) over the bounds (:data:`BOUNDS_S`) with ``scipy.optimize.least_squares``
   (``trf``; plain squares first, then from there a soft-L1 loss with a 10 % scale, so a few rows the model cannot
   follow — a KV-capacity cliff — do not drag the terms);
3. repeat from the new θ until no term moves by more than a quarter of its step (at most
   :data:`MAX_LINEARISATIONS` times); the reported predictions are one more exact pass.

Uncertainty: the 1σ standard error of each term from the final linearisation, σ² = s²·[(JᵀJ)⁻¹]_jj with J the
Jacobian of the log residuals and s² = Σr²/(n − k) their variance (the textbook asymptotic covariance of a
least-squares estimate; it assumes independent residuals and ignores the soft-L1 weights, so read it as a scale,
not a confidence interval). A term at a bound has no two-sided error (reported as ``at_bound``); a term the rows
cannot see (its Jacobian column is zero: no TP > 1 row for ``collective_s``) keeps the base profile's value and
is reported as ``not constrained``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from pdplan.errors import SpecError
from pdplan.types import FloatArray

TERMS = ("step_s", "collective_s", "launch_gap_s_per_layer", "request_s")
BOUNDS_S: Mapping[str, tuple[float, float]] = {
    "step_s": (0.0, 0.05),
    "collective_s": (0.0, 5e-4),
    "launch_gap_s_per_layer": (0.0, 5e-4),
    "request_s": (0.0, 1.0),
}
"""Physical ranges (seconds), wide around ENGINES.md §1: host step overheads of 0.2–13 ms (V0 bubbles up to 13 ms),
per-collective and per-layer costs of microseconds to tens of µs (a 50 ms step over 80 layers is 0.6 ms/layer),
per-request costs of tens of ms (AIC: 40–64 ms); the upper ends are 4–50× beyond the largest reported value."""
STEPS_S: Mapping[str, float] = {
    "step_s": 5e-4,
    "collective_s": 5e-6,
    "launch_gap_s_per_layer": 5e-6,
    "request_s": 5e-3,
}
"""Forward-difference steps: about the size of each term's typical value, so the secant spans the range it moves in."""
MAX_LINEARISATIONS = 3
_F_SCALE = 0.1


Predictor = Callable[[Mapping[str, float]], tuple[FloatArray, FloatArray]]
"""Terms (s) → predicted (TTFT s, TPOT s) per run."""


@dataclass(frozen=True)
class TermFit:
    """One fitted term: value (s), 1σ standard error (s, None when not defined) and how it came out."""

    name: str
    value_s: float
    std_s: float | None
    status: str
    """``fitted`` | ``at_bound`` | ``not constrained``."""


@dataclass(frozen=True)
class OverheadFit:
    """Fitted terms, the predictions at them and the number of exact passes spent."""

    terms: tuple[TermFit, ...]
    ttft_s: FloatArray
    tpot_s: FloatArray
    passes: int
    jacobian: FloatArray
    """d(TTFT, TPOT stacked)/d(term) of the last linearisation, columns in :attr:`terms` order."""

    def values(self) -> dict[str, float]:
        return {t.name: t.value_s for t in self.terms}


def _log_residuals(ttft: FloatArray, tpot: FloatArray, meas_ttft: FloatArray, meas_tpot: FloatArray) -> FloatArray:
    pred = np.concatenate([ttft, tpot])
    meas = np.concatenate([meas_ttft, meas_tpot])
    out: FloatArray = np.log(np.maximum(pred, 1e-9) / meas)
    return out


def _jacobian(predict: Predictor, theta: dict[str, float], base: FloatArray) -> FloatArray:
    """d(prediction)/d(term) by forward differences (one pass per term), columns in ``theta`` order."""
    cols = []
    for name in theta:
        step = STEPS_S[name]
        hi = BOUNDS_S[name][1]
        h = step if theta[name] + step <= hi else -step
        ttft, tpot = predict({**theta, name: theta[name] + h})
        cols.append((np.concatenate([ttft, tpot]) - base) / h)
    return np.column_stack(cols)


def fit_overheads(
    predict: Predictor,
    start: Mapping[str, float],
    measured_ttft_s: FloatArray,
    measured_tpot_s: FloatArray,
    *,
    fixed: Mapping[str, float] | None = None,
) -> OverheadFit:
    """Fit the terms in ``start`` (initial values, s) to measured mean TTFT/TPOT (module docstring).

    ``fixed`` terms are passed to ``predict`` unchanged. Raises SpecError with fewer runs than terms."""
    meas_ttft, meas_tpot = np.asarray(measured_ttft_s, float), np.asarray(measured_tpot_s, float)
    if meas_ttft.size < len(start):
        raise SpecError(
            f"{meas_ttft.size} benchmark run(s) cannot fit {len(start)} overhead terms ({', '.join(start)}); "
            f"give at least {len(start)} runs, or use --check to only compare",
            field="rows",
        )
    fixed = dict(fixed or {})
    names = list(start)
    theta = {k: float(np.clip(v, *BOUNDS_S[k])) for k, v in start.items()}

    def full(th: Mapping[str, float]) -> tuple[FloatArray, FloatArray]:
        return predict({**fixed, **th})

    passes, frozen, jac = 0, set[str](), np.zeros((2 * meas_ttft.size, len(names)))
    for it in range(MAX_LINEARISATIONS):
        ttft, tpot = full(theta)
        base = np.concatenate([ttft, tpot])
        jac = _jacobian(full, theta, base)
        passes += 1 + len(names)
        if it == 0:  # a term no run responds to (no TP > 1 row for collective_s) keeps its start value
            size = np.abs(jac).max(axis=0)
            frozen = {k for k, s in zip(names, size, strict=True) if s <= 1e-9 * max(float(size.max()), 1e-30)}
        free = [k for k in names if k not in frozen]
        if not free:
            break
        cols = [names.index(k) for k in free]
        new = solve_linearised(base, jac[:, cols], {k: theta[k] for k in free}, meas_ttft, meas_tpot)
        moved = max(abs(new[k] - theta[k]) / STEPS_S[k] for k in free)
        theta.update(new)
        if moved < 0.25:
            break
    ttft, tpot = full(theta)
    terms = _uncertainty(theta, frozen, jac, ttft, tpot, meas_ttft, meas_tpot)
    return OverheadFit(terms, ttft, tpot, passes + 1, jac)


def solve_linearised(
    base: FloatArray, jac: FloatArray, theta: dict[str, float], meas_ttft: FloatArray, meas_tpot: FloatArray
) -> dict[str, float]:
    """Bounded robust least squares of the log residuals of the linearised predictions ``base + jac·(θ − theta)``
    (``base``, ``jac`` rows: TTFT of every run, then TPOT); one Gauss–Newton step of :func:`fit_overheads`."""
    names = list(theta)
    x0 = np.array([theta[k] for k in names])
    lo = np.array([BOUNDS_S[k][0] for k in names])
    hi = np.array([BOUNDS_S[k][1] for k in names])
    meas = np.concatenate([meas_ttft, meas_tpot])
    scale = np.array([STEPS_S[k] for k in names])  # solve in units of each term's step: comparable magnitudes

    def residuals(z: FloatArray) -> FloatArray:
        pred = base + jac @ (z * scale - x0)
        out: FloatArray = np.log(np.maximum(pred, 1e-9) / meas)
        return out

    z, box = x0 / scale, (lo / scale, hi / scale)
    # plain least squares first: from far off, soft-L1's flat tails stop trf on ftol before it has moved
    z = least_squares(residuals, z, bounds=box, xtol=1e-12, ftol=1e-12).x
    res = least_squares(residuals, z, bounds=box, loss="soft_l1", f_scale=_F_SCALE, xtol=1e-12, ftol=1e-12)
    return {k: float(np.clip(v, BOUNDS_S[k][0], BOUNDS_S[k][1])) for k, v in zip(names, res.x * scale, strict=True)}


def _uncertainty(
    values: dict[str, float],
    frozen: set[str],
    jac: FloatArray,
    ttft: FloatArray,
    tpot: FloatArray,
    meas_ttft: FloatArray,
    meas_tpot: FloatArray,
) -> tuple[TermFit, ...]:
    """1σ standard errors from the last linearisation's Jacobian of the log residuals (module docstring)."""
    names = list(values)
    free = [k for k in names if k not in frozen]
    resid = _log_residuals(ttft, tpot, meas_ttft, meas_tpot)
    pred = np.maximum(np.concatenate([ttft, tpot]), 1e-12)
    jac_log = jac[:, [names.index(k) for k in free]] / pred[:, None]
    dof = max(resid.size - len(free), 1)
    cov = float(resid @ resid) / dof * np.linalg.pinv(jac_log.T @ jac_log) if free else np.zeros((0, 0))
    out = []
    for k in names:
        if k in frozen:
            out.append(TermFit(k, values[k], None, "not constrained"))
            continue
        j = free.index(k)
        lo, hi = BOUNDS_S[k]
        at_bound = min(values[k] - lo, hi - values[k]) <= 1e-3 * STEPS_S[k]
        std = float(np.sqrt(max(cov[j, j], 0.0)))
        out.append(TermFit(k, values[k], None if at_bound else std, "at_bound" if at_bound else "fitted"))
    return tuple(out)
