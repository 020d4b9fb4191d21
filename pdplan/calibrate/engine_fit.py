"""Fitting an engine profile's closed-loop terms to benchmark runs: bounded least squares with a reported uncertainty.

The terms (:data:`TERMS`) are the host costs kernel tables cannot show, as :class:`pdplan.specs.engine.Overheads`
names them — ``step_s`` per engine step, ``step_s_per_seq`` per running sequence per decode step (host work that
grows with the batch: input preparation, sampling, output processing), ``collective_s`` per all-reduce
(two per layer at TP > 1), ``launch_gap_s_per_layer`` per layer per step, ``request_s`` per request on TTFT — and the
closed loop's start-up transient ``startup_cohorts`` (:class:`pdplan.specs.engine.Scheduling`; a count of first
cohorts, dimensionless, not seconds: :mod:`pdplan.benchmark.colocated_loop`). A prediction of every run (TTFT and
TPOT, through the library's ``evaluate`` at the run's concurrency) is one *pass*; a pass costs tens of milliseconds
per run, so the fit does not hand the exact model to ``least_squares`` (which would spend a pass per parameter per
iteration, for ten or more iterations). Instead, Gauss–Newton on the exact model:

1. linearise the predictions at θ_k: one pass at θ_k and one per term at θ_k + h_j (forward differences, steps
   :data:`STEPS_S`), giving p(θ) ≈ p_k + J_k (θ − θ_k);
2. minimise log residuals log(p(θ)/measured) (a 10 % miss counts the same on a 20 ms TTFT and a 20 s one) over
   the bounds (:data:`BOUNDS_S`) with ``scipy.optimize.least_squares`` (``trf``; plain squares first, then from
   there a soft-L1 loss with a 10 % scale, so a few rows the model cannot follow — a KV-capacity cliff — do not drag
   the terms), in two stages (:func:`solve_linearised`): the step terms (:data:`TPOT_TERMS`) on the TPOT residuals,
   then the TTFT terms (:data:`TTFT_TERMS`) on the TTFT residuals with the step terms at their new values, this
   stage ending with a Cauchy loss (same scale) started from the soft-L1 optimum;
3. repeat from the new θ until no term moves by more than a quarter of its step (at most
   :data:`MAX_LINEARISATIONS` times); the reported predictions are one more exact pass.

Why two stages, not one joint fit of TTFT and TPOT: the model is block-structured. A decode step's time — TPOT, up to
the start-up transient's small share — is kernels plus ``step_s + B·step_s_per_seq + layers·gap + 2·layers·collective``
(B running sequences); ``request_s`` and ``startup_cohorts`` only enter TPOT through second-order closed-loop effects
(a longer request delay lowers the effective concurrency), while TTFT carries every term. TPOT is the
better-determined figure (a mean over every decode step of every request, and the model follows it to a few %), TTFT
the worse (some runs follow no closed-loop
regime the model has: a joint fit lets their TTFT misses pull the step terms, which TPOT then pays for, and lets
``step_s`` trade against ``request_s`` on TTFT, which is how the joint fit put TensorRT-LLM's ``request_s`` at
63–77 ms against the 44 ms of the least-median TTFT fit; ``docs/accuracy_engines_calibration.md``). So each block
is identified by the figure that determines it: the step terms by TPOT, and given them, the per-request and
start-up terms by TTFT — the order ``benchmarks/fit_startup_cohorts.py`` fitted the shipped profiles in (step terms
fixed, then ``startup_cohorts`` and ``request_s`` on TTFT). Iterating the Gauss–Newton loop lets the blocks see each
other's updates (block coordinate descent).

Why Cauchy on TTFT: whole groups of runs sit in a TTFT regime the closed loop does not have (TensorRT-LLM Llama-3.1-8B
TTFTs that grow with OSL at C = 8; unversioned vLLM Llama-3.1-70B runs over-predicted ~1.9×:
``docs/accuracy_engines.md``), misses of 30–90 % against the 5–15 % of the rest. Soft-L1's influence ψ(r) tends to a
constant for large r, so every such row keeps pulling with full L1 weight (soft-L1 alone on this stage put
TensorRT-LLM's ``request_s`` at 56 ms and ``startup_cohorts`` at 2.5 on its 60 sampled rows; with Cauchy 51 ms and 2.2,
against the least-median 44 ms and 1.85 on all 353); Cauchy's ψ(r) = r/(1 + (r/c)²) redescends (at c = 0.1, a 0.5 log
miss pulls 0.38 times as hard as a 0.1 one, a 0.9 miss 0.22 times; soft-L1's ψ = r/√(1 + (r/c)²): 1.4 times), the smooth
M-estimator counterpart of the least-median fit that set the shipped profiles' ``startup_cohorts`` and ``request_s``
(``benchmarks/fit_startup_cohorts.py``, which ignores up to half the rows), so a calibration fits these terms as the
shipped profiles were fitted. TPOT keeps soft-L1: its misses are a few % with isolated cliffs (no row regime to reject),
where a convex loss is safer. Cauchy is not convex, hence the start at the soft-L1 optimum.

Uncertainty: the 1σ standard error of each term from the final linearisation, per stage: σ² = s²·[(JᵀJ)⁻¹]_jj with
J the Jacobian of that stage's log residuals (TPOT rows for the step terms, TTFT rows for the others) and
s² = Σr²/(n − k) their variance (the textbook asymptotic covariance of a least-squares estimate; it assumes
independent residuals, ignores the soft-L1 weights and the other stage's uncertainty, so read it as a scale, not a
confidence interval). A term at a bound has no two-sided error (reported as ``at_bound``); a term the rows cannot
see (its Jacobian column is zero: no TP > 1 row for ``collective_s``, an unmixed engine for ``startup_cohorts``)
or cannot tell from an earlier term (one model's runs: ``launch_gap_s_per_layer`` against ``step_s``;
:func:`unidentified`) keeps the base profile's value and is reported as ``not constrained``. Values and errors
are in seconds, except ``startup_cohorts`` (cohorts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from pdplan.errors import SpecError
from pdplan.types import FloatArray

TPOT_TERMS = ("step_s", "step_s_per_seq", "collective_s", "launch_gap_s_per_layer")
"""Fitted on the TPOT residuals (first stage; module docstring)."""
TTFT_TERMS = ("request_s", "startup_cohorts")
"""Fitted on the TTFT residuals with the step terms fixed (second stage)."""
TERMS = TPOT_TERMS + TTFT_TERMS
COUNT_TERMS = frozenset({"startup_cohorts"})
"""Terms that are counts (dimensionless), not seconds."""
BOUNDS_S: Mapping[str, tuple[float, float]] = {
    "step_s": (0.0, 0.05),
    "step_s_per_seq": (0.0, 2e-4),
    "collective_s": (0.0, 5e-4),
    "launch_gap_s_per_layer": (0.0, 5e-4),
    "request_s": (0.0, 1.0),
    "startup_cohorts": (0.0, 6.0),
}
"""Physical ranges (seconds), wide around docs/engines.md §1: host step overheads of 0.2–13 ms (V0 bubbles up to 13 ms),
per-collective and per-layer costs of microseconds to tens of µs (a 50 ms step over 80 layers is 0.6 ms/layer),
per-request costs of tens of ms (AIC: 40–64 ms); the upper ends are 4–50× beyond the largest reported value.
``step_s_per_seq``: per running sequence per decode step, 0–200 µs (the CPU path is 11–15 % of end-to-end time at 32
users, docs/engines.md §1.5: ~1–3 ms of a 10–30 ms step, i.e. 30–100 µs per sequence; 200 µs is twice that top).
``startup_cohorts`` (cohorts): 0 = steady state only; 6 = twice the largest fitted value (vLLM 0.12.0, 2.9) and the
grid of ``benchmarks/fit_startup_cohorts.py``."""
STEPS_S: Mapping[str, float] = {
    "step_s": 5e-4,
    "step_s_per_seq": 1e-5,
    "collective_s": 5e-6,
    "launch_gap_s_per_layer": 5e-6,
    "request_s": 5e-3,
    "startup_cohorts": 0.25,
}
"""Forward-difference steps: about the size of each term's typical value, so the secant spans the range it moves in."""
MAX_LINEARISATIONS = 3
_F_SCALE = 0.1
SEPARABLE_MIN = 1e-2
"""Smallest share of a term's log-Jacobian column (its norm) outside the span of the earlier terms' columns for the
term to be fitted (:func:`unidentified`): below it the rows cannot tell the term from the earlier ones. 1e-2 is a
variance inflation factor of 10⁴; on the H100 runs the exactly confounded pairs (``launch_gap_s_per_layer`` against
``step_s`` on one model's rows, against ``collective_s`` on TP > 1 rows only) leave 1e-7 to 1e-4 (finite-difference
noise) and the separable ones 0.04 or more (``docs/accuracy_engines_calibration.md``)."""


Predictor = Callable[[Mapping[str, float]], tuple[FloatArray, FloatArray]]
"""Terms (s) → predicted (TTFT s, TPOT s) per run."""


@dataclass(frozen=True)
class TermFit:
    """One fitted term: value (s; cohorts for ``startup_cohorts``), 1σ standard error (same unit, None when not
    defined) and how it came out."""

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


def forward_jacobian(
    predict: Predictor,
    theta: Mapping[str, float],
    base: FloatArray,
    steps: Mapping[str, float],
    bounds: Mapping[str, tuple[float, float]],
) -> FloatArray:
    """d(prediction)/d(term) by forward differences, one pass per term at θ_j + h_j (h_j = ``steps[j]``, negated
    where the step would pass the term's upper bound); ``base`` is the prediction at ``theta`` (TTFT rows, then TPOT),
    columns in ``theta`` order."""
    cols = []
    for name, value in theta.items():
        h = steps[name] if value + steps[name] <= bounds[name][1] else -steps[name]
        ttft, tpot = predict({**theta, name: value + h})
        cols.append((np.concatenate([ttft, tpot]) - base) / h)
    return np.column_stack(cols)


def in_span(col: FloatArray, kept: list[FloatArray]) -> bool:
    """Whether less than :data:`SEPARABLE_MIN` of ``col``'s norm lies outside the span of the ``kept`` columns (the
    rows cannot tell the term from the earlier ones: :func:`unidentified`)."""
    if not kept:
        return False
    span = np.column_stack(kept)
    coef = np.linalg.lstsq(span, col, rcond=None)[0]
    return bool(np.linalg.norm(col - span @ coef) < SEPARABLE_MIN * np.linalg.norm(col))


def solve_log_residuals(
    base: FloatArray,
    jac: FloatArray,
    x0: FloatArray,
    meas: FloatArray,
    *,
    bounds: list[tuple[float, float]],
    scale: FloatArray,
    losses: tuple[str, ...],
    floor: float,
    weights: FloatArray | None = None,
) -> FloatArray:
    """Bounded least squares of log(max(base + jac·(x − x0), ``floor``) / meas) over x, each loss of ``losses`` in
    turn from the previous optimum (``linear`` first: from far off, soft-L1's flat tails stop trf on ftol before it
    has moved), solved in units of ``scale`` (comparable magnitudes) with :data:`_F_SCALE` as the robust losses'
    scale (module docstring). ``weights`` (one per residual, default 1) multiply each log residual by its square
    root, so a residual counts ``weight`` times in the linear loss's sum of squares."""
    lo = np.array([b[0] for b in bounds])
    hi = np.array([b[1] for b in bounds])
    root_w = np.ones(meas.size) if weights is None else np.sqrt(np.asarray(weights, float))

    def residuals(z: FloatArray) -> FloatArray:
        pred = base + jac @ (z * scale - x0)
        out: FloatArray = root_w * np.log(np.maximum(pred, floor) / meas)
        return out

    z, box = np.clip(x0, lo, hi) / scale, (lo / scale, hi / scale)
    for kind in losses:
        z = least_squares(residuals, z, bounds=box, loss=kind, f_scale=_F_SCALE, xtol=1e-12, ftol=1e-12).x
    out: FloatArray = np.clip(z * scale, lo, hi)
    return out


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
            f"{meas_ttft.size} benchmark run(s) cannot fit {len(start)} closed-loop terms ({', '.join(start)}); "
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
        jac = forward_jacobian(full, theta, base, STEPS_S, BOUNDS_S)
        passes += 1 + len(names)
        if it == 0:  # a term the runs cannot see, or cannot tell from an earlier one, keeps its start value
            frozen = unidentified(jac, base, names)
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


def unidentified(jac: FloatArray, base: FloatArray, names: list[str]) -> set[str]:
    """Terms the runs do not determine, given the Jacobian ``jac`` of the predictions ``base`` (rows: TTFT of every
    run, then TPOT; columns in ``names`` order): a term no run responds to (its column is zero: no TP > 1 row for
    ``collective_s``), and a term whose column, within its stage (TPOT rows for :data:`TPOT_TERMS`, TTFT rows for
    :data:`TTFT_TERMS`; log residuals, so each column divided by the predictions), lies in the span of the earlier
    terms' columns (less than :data:`SEPARABLE_MIN` of its norm outside it).

    Order of precedence: :data:`TERMS` order, the most general first. A step's host cost is
    ``step_s + L·launch_gap_s_per_layer + 2L·collective_s`` (TP > 1), so on one model's runs (one L) the launch gap is
    ``step_s`` times a constant, and on TP > 1 runs alone it is ``collective_s``/2: any split of the total between
    them fits those runs equally well, but not a model with another layer count or a TP-1 run. Such a term keeps the
    base profile's value (for TensorRT-LLM and vLLM, no launch gap under CUDA graphs) and the earlier term takes the
    whole cost, instead of the solver's arbitrary split."""
    n = base.size // 2
    size = np.abs(jac).max(axis=0) if jac.size else np.zeros(len(names))
    out = {k for k, s in zip(names, size, strict=True) if s <= 1e-9 * max(float(size.max(initial=0.0)), 1e-30)}
    for stage, rows in ((TPOT_TERMS, slice(n, 2 * n)), (TTFT_TERMS, slice(0, n))):
        kept: list[FloatArray] = []
        for k in stage:
            if k not in names or k in out:
                continue
            col = jac[rows, names.index(k)] / np.maximum(base[rows], 1e-12)
            if in_span(col, kept):
                out.add(k)
                continue
            kept.append(col)
    return out


def solve_linearised(
    base: FloatArray, jac: FloatArray, theta: dict[str, float], meas_ttft: FloatArray, meas_tpot: FloatArray
) -> dict[str, float]:
    """One Gauss–Newton step of :func:`fit_overheads` on the linearised predictions ``base + jac·(θ − theta)``
    (``base``, ``jac`` rows: TTFT of every run, then TPOT; columns in ``theta`` order): the terms of
    :data:`TPOT_TERMS` by bounded robust least squares of the TPOT log residuals, then those of :data:`TTFT_TERMS` on
    the TTFT log residuals with the first stage's move applied (module docstring)."""
    names = list(theta)
    unknown = [k for k in names if k not in TERMS]
    if unknown:
        raise SpecError(f"unknown calibration term(s) {unknown}; allowed: {', '.join(TERMS)}", field="terms")
    n = meas_ttft.size
    x0 = np.array([theta[k] for k in names])
    delta = np.zeros(len(names))
    for stage, rows, meas in ((TPOT_TERMS, slice(n, 2 * n), meas_tpot), (TTFT_TERMS, slice(0, n), meas_ttft)):
        cols = [i for i, k in enumerate(names) if k in stage]
        if not cols:
            continue
        stage_base = base[rows] + jac[rows] @ delta  # the other stage's move, where it has been made
        robust = stage is TTFT_TERMS
        step = _solve_stage(stage_base, jac[rows][:, cols], [names[i] for i in cols], x0[cols], meas, robust)
        delta[cols] = step - x0[cols]
    return {k: float(np.clip(x0[i] + delta[i], *BOUNDS_S[k])) for i, k in enumerate(names)}


def _solve_stage(
    base: FloatArray, jac: FloatArray, names: list[str], x0: FloatArray, meas: FloatArray, redescend: bool
) -> FloatArray:
    """Bounded least squares, then soft-L1 from there (and Cauchy from that, when ``redescend``: non-convex, hence
    started from the soft-L1 optimum), of log((base + jac·(x − x0)) / meas) over the terms ``names``."""
    losses = ("linear", "soft_l1", "cauchy") if redescend else ("linear", "soft_l1")
    scale = np.array([STEPS_S[k] for k in names])  # solve in units of each term's step: comparable magnitudes
    bounds = [BOUNDS_S[k] for k in names]
    return solve_log_residuals(base, jac, x0, meas, bounds=bounds, scale=scale, losses=losses, floor=1e-9)


def _uncertainty(
    values: dict[str, float],
    frozen: set[str],
    jac: FloatArray,
    ttft: FloatArray,
    tpot: FloatArray,
    meas_ttft: FloatArray,
    meas_tpot: FloatArray,
) -> tuple[TermFit, ...]:
    """1σ standard errors from the last linearisation's Jacobian of each stage's log residuals (module docstring)."""
    names = list(values)
    free = [k for k in names if k not in frozen]
    n = meas_ttft.size
    std: dict[str, float] = {}
    for stage, rows, pred, meas in (
        (TPOT_TERMS, slice(n, 2 * n), tpot, meas_tpot),
        (TTFT_TERMS, slice(0, n), ttft, meas_ttft),
    ):
        mine = [k for k in free if k in stage]
        if not mine:
            continue
        resid = np.log(np.maximum(pred, 1e-9) / meas)
        jac_log = jac[rows][:, [names.index(k) for k in mine]] / np.maximum(pred, 1e-12)[:, None]
        dof = max(resid.size - len(mine), 1)
        cov = float(resid @ resid) / dof * np.linalg.pinv(jac_log.T @ jac_log)
        std.update({k: float(np.sqrt(max(cov[j, j], 0.0))) for j, k in enumerate(mine)})
    out = []
    for k in names:
        if k in frozen:
            out.append(TermFit(k, values[k], None, "not constrained"))
            continue
        lo, hi = BOUNDS_S[k]
        at_bound = min(values[k] - lo, hi - values[k]) <= 1e-3 * STEPS_S[k]
        out.append(TermFit(k, values[k], None if at_bound else std[k], "at_bound" if at_bound else "fitted"))
    return tuple(out)
