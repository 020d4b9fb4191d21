"""Refitting an engine profile's end-to-end terms on a chosen set of rows (for ``benchmarks/cross_gpu_accuracy.py``).

The numerical pieces are pdplan calibrate's own (:mod:`pdplan.calibrate.engine_fit`: ``forward_jacobian``,
``in_span``, ``solve_log_residuals``); this module holds only what differs: the terms, their stages and losses, the
chord iteration over a fixed Jacobian.

Which terms (:data:`FITTED`): those the shipped profiles fit on end-to-end rows. Until issue #23 item 2 each was
fitted on H100 rows only (``aiconfigurator-silicon/h100_sxm.csv``), by its own fitter:

* ``vllm`` (0.12.0): ``step_s`` (TPOT) on the 93 vLLM 0.12.0 dense rows (pdplan calibrate's two-stage fit with every
  other term held, the former ``benchmarks/fit_shipped_profile.py``);
* ``vllm-0.18``: ``step_s`` (nnls on the TPOT deficit) on the 88 vLLM 0.18.0 MoE rows
  (``benchmarks/fit_vllm018_overheads.py``);
* ``sglang`` (0.5.1.post1): ``step_s`` on its 84 dense rows of 0.5.1.post1 and 0.5.8.post1
  (``benchmarks/fit_engine_overheads.py``, nnls); since issue #23 item 3 (2026-12-07) it prices the 0.5.1.post1 rows
  alone (78, H100 only; its cross-GPU fit on the SGLang H200 rows, ``cross_gpu_accuracy.donor_rows``) and
  ``sglang-0.5.9`` the 0.5.6 to 0.5.9 rows of both GPUs, its ``step_s`` from the joint fit;
* ``trtllm`` (1.0.0rc3): ``step_s`` on its 357 dense rows (``fit_engine_overheads.py``), ``request_s`` and
  ``startup_cohorts`` on its 353 1.0.0rc3 dense rows (``benchmarks/fit_startup_cohorts.py``, least-median),
  ``eager_s_per_moe_layer`` on its 126 1.0.0rc3 Qwen3-235B rows (``benchmarks/fit_eager_moe_step.py``).

Since issue #23 item 2 (2026-12-07) every one of them is fitted once per profile, jointly on the rows of both GPUs
that the profile prices (dense, MoE and disaggregated), by :func:`fit` with :func:`gpu_balanced_weights`
(``benchmarks/fit_shipped_profile.py``, which writes the values and their source into the engine YAMLs).

Issue #23 removed (2026-12-06; the table of docs/cross_gpu_accuracy.md §8.4) the terms that did not improve the
cross-GPU error: vLLM 0.12 ``step_s_per_seq``, ``request_s`` and ``startup_cohorts``; vLLM 0.18
``request_s_per_layer``; SGLang ``collective_s``; TensorRT-LLM ``collective_s``, and on 2026-12-07, settled by fits
iterated to convergence (:func:`fit_converged`, ``benchmarks/converged_removal.py``), TensorRT-LLM
``startup_cohorts``. They sit at their :data:`UNFITTED` values in the profiles and are no longer refitted here.

Besides these numbers, three profiles carry a regime chosen on the same H100 rows (``steady_arrivals: spread``:
vllm, vllm-0.18, trtllm); a discrete choice, not refitted here (the cross-GPU rows test it as shipped).

Method (the shipped two-stage fit of :mod:`pdplan.calibrate.engine_fit`, generalised to the terms above): stages in
order, each bounded robust least squares of log residuals on the training rows — the per-step terms on TPOT
(least squares, then soft-L1), the eager-step time on TTFT and TPOT together (soft-L1: it moves both, as its own fit
scored both), the per-request terms on TTFT (least squares, soft-L1, then Cauchy: the redescending loss the shipped
TTFT terms were fitted with). Predictions are linearised once per profile at the shipped values (one exact pass per
term, forward differences of :data:`STEPS`), and each fit iterates the chord method: an exact pass at the current
terms, the fixed Jacobian for the slopes (at most :data:`CHORD_PASSES` solves). A term the training rows do not move
(its Jacobian column is zero there: no MoE row for the eager term, no TP > 1 row for ``collective_s``) or cannot tell
from an earlier term of its stage (less than :data:`SEPARABLE_MIN` of its log-column outside the earlier columns'
span: ``engine_fit.unidentified``'s rule) keeps the shipped value and is reported as not constrained.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pdplan.calibrate.engine_fit import BOUNDS_S, STEPS_S, forward_jacobian, in_span, solve_log_residuals

FITTED: Mapping[str, tuple[str, ...]] = {
    "vllm": ("step_s",),
    "vllm-0.18": ("step_s",),
    "sglang": ("step_s",),
    "sglang-0.5.9": ("step_s",),
    "trtllm": ("step_s", "request_s", "eager_s_per_moe_layer"),
}
"""Per shipped profile, the terms fitted on end-to-end rows (module docstring)."""

MEANING: Mapping[str, str] = {
    "step_s": "host time per engine step (scheduler, input preparation, sampling)",
    "step_s_per_seq": "host time per running sequence per decode step",
    "collective_s": "per all-reduce beyond the kernel table's latency (2 per layer at TP > 1)",
    "request_s": "per request on TTFT (API server, HTTP/SSE, dispatch)",
    "request_s_per_layer": "per request per layer on TTFT (prefill dispatch)",
    "startup_cohorts": "first cohorts of start-up excess in a benchmark average (count)",
    "eager_s_per_moe_layer": "host launch time per MoE layer of a step with prefill tokens (floor under the step)",
}

UNFITTED: Mapping[str, float] = {
    "step_s": 0.0,
    "step_s_per_seq": 0.0,
    "collective_s": 0.0,
    "request_s": 0.005,
    "request_s_per_layer": 0.0,
    "startup_cohorts": 1.0,
    "eager_s_per_moe_layer": 0.0,
}
"""A term's value when it is not fitted ("without the term"): 0 for the host times; ``request_s`` the 5 ms the
unfitted profiles take from docs/engines.md §1.5 (sglang, vllm-0.18); ``startup_cohorts`` 1, the burst cohort alone,
as the closed loop reads an unset value."""

BOUNDS: Mapping[str, tuple[float, float]] = {
    **BOUNDS_S,
    "eager_s_per_moe_layer": (0.0, 2e-3),
    "request_s_per_layer": (0.0, 8e-4),
}
"""Physical ranges: pdplan calibrate's (``engine_fit.BOUNDS_S``); the eager time per MoE layer 0-2 ms (the grid of
``fit_eager_moe_step.py``), the per-layer request time 0-0.8 ms (AIConfigurator's value, the top of
``fit_vllm018_overheads.py``'s scan)."""
STEPS: Mapping[str, float] = {**STEPS_S, "eager_s_per_moe_layer": 1e-4, "request_s_per_layer": 1e-4}
"""Forward-difference steps (pdplan calibrate's; the two extra terms about a sixth of their typical values)."""

STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tpot", ("step_s", "step_s_per_seq", "collective_s")),
    ("both", ("eager_s_per_moe_layer",)),
    ("ttft", ("request_s", "request_s_per_layer", "startup_cohorts")),
)
"""Fit order and the residuals each stage's terms are fitted on (module docstring)."""
CHORD_PASSES = 2

Pricer = Callable[..., tuple[np.ndarray, np.ndarray]]
"""(terms, optional boolean mask of rows) → exact (TTFT, TPOT) in ms of every row of the profile (NaN outside the
mask)."""


@dataclass(frozen=True)
class Linearised:
    """Exact predictions of every row at the shipped terms and their slopes."""

    theta0: dict[str, float]
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    jac: np.ndarray
    """Shape (2n, k): d(TTFT rows then TPOT rows, ms)/d(term), columns in ``theta0`` order."""


@dataclass(frozen=True)
class Fit:
    """A fit's terms, which of them the rows did not constrain, and its exact predictions of every row (ms)."""

    theta: dict[str, float]
    frozen: frozenset[str]
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray


def linearise(price: Pricer, theta0: Mapping[str, float]) -> Linearised:
    """One exact pass at ``theta0`` and one per term at ``theta0 + h`` (``engine_fit.forward_jacobian``)."""
    ttft, tpot = price(theta0)
    jac = forward_jacobian(price, theta0, np.concatenate([ttft, tpot]), STEPS, BOUNDS)
    return Linearised(dict(theta0), ttft, tpot, jac)


def _stage_rows(stage: str, train: np.ndarray) -> np.ndarray:
    """Indices into the stacked (TTFT, TPOT) vector of the stage's residuals on the training rows."""
    n = train.size
    idx = np.flatnonzero(train)
    if stage == "tpot":
        return idx + n
    if stage == "ttft":
        return idx
    return np.concatenate([idx, idx + n])


def constrained(lin: Linearised, train: np.ndarray, free: Sequence[str]) -> set[str]:
    """The terms of ``free`` the training rows cannot determine (module docstring)."""
    names = list(lin.theta0)
    base = np.concatenate([lin.ttft_ms, lin.tpot_ms])
    out: set[str] = set()
    for stage, terms in STAGES:
        rows = _stage_rows(stage, train)
        kept: list[np.ndarray] = []
        for k in terms:
            if k not in free:
                continue
            col = lin.jac[rows, names.index(k)] / np.maximum(base[rows], 1e-9)
            col = np.where(np.isfinite(col), col, 0.0)
            if not np.any(np.abs(col) > 1e-9):
                out.add(k)
                continue
            if in_span(col, kept):
                out.add(k)
                continue
            kept.append(col)
    return out


def _solve(
    pred: np.ndarray,
    slopes: np.ndarray,
    meas: np.ndarray,
    x0: np.ndarray,
    names: list[str],
    loss: tuple[str, ...],
    weights: np.ndarray,
) -> np.ndarray:
    """Bounded robust least squares of log((pred + slopes·(x − x0))/meas), each residual weighted, losses applied in
    turn (``engine_fit.solve_log_residuals``; predictions in ms, floored at 1e-6 ms)."""
    scale = np.array([STEPS[k] for k in names])
    bounds = [BOUNDS[k] for k in names]
    return solve_log_residuals(
        pred, slopes, x0, meas, bounds=bounds, scale=scale, losses=loss, floor=1e-6, weights=weights
    )


LOSSES = {"tpot": ("linear", "soft_l1"), "both": ("linear", "soft_l1"), "ttft": ("linear", "soft_l1", "cauchy")}


def _step(
    lin: Linearised,
    theta: dict[str, float],
    pred: np.ndarray,
    meas: np.ndarray,
    train: np.ndarray,
    free: list[str],
    weights: np.ndarray,
) -> dict[str, float]:
    """One chord step: the stages in order on ``pred`` (exact at ``theta``) + the fixed Jacobian; ``weights`` per
    row (length of the stacked (TTFT, TPOT) vector)."""
    names = list(lin.theta0)
    delta = np.zeros(len(names))
    for stage, terms in STAGES:
        mine = [k for k in terms if k in free]
        if not mine:
            continue
        rows = _stage_rows(stage, train)
        cols = [names.index(k) for k in mine]
        stage_pred = pred[rows] + lin.jac[rows] @ delta
        ok = np.isfinite(stage_pred) & np.isfinite(meas[rows])
        x0 = np.array([theta[k] for k in mine])
        x = _solve(
            stage_pred[ok], lin.jac[rows][ok][:, cols], meas[rows][ok], x0, mine, LOSSES[stage], weights[rows][ok]
        )
        delta[cols] = x - x0
    return {k: theta[k] + float(delta[i]) for i, k in enumerate(names)}


def fit(
    lin: Linearised,
    price: Pricer,
    meas_ttft: np.ndarray,
    meas_tpot: np.ndarray,
    train: np.ndarray,
    *,
    fixed: Mapping[str, float] | None = None,
    need: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> Fit:
    """Fit the profile's terms on the ``train`` rows (boolean mask), ``fixed`` ones held at the given values, each
    row's residuals weighted by ``weights`` (per row; default 1: see :func:`gpu_balanced_weights`); the result carries
    exact predictions at the fitted terms of the ``need`` rows (default: every row; NaN elsewhere). Intermediate chord
    passes price the training rows only."""
    row_w = np.ones(train.size) if weights is None else np.asarray(weights, float)
    stacked_w = np.concatenate([row_w, row_w])
    fixed = dict(fixed or {})
    theta = {**lin.theta0, **fixed}
    free = [k for k in lin.theta0 if k not in fixed]
    frozen = constrained(lin, train, free)
    free = [k for k in free if k not in frozen]
    meas = np.concatenate([meas_ttft, meas_tpot])
    ttft, tpot = (lin.ttft_ms, lin.tpot_ms) if not fixed else price(theta, train)
    for i in range(CHORD_PASSES if free else 0):
        new = _step(lin, theta, np.concatenate([ttft, tpot]), meas, train, free, stacked_w)
        moved = max(abs(new[k] - theta[k]) / STEPS[k] for k in free)
        theta = new
        if i == CHORD_PASSES - 1 or moved < 0.05:
            break
        ttft, tpot = price(theta, train)
    ttft, tpot = price(theta, np.ones(train.size, bool) if need is None else need)
    return Fit(theta, frozenset(frozen), ttft, tpot)


def gpu_balanced_weights(gpu: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Per row, the weight that gives each GPU's training rows the same total: ``n / (g · n_gpu)`` for ``n`` training
    rows over ``g`` GPUs, ``n_gpu`` of them on the row's GPU (mean weight 1; 0 outside ``train``).

    Why: a host term (per step, per request, start-up) is CPU-side, the same on both GPUs, so the joint fit should
    settle it where the two GPUs' residuals balance, not where the GPU with more rows lies (TensorRT-LLM: 507 H100
    rows against 305 H200 rows; SGLang: 130 against 182). Equal totals make the joint fit the counterpart of the two
    cross-GPU folds, each of which trusts one GPU fully. Each stage's loss (least squares, then soft-L1, Cauchy)
    sees ``sqrt(weight)``-scaled log residuals (``engine_fit.solve_log_residuals``)."""
    out = np.zeros(gpu.size)
    labels = np.unique(gpu[train])
    n = int(train.sum())
    for g in labels:
        mask = train & (gpu == g)
        out[mask] = n / (labels.size * int(mask.sum()))
    return out


CONVERGE_SIGMA = 0.1
"""Gauss–Newton stops when every free term moves by less than this fraction of its 1σ standard error
(:func:`stage_std`): a move a tenth of the term's own uncertainty cannot change which fit the rows prefer."""
CONVERGE_MAX = 8
"""Linearisations at most in :func:`fit_converged` (each costs one exact pass per free term plus one)."""


@dataclass(frozen=True)
class Converged:
    """A :func:`fit_converged` result: the fit, each free term's 1σ at the last linearisation, the terms after each
    linearisation's step, and whether the last step moved every term by less than :data:`CONVERGE_SIGMA` of its σ."""

    fit: Fit
    std: dict[str, float]
    path: tuple[dict[str, float], ...]
    converged: bool


def stage_std(
    lin: Linearised, meas: np.ndarray, train: np.ndarray, free: Sequence[str], weights: np.ndarray
) -> dict[str, float]:
    """1σ standard error of each free term at ``lin``, per stage: σ² = s²·[(JᵀJ)⁻¹]_jj over the stage's weighted log
    residuals r = √w·log(pred/meas) and their Jacobian J = √w·(∂pred/∂term)/pred, s² = Σr²/(n − k) (the asymptotic
    covariance of a least-squares estimate, as ``engine_fit._uncertainty``; robust weights ignored, so a scale, not
    a confidence interval). ``weights``: per stacked (TTFT, TPOT) residual."""
    names = list(lin.theta0)
    pred = np.concatenate([lin.ttft_ms, lin.tpot_ms])
    out: dict[str, float] = {}
    for stage, terms in STAGES:
        mine = [k for k in terms if k in free]
        if not mine:
            continue
        rows = _stage_rows(stage, train)
        ok = np.isfinite(pred[rows]) & np.isfinite(meas[rows]) & (pred[rows] > 0)
        rows = rows[ok]
        root_w = np.sqrt(weights[rows])
        resid = root_w * np.log(pred[rows] / meas[rows])
        jac = root_w[:, None] * lin.jac[rows][:, [names.index(k) for k in mine]] / pred[rows][:, None]
        cov = float(resid @ resid) / max(resid.size - len(mine), 1) * np.linalg.pinv(jac.T @ jac)
        out.update({k: float(np.sqrt(max(cov[j, j], 0.0))) for j, k in enumerate(mine)})
    return out


def fit_converged(
    price: Pricer,
    start: Mapping[str, float],
    meas_ttft: np.ndarray,
    meas_tpot: np.ndarray,
    train: np.ndarray,
    *,
    fixed: Mapping[str, float] | None = None,
    need: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> Converged:
    """:func:`fit`'s staged objective iterated to convergence by Gauss–Newton: each pass re-linearises the exact
    predictions of the training rows at the current terms (one exact pass, one per free term) and takes one staged
    step (:func:`_step`), until every free term moves by less than :data:`CONVERGE_SIGMA` of its 1σ
    (:func:`stage_std`) or :data:`CONVERGE_MAX` linearisations.

    Why not :func:`fit`'s chord passes: they keep the Jacobian of the start, so their fixed point solves
    J(θ₀)ᵀ·ψ(r(θ)) = 0 instead of J(θ)ᵀ·ψ(r(θ)) = 0 and depends on where the fit was linearised (TensorRT-LLM
    without ``startup_cohorts``: 26.1 vs 27.0 % pooled cross-GPU TTFT median from two starts,
    docs/cross_gpu_accuracy.md §8.4). At a Gauss–Newton fixed point the Jacobian is the one at the solution, so
    two starts that converge land on the same terms. ``start`` gives every term's initial value; ``fixed`` ones
    are held (and not differentiated); terms the training rows do not constrain (:func:`constrained`, at the first
    linearisation) keep their start value."""
    fixed = dict(fixed or {})
    row_w = np.ones(train.size) if weights is None else np.asarray(weights, float)
    stacked_w = np.concatenate([row_w, row_w])
    meas = np.concatenate([meas_ttft, meas_tpot])

    def price_train(terms: Mapping[str, float], mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        return price({**fixed, **terms}, train if mask is None else mask)

    theta = {k: float(v) for k, v in start.items() if k not in fixed}
    free: list[str] = []
    frozen: set[str] = set()
    std: dict[str, float] = {}
    path: list[dict[str, float]] = []
    converged = False
    for i in range(CONVERGE_MAX):
        lin = linearise(price_train, theta)
        if i == 0:
            frozen = constrained(lin, train, list(theta))
            free = [k for k in theta if k not in frozen]
        if not free:
            converged = True
            break
        std = stage_std(lin, meas, train, free, stacked_w)
        new = _step(lin, theta, np.concatenate([lin.ttft_ms, lin.tpot_ms]), meas, train, free, stacked_w)
        moved = [abs(new[k] - theta[k]) / max(std[k], 1e-12) for k in free]
        theta = new
        path.append(dict(theta))
        if max(moved) < CONVERGE_SIGMA:
            converged = True
            break
    ttft, tpot = price({**fixed, **theta}, np.ones(train.size, bool) if need is None else need)
    return Converged(Fit({**theta, **fixed}, frozenset(frozen), ttft, tpot), std, tuple(path), converged)
