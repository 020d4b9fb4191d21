"""A session hit within a prompt bin: its mean tokens, and the spread of the tokens it leaves to compute
(docs/prefix_cache.md §11, "The base model's hits per bin"; issue #24 item 6).

The session cache model (:func:`pdplan.cache.lru_closed_form.session_cache`) gives each turn index t and class h the
mean hit tokens x̄_th of the turns that hit, one count for every prompt length. Inside a prompt bin the turns mix and a
turn's hit is not independent of its prompt. On an xPyD prefill instance turn t's prompt is ``P_t = X_t + D_t``:
``X_t = P_{t−1}``, the previous turn's prompt (what a hit on the session's history finds), and ``D_t = new_t +
out_{t−1}``, the append and the previous output it computes again; a colocated instance holds the outputs, ``X_t =
P_{t−1} + out_{t−1}``, ``D_t = new_t``; turn 1 ``X_1 = S`` (the system prompt), ``D_1 = P_1 − S``. X_t and D_t are
independent (other parts of the session), so with F_X the law's CDF and ``G_X(y) = Σ_{x<y} x·f_X(x)``, for bin k
``[a_k, b_k)``:

    P(D_t = d, P_t ∈ k) = f_D(d)·[F_X(b_k − d) − F_X(a_k − d)]
    E[X_t | P_t ∈ k] = Σ_d f_D(d)·[G_X(b_k − d) − G_X(a_k − d)] / P(P_t ∈ k)

(:func:`turn_hit_laws`, on the token grid the prompt laws are computed on, :func:`pdplan.serving.prefix_cache.
turn_bins`). Pricing every point of a bin at the bins' common x̄_th made the computed tokens ``l − x̄`` spread as the
bin's prompts l: a short prompt of a turn priced with more hit than it can hold (clipped to the prompt), a long one
with less; on lognormal appends of mean 400 (σ = 1) the hit rows' computed tokens' second moment came out 0.98·10⁶
against the simulator's 0.67·10⁶ (the law's E[D²] = 0.70·10⁶), and with it the prefill wait and the TTFT tail
(docs/prefix_cache.md §11).

**Mean** (:func:`bin_factors`). Class h's hit of turn t in bin k is ``x̄_th·E[X_t | k]/E[X_t]``, the factors scaled to
average 1 over the turn's bins, so each turn's hit tokens and the token hit ratio do not move. Exact where the
class's hit is the previous turn's prompt (session-affine routing, no system prompt); a class that also holds older
histories (random routing) or system-prompt-only hits is scaled alike, an approximation.

**Spread** (:func:`computed_slices`). The tokens a hit leaves to compute in bin k are D_t | P_t ∈ k (:data:`SLICES`
equal-mass slice means per turn and bin), shifted to the class's mean there, ``E[P_t | k] − hit_tkh``, and mixed
over the turns with their bin and class weights into :data:`SLICES` equal-mass slices again (slice means: the mean
exact, the second moment that of the slices). :func:`pdplan.serving.prefix_cache.point_prices` pairs the bin's
quadrature points (prompt lengths l_j, ascending) with them in order, comonotone (a longer prompt computes more; D ≤ P
makes D's quantiles at most P's): point j holds ``x̄_kh + (l_j − l̄) − s_j``, s_j the slices' deviation from their
mean (:func:`point_spread`), where it held x̄_kh.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.numerics.sorted_stats import sorted_unique
from pdplan.specs.token_pmf import TokenPmf
from pdplan.types import FloatArray, IntArray

SLICES = 16
"""Equal-mass slices a (bin, class)'s computed tokens are kept in (the pool's quadrature takes 4 of them: 16 is 4
times finer, and a multiple of it)."""
NOISE = 1e-12
"""Cells of the FFT-computed law of D below this share of its largest cell are round-off, not support."""
MIN_BIN_MASS = 1e-12
"""A turn whose prompt reaches a bin with less probability than this takes the turn's overall figures there (its
weight in the bin is below that)."""


def on_grid(pmf: TokenPmf, step: int, size: int) -> FloatArray:
    """A token law on a grid of ``size`` cells of ``step`` tokens (each value rounded to its nearest cell)."""
    dense = np.zeros(size)
    np.add.at(dense, np.round(pmf.values / step).astype(np.int64), pmf.prob)
    return dense


@dataclass(frozen=True, slots=True)
class TurnHitLaws:
    """Per turn t (``[T]``) and prompt bin k (``[K]``) (module docstring): E[X_t | k] (tokens) and D_t | P_t ∈ k as
    :data:`SLICES` equal-mass slice means (``[T, K, SLICES]``, tokens); E[X_t] over all bins (``[T]``)."""

    history_mean: FloatArray
    history_overall: FloatArray
    missed: FloatArray


@dataclass(frozen=True, slots=True)
class HistoryGrid:
    """The part of :func:`turn_hit_laws` that the bin edges do not enter (read-only arrays, grid cells): the grid's
    origin and step (tokens), turn 1's prompt law ``[size]``, D's law ``[size]`` and its support ``d_cells``, and
    per later turn X's law: ``x_laws`` (``[T − 1, size]``, the previous turns' prompt laws), each convolved with the
    output law whose spectrum is ``out_hat`` where the cache holds the outputs (None: X is the previous prompt). The
    sensitivity rows rebin the same laws at scaled edges: computed once per (spec, holds_outputs), each binning reads
    it (:func:`laws_in_bins`, which cumulates X's laws at the columns its bins read, :func:`_x_cumulated`)."""

    origin: float
    step: int
    tokens: FloatArray
    first_law: FloatArray
    d_law: FloatArray
    d_cells: IntArray
    x_laws: FloatArray
    out_hat: npt.NDArray[np.complex128] | None = None


def history_grid(
    tokens: FloatArray, laws: FloatArray, new: TokenPmf, out: TokenPmf, *, holds_outputs: bool
) -> HistoryGrid:
    """:class:`HistoryGrid` of the turns' prompt laws ``laws [T, size]`` on the grid ``tokens`` (the system prompt
    plus a whole number of steps, :func:`pdplan.serving.prefix_cache.turn_bins`), the append and output laws and
    whether the cache holds the outputs (module docstring)."""
    size = laws.shape[1]
    step = max(1, round(float(tokens[1] - tokens[0]))) if size > 1 else 1
    new_grid, out_grid = on_grid(new, step, size), on_grid(out, step, size)
    d_law = new_grid if holds_outputs else _convolve(new_grid, out_grid, size)
    # turn t ≥ 2: X_t = P_{t−1}, or P_{t−1} + out_{t−1} where the outputs are held (convolved when binned, a few rows
    # at a time: agent-dualpath's [156, 2^16] held laws, 82 MB of fresh memory, cost more system time than their FFTs)
    out_hat = np.fft.rfft(out_grid) if holds_outputs and laws.shape[0] > 1 else None
    d_cells = np.flatnonzero(d_law > NOISE * float(d_law.max()))
    arrays = (tokens.view(), laws[0].view(), d_law, d_cells, laws[:-1].view())  # views: the callers' stay writable
    for a in (*arrays, *(() if out_hat is None else (out_hat,))):
        a.flags.writeable = False
    return HistoryGrid(float(tokens[0]), step, *arrays, out_hat=out_hat)


FFT_ROWS = 8
"""Rows of X's held-output laws convolved at a time (:func:`_x_cumulated`; each row's transform is its own: the same
doubles in any grouping)."""


def turn_prompt_laws(
    new_hat: npt.NDArray[np.complex128], out_hat: npt.NDArray[np.complex128], turns: int, size: int
) -> FloatArray:
    """``[turns, size]``: each turn's prompt law on a grid of ``size`` cells (:func:`pdplan.serving.prefix_cache.
    turn_bins`) from the spectra of the append and output laws (``[size/2 + 1]``): turn t's spectrum N·(O·N)^(t−1),
    each the previous one times O then N, inverted and clipped at 0 (round-off below). The spectra are inverted
    :data:`FFT_ROWS` rows at a time, each row alone (the same doubles as one transform per row), so that one
    transform plan serves a block: numpy's pocketfft plans every call afresh, and a 2^16-point plan's twiddle
    factors cost about a fifth of its transform (agent-dualpath's 157 turns at 2^16 cells: 0.45 G instructions fewer
    than a call per turn, docs/accuracy.md §7.17)."""
    laws = np.empty((turns, size))
    spectra = np.empty((min(turns, FFT_ROWS), out_hat.size), np.complex128)
    last: npt.NDArray[np.complex128] | None = None  # the previous turn's spectrum
    for lo in range(0, turns, FFT_ROWS):
        rows = spectra[: min(FFT_ROWS, turns - lo)]
        for row in rows:
            if last is None:
                row[...] = new_hat
            else:  # the products of one running spectrum, in place, in the same order
                np.multiply(last, out_hat, out=row)
                row *= new_hat
            last = row
        block = laws[lo : lo + rows.shape[0]]
        np.fft.irfft(rows, size, axis=1, out=block)
        np.clip(block, 0.0, None, out=block)
    return laws


def _shifted_by(laws: FloatArray, out_hat: npt.NDArray[np.complex128]) -> FloatArray:
    """Each row of ``laws [T, size]`` convolved with the law whose spectrum is ``out_hat`` (``[size/2 + 1]``), by FFT,
    clipped at 0 (round-off below): each row's forward transform, product and inverse are a whole-array call's
    (pocketfft transforms every row alone)."""
    spectrum = np.fft.rfft(laws, axis=1)
    spectrum *= out_hat
    out = np.fft.irfft(spectrum, laws.shape[1], axis=1)
    np.clip(out, 0.0, None, out=out)
    return out


def held_laws(grid: HistoryGrid) -> HistoryGrid:
    """``grid`` with X's held-output laws convolved once and kept whole (``[T − 1, size]``, read-only; ``grid`` itself
    where X's laws are already kept): for a grid binned more than once, the same doubles as each binning's
    :func:`_x_cumulated` blocks (each row's transform is its own), computed once."""
    if grid.out_hat is None:
        return grid
    rows = grid.x_laws.shape[0]
    held = np.empty(grid.x_laws.shape)
    for lo in range(0, rows, FFT_ROWS):
        held[lo : lo + FFT_ROWS] = _shifted_by(grid.x_laws[lo : lo + FFT_ROWS], grid.out_hat)
    held.flags.writeable = False
    return dataclasses.replace(grid, x_laws=held, out_hat=None)


def _x_cumulated(grid: HistoryGrid, cols: IntArray) -> tuple[FloatArray, FloatArray]:
    """:func:`_cumulated` of X's laws (:class:`HistoryGrid`): with the outputs held, :data:`FFT_ROWS` rows at a time,
    each block convolved (:func:`_shifted_by`) and cumulated while in cache, then dropped: every row the doubles of
    the whole held array's (each row's transform and running sums are its own), without its ``[T − 1, size]`` doubles
    and complex spectra (agent-dualpath: 82 MB each, whose first touch of fresh memory cost 0.36 s of system time
    against the transforms' 0.09 s of user time; huge-page faults) or the command's peak memory they set."""
    if grid.out_hat is None:
        return _cumulated(grid.x_laws, cols)
    rows = grid.x_laws.shape[0]
    cdf, first = np.empty((rows, cols.size)), np.empty((rows, cols.size))
    for lo in range(0, rows, FFT_ROWS):
        block = slice(lo, lo + FFT_ROWS)
        cdf[block], first[block] = _cumulated(_shifted_by(grid.x_laws[block], grid.out_hat), cols)
    return cdf, first


def turn_hit_laws(
    tokens: FloatArray, laws: FloatArray, new: TokenPmf, out: TokenPmf, edges: FloatArray, *, holds_outputs: bool
) -> TurnHitLaws:
    """:class:`TurnHitLaws` from the turns' prompt laws ``laws [T, size]`` on the grid ``tokens`` (the system prompt
    plus a whole number of steps, :func:`pdplan.serving.prefix_cache.turn_bins`), the append and output laws, the bin
    ``edges`` and whether the cache holds the outputs (module docstring): :func:`laws_in_bins` of
    :func:`history_grid`."""
    return laws_in_bins(history_grid(tokens, laws, new, out, holds_outputs=holds_outputs), edges)


def laws_in_bins(grid: HistoryGrid, edges: FloatArray) -> TurnHitLaws:
    """:class:`TurnHitLaws` of a :class:`HistoryGrid` in the prompt bins of ``edges`` (module docstring)."""
    lo = np.searchsorted(grid.tokens, edges[:-1], side="left")  # bin k: the cells with edges[k] <= tokens < edges[k+1]
    hi = np.searchsorted(grid.tokens, edges[1:], side="left")
    first = _first_turn(grid.first_law, lo, hi)
    later = _conditional(grid, lo, hi)
    mass, held, slices = (np.concatenate((a[None], b)) for a, b in zip(first, later, strict=True))
    history = grid.origin + grid.step * held
    overall = np.sum(mass * history, axis=1) / np.maximum(mass.sum(axis=1), 1e-300)
    return TurnHitLaws(history, overall, slices * grid.step)


def _convolve(a: FloatArray, b: FloatArray, size: int) -> FloatArray:
    """The law of the sum of two independent laws on the grid, directly over their supports (no FFT round-off), cut
    to ``size`` cells (the grid spans every turn's prompt, so nothing of a turn's parts falls beyond)."""
    ta, tb = int(np.flatnonzero(a)[-1]) + 1, int(np.flatnonzero(b)[-1]) + 1
    out = np.zeros(size)
    full = np.convolve(a[:ta], b[:tb])[:size]
    out[: full.size] = full
    return out


def _first_turn(law: FloatArray, lo: np.ndarray, hi: np.ndarray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Turn 1 (X = S, an atom at the grid's origin; D = P_1 − S) per bin: its mass, E[X | bin] − S = 0 and the slice
    means of D | bin (cells); a bin it does not reach takes its whole law."""
    cells = np.flatnonzero(law > NOISE * float(law.max()))  # an FFT's law: its round-off is no support
    mass = np.array([law[a:b].sum() for a, b in zip(lo, hi, strict=True)])
    inside = (cells[None, :] >= lo[:, None]) & (cells[None, :] < hi[:, None]) & (mass[:, None] > MIN_BIN_MASS)
    weights = np.where(inside | (mass[:, None] <= MIN_BIN_MASS), law[cells][None, :], 0.0)
    return mass, np.zeros(lo.size), _sorted_slice_means(cells.astype(np.float64), weights)


def _conditional(grid: HistoryGrid, lo: np.ndarray, hi: np.ndarray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per later turn ``[T − 1]`` (X's and D's laws those of ``grid``) and bin ``[K]`` (cells ``[lo, hi)``): P(X + D
    in it), E[X | it] and the slice means of D | it (``[T − 1, K, SLICES]``), in grid cells. A bin takes the D that
    fit below its top (X ≥ 0); a turn that does not reach a bin takes its overall figures there. With F_X's
    ``cdf[t, y] = P(X_t < y)`` and ``first[t, y] = Σ_{x<y} x·f_X(x)`` (:func:`_cumulated`, at the columns read)."""
    d_law, cells, size = grid.d_law, grid.d_cells, grid.x_laws.shape[1]
    reads = [(b - cells[cells < b], np.maximum(a - cells[cells < b], 0)) for a, b in zip(lo, hi, strict=True)]
    cols = sorted_unique(np.concatenate([np.concatenate(r) for r in reads] + [np.array([size])]))
    cdf, first = _x_cumulated(grid, cols)
    mean_x = first[:, -1] / np.maximum(cdf[:, -1], 1e-300)  # column ``size``: the whole law
    turns = cdf.shape[0]
    mass, held = np.zeros((turns, lo.size)), np.zeros((turns, lo.size))
    slices = np.zeros((turns, lo.size, SLICES))
    for k, b in enumerate(hi):
        c = cells[cells < b]
        top, bottom = (np.searchsorted(cols, r) for r in reads[k])  # their places among the cumulated columns
        joint = d_law[c] * (cdf[:, top] - cdf[:, bottom])  # [T, cells]: P(D = d, X + D in bin k)
        mass[:, k] = joint.sum(axis=1)
        ok = mass[:, k] > MIN_BIN_MASS
        held[:, k] = np.where(
            ok, (d_law[c] * (first[:, top] - first[:, bottom])).sum(axis=1) / np.maximum(mass[:, k], 1e-300), mean_x
        )
        weights = np.where(ok[:, None], joint, d_law[cells][None, : c.size])
        slices[:, k] = _sorted_slice_means(c.astype(np.float64), weights)
    return mass, held, slices


CHAINED_COLUMNS = 512
"""Up to this many columns read, :func:`_cumulated` chains the running sums from column to column in one buffer;
more, it cumulates the whole grid (the same doubles either way)."""


CUMULATED_BLOCK = 4096
"""The chained running sums of :func:`_cumulated` advance this many grid cells at a time (any size gives the same
doubles): a buffer of ``[T, 4097]`` (5 MB in agent-dualpath) that stays in cache, not one as wide as the widest gap
between two columns read (the last, up to the whole law: 2^15 cells there, 40 MB of fresh memory per binning)."""


def _cumulated(x: FloatArray, cols: IntArray) -> tuple[FloatArray, FloatArray]:
    """``cdf[:, y] = Σ_{i<y} x[:, i]`` and ``first[:, y] = Σ_{i<y} i·x[:, i]`` at the ascending columns ``cols``
    (``[T, cols]``; column 0 is 0), each the running sum :func:`numpy.cumsum` gives, in the same order: a column's sum
    continues the previous column's (the buffer's first cell) over the cells between them, :data:`CUMULATED_BLOCK`
    cells at a time, so only the columns read are kept (agent-dualpath's binnings read 25 of 2^16 + 1)."""
    turns, size = x.shape
    if cols.size > CHAINED_COLUMNS:
        cdf, first = np.zeros((turns, size + 1)), np.zeros((turns, size + 1))  # column 0: nothing below the grid
        np.cumsum(x, axis=1, out=cdf[:, 1:])  # into the slice: no concatenated copy of a [T, size] array
        np.multiply(x, np.arange(size), out=first[:, 1:])
        np.cumsum(first[:, 1:], axis=1, out=first[:, 1:])
        return cdf[:, cols], first[:, cols]
    cdf, first = np.zeros((turns, cols.size)), np.zeros((turns, cols.size))
    gap = int(np.max(np.diff(cols, prepend=0), initial=0))
    buffer = np.empty((turns, min(gap, CUMULATED_BLOCK) + 1))
    start = 0  # the columns before ``start`` are summed; nothing yet
    for i, y in enumerate(cols):
        if y == 0:
            continue
        cdf[:, i] = _running(x, start, y, None if not start else cdf[:, i - 1], buffer, weighted=False)
        first[:, i] = _running(x, start, y, None if not start else first[:, i - 1], buffer, weighted=True)
        start = y
    return cdf, first


def _running(
    x: FloatArray, start: int, stop: int, carried: FloatArray | None, buffer: FloatArray, *, weighted: bool
) -> FloatArray:
    """``carried`` (the running sum of the cells before ``start``; None: none, ``start`` is 0) continued over the
    cells ``[start, stop)`` of each row of ``x`` (times the cell's index if ``weighted``), in ``buffer``'s width at a
    time: each block's cumsum starts from the previous sum in its first cell, the additions of one cumsum over the
    row in its order."""
    total = carried
    for a in range(start, stop, buffer.shape[1] - 1):
        b = min(a + buffer.shape[1] - 1, stop)
        lead = 0 if total is None else 1
        run = buffer[:, : lead + b - a]
        if total is not None:
            run[:, 0] = total
        if weighted:
            np.multiply(x[:, a:b], np.arange(a, b), out=run[:, lead:])
        else:
            run[:, lead:] = x[:, a:b]
        np.cumsum(run, axis=1, out=run)
        total = run[:, -1].copy()
    if total is None:
        raise ValueError("_running needs stop > start")
    return total


def _sorted_slice_means(values: FloatArray, weights: FloatArray) -> FloatArray:
    """:func:`slice_means` of ascending ``values`` (``[n]``, or one row per row of ``weights``) under each row of
    ``weights`` ``[R, n]`` (a row of no weight: zeros)."""
    total = np.maximum(weights.sum(axis=1, keepdims=True), 1e-300)
    start = np.zeros((weights.shape[0], 1))
    mass = np.concatenate((start, np.cumsum(weights, axis=1) / total), axis=1)
    integral = np.concatenate((start, np.cumsum(weights * values, axis=1) / total), axis=1)
    u = np.linspace(0.0, 1.0, SLICES + 1)
    at = np.array([np.interp(u, m, i) for m, i in zip(mass, integral, strict=True)]).reshape(-1, SLICES + 1)
    return np.asarray(np.diff(at, axis=1) * SLICES, dtype=np.float64)


def slice_means(values: FloatArray, weights: FloatArray, slices: int = SLICES) -> FloatArray:
    """The means of ``slices`` equal-mass slices of the law putting ``weights`` on ``values`` (any order), lowest
    first: ``slices·∫ Q(u) du`` over each slice, Q the law's quantile function (an atom is split between slices)."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], np.clip(weights[order], 0.0, None)
    total = float(w.sum())
    if not total > 0.0:
        return np.full(slices, float(np.mean(values)) if values.size else 0.0)
    mass = np.concatenate(([0.0], np.cumsum(w) / total))
    integral = np.concatenate(([0.0], np.cumsum(w * v) / total))
    at = np.interp(np.linspace(0.0, 1.0, slices + 1), mass, integral)
    return np.asarray(np.diff(at) * slices, dtype=np.float64)


def bin_factors(laws: TurnHitLaws, turn_bins: FloatArray) -> FloatArray:
    """``[T, K]``: E[X_t | k]/E[X_t] (1 where the turn holds no history), scaled so that its mean over the turn's bin
    law ``turn_bins [T, K]`` is 1 (module docstring, Mean)."""
    ratio = np.where(
        laws.history_overall[:, None] > 0.0, laws.history_mean / np.maximum(laws.history_overall, 1e-300)[:, None], 1.0
    )
    norm = np.sum(turn_bins * ratio, axis=1, keepdims=True)
    return np.asarray(np.where(norm > 0.0, ratio / np.maximum(norm, 1e-300), 1.0), dtype=np.float64)


def computed_slices(laws: TurnHitLaws, weights: FloatArray, hits: FloatArray) -> FloatArray:
    """``[K, H, SLICES]``: each (bin, class)'s computed tokens' deviations from their mean, lowest first (module
    docstring, Spread), from the turns' ``weights [T, K, H]`` (P(turn, bin, class)) and class hits ``hits [T, K, H]``;
    NaN for the misses (class 0) and for a (bin, class) no turn reaches (one hit count there)."""
    turns, bins, classes = weights.shape
    shift = laws.history_mean[:, :, None] - hits  # computed = D + E[X | k] − hit: mean E[P | k] − hit
    values = laws.missed[:, :, None, :] + shift[:, :, 1:, None]  # [T, K, H − 1, SLICES]
    values = values.transpose(1, 2, 0, 3).reshape(bins, classes - 1, turns * SLICES)
    w = np.repeat(weights[:, :, 1:].transpose(1, 2, 0), SLICES, axis=2)  # each slice 1/SLICES of its turn
    order = np.argsort(values, axis=2, kind="stable")
    v, w = np.take_along_axis(values, order, axis=2), np.take_along_axis(w, order, axis=2)
    rows = (w.sum(axis=2) > 0.0).ravel()
    means = np.full((bins * (classes - 1), SLICES), math.nan)
    flat_v, flat_w = v.reshape(-1, turns * SLICES)[rows], w.reshape(-1, turns * SLICES)[rows]
    means[rows] = _sorted_slice_means(flat_v, np.clip(flat_w, 0.0, None))
    out = np.full((bins, classes, SLICES), math.nan)
    out[:, 1:] = (means - means.mean(axis=1, keepdims=True)).reshape(bins, classes - 1, SLICES)
    return out


def point_spread(spread: FloatArray, points: FloatArray) -> FloatArray:
    """``[K, H, J]``: the offset of each quadrature point's hit from its (bin, class)'s mean, ``(l_j − l̄) − s_j``
    with s_j the ``spread [K, H, SLICES]`` cut into J equal-mass slices and paired with the points ``[K, H, J]`` in
    their order (module docstring, Spread); 0 where the spread is NaN (one hit count)."""
    j = points.shape[2]
    knots = np.concatenate((np.zeros((*spread.shape[:2], 1)), np.cumsum(spread, axis=2) / SLICES), axis=2)
    grid, u = np.linspace(0.0, 1.0, SLICES + 1), np.linspace(0.0, 1.0, j + 1)
    interp = np.array([np.interp(u, grid, node) for node in np.eye(SLICES + 1)])  # [SLICES + 1, J + 1]
    s = np.diff(knots @ interp, axis=2) * j  # [K, H, J]: ∫ Q over each of J equal-mass slices, ascending
    rank = np.argsort(np.argsort(points, axis=2, kind="stable"), axis=2, kind="stable")
    offset = points - points.mean(axis=2, keepdims=True) - np.take_along_axis(s, rank, axis=2)
    return np.asarray(np.where(np.isnan(offset), 0.0, offset), dtype=np.float64)
