"""Whole-token laws of prompts built from parts: a prefix plus a question, a session's history plus a new turn.

A reuse workload's prompt is a sum of independent parts, each drawn from a length law of
:mod:`pdplan.specs.length_laws`. This module gives the law of such sums on whole tokens, so that the binning of
:mod:`pdplan.workload.bins` applies unchanged (docs/reuse_workloads.md §1, §2).

**One part** (:func:`length_pmf`). The law of the token count a part is *sampled* as, matching
:func:`pdplan.workload.bins.sample`: a ``uniform`` law is the whole counts min..max with equal mass; a point mass
is its rounded value; any other law is ``rint`` of a continuous draw clipped to its integer range, so
``P(N = k) = F(k + ½) − F(k − ½)`` with ``F(lo − ½) := 0`` and ``F(hi + ½) := 1``.

**Sums** (:func:`sum_of_parts`). Independent parts add by convolution, done with one real FFT on a grid from 0.

**A session's turn mixture** (:func:`turn_mixture`). A request picked at random is turn ``K`` of its session with
``P(K = k) = P(T ≥ k)/E[T]`` (each session with at least k turns contributes one k-th turn; renewal-reward
argument, e.g. Ross, *Stochastic Processes*, §3.6). Its history is ``H = Σ_{j<K}(U_j + O_j)``, the sum of K − 1
i.i.d. turns of new tokens U and output O, so with ``φ`` the FFT of the law of U + O the history's transform is
``M(φ) = Σ_k P(K = k)·φ^(k−1)``: a polynomial evaluated by Horner's rule for a finite turn law, and the closed form
``(1 − q)/(1 − qφ)`` for a geometric one (``P(T ≥ k) = q^(k−1)``, ``E[T] = 1/(1 − q)``). The prompt adds the
turn's own U (``M·Û``) and the system prompt (a shift). The grid holds the whole support of a finite turn law, so
the circular FFT wraps nothing; for a geometric law it holds all turn counts up to ``P(T > k) < GEOMETRIC_TAIL``,
so at most that mass wraps around.

**Resolution.** Sums are exact on whole tokens while the grid has at most ``MAX_CELLS`` cells and Horner's work
(cells × turn counts) stays under ``MAX_WORK``. Beyond that, every part is put on a coarser grid of ``step``
tokens by splitting each count's mass between its two neighbouring grid points in proportion to its distance
(linear interpolation): every part's mean, hence the sum's, is kept exactly, the variance grows by at most
``step²/4`` per part, and the result says its ``step``. Masses below ``DROP_BELOW`` (FFT round-off) are dropped and
the rest renormalised.

**Handing a law to the binning** (:meth:`TokenPmf.as_histogram`). A law on whole tokens is a ``histogram`` law
with one bin ``[v − ½, v + ½]`` per count v (zero-weight bins fill gaps): its cdf at half-integers, its partial
means and its rounded draws are then those of the whole-token law exactly (a count of 1 gets ``[1, 1.5]``, since a
histogram starts at 1: its draws and cdf stay exact, its bin's continuous mean is 1.25). A law with more than
``MAX_HISTOGRAM_BINS`` bins is re-binned onto at most that many, half of equal width (the tails) and half of equal
probability (the bulk), the piecewise-linear cdf interpolated at the new edges; its mean then moves by at most
half a bin.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.numerics import fft
from pdplan.specs.length_laws import HistogramDist, ParametricDist, UniformDist
from pdplan.types import FloatArray, Int64Array

ComplexArray = npt.NDArray[np.complex128]

MAX_CELLS = 2**22
"""Grid cells of one FFT (4 Mi cells: 32 MiB per complex array)."""
MAX_WORK = 2**28
"""Cells × Horner terms of one turn mixture (about a second of numpy)."""
GEOMETRIC_TAIL = 1e-12
"""A geometric turn law is followed up to the count where P(T > k) drops below this."""
DROP_BELOW = 1e-12
"""Masses below this after an FFT are round-off and dropped."""
MAX_HISTOGRAM_BINS = 4096
"""Most bins of the histogram law handed to the binning."""


@dataclass(frozen=True, eq=False)
class TokenPmf:
    """A law on token counts: ``prob[i] = P(N = values[i])``, values increasing, on a grid of ``step`` tokens.

    ``step == 1``: the law of whole token counts, exactly. ``step > 1``: a mean-preserving coarsening (module
    docstring).
    """

    values: Int64Array
    prob: FloatArray
    step: int = 1

    def __post_init__(self) -> None:
        values = np.array(self.values, dtype=np.int64)
        prob = np.array(self.prob, dtype=np.float64)
        if values.shape != prob.shape or values.size == 0 or np.any(np.diff(values) <= 0):
            raise ValueError("a token law needs increasing values with one probability each")
        prob = prob / prob.sum()
        values.setflags(write=False)
        prob.setflags(write=False)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "prob", prob)

    def mean(self) -> float:
        return float(self.prob @ self.values)

    def second_moment(self) -> float:
        return float(self.prob @ self.values.astype(np.float64) ** 2)

    def quantile(self, q: float) -> int:
        """The smallest count v with P(N ≤ v) ≥ q."""
        idx = int(np.searchsorted(np.cumsum(self.prob), q - 1e-12, side="left"))
        return int(self.values[min(idx, self.values.size - 1)])

    def shifted(self, tokens: int) -> TokenPmf:
        """The law of N + ``tokens``."""
        return TokenPmf(self.values + tokens, self.prob, self.step)

    def as_histogram(self) -> HistogramDist:
        """This law as a ``histogram`` length law for :mod:`pdplan.workload.bins` (module docstring)."""
        if self.values[0] < 1:
            raise ValueError("a length law needs counts >= 1")
        half = self.step / 2.0
        lo = np.maximum(self.values - half, 1.0)  # only the first count can reach below 1
        hi = self.values + half
        gap = np.concatenate([[False], lo[1:] > hi[:-1]])  # counts not adjacent: a zero-weight bin between
        end = np.cumsum(1 + gap.astype(np.int64))  # position of each count's upper edge
        edges = np.empty(end[-1] + 1)
        edges[0], edges[end] = lo[0], hi
        edges[end[gap] - 1] = lo[gap]
        weights = np.zeros(end[-1])
        weights[end - 1] = self.prob
        if weights.size > MAX_HISTOGRAM_BINS:
            edges, weights = _coarser_histogram(edges, weights)
        return HistogramDist(dist="histogram", bins=edges.tolist(), weights=weights.tolist())


def _coarser_histogram(edges: FloatArray, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Re-bin a piecewise-uniform law onto at most MAX_HISTOGRAM_BINS bins: half equal-width (the tails), half
    equal-probability (the bulk), the cdf interpolated at the new edges."""
    cum = np.concatenate([[0.0], np.cumsum(weights)])
    half = MAX_HISTOGRAM_BINS // 2 - 1
    by_width = np.linspace(edges[0], edges[-1], half + 1)
    by_mass = np.interp(np.linspace(0.0, cum[-1], half + 1), cum, edges)
    new_edges = np.unique(np.concatenate([by_width, by_mass]))
    return new_edges, np.diff(np.interp(new_edges, edges, cum))


LENGTH_PMFS_KEPT = 64
"""Part laws :func:`length_pmf` keeps (a search asks for the same few: each session model build reads its scenario's
new-token and output laws; examples/chat-ppd.yaml's ``optimize``: 132 calls of its two laws)."""
_LENGTH_PMFS: OrderedDict[str, TokenPmf] = OrderedDict()


def length_pmf(dist: ParametricDist) -> TokenPmf:
    """The law of the token count one part is sampled as (module docstring). Kept by the law's type and JSON (every
    field; a histogram's lists make the law itself unhashable), the last :data:`LENGTH_PMFS_KEPT`: a hit is the
    :class:`TokenPmf` the first call built, whose arrays are read-only."""
    key = f"{type(dist).__qualname__}:{dist.model_dump_json()}"
    hit = _LENGTH_PMFS.get(key)
    if hit is None:
        hit = _LENGTH_PMFS[key] = _length_pmf(dist)
        if len(_LENGTH_PMFS) > LENGTH_PMFS_KEPT:
            _LENGTH_PMFS.popitem(last=False)
    else:
        _LENGTH_PMFS.move_to_end(key)
    return hit


def _length_pmf(dist: ParametricDist) -> TokenPmf:
    """:func:`length_pmf` computed."""
    point = dist.point_value()
    if point is not None:
        return TokenPmf(np.array([max(1, round(point))]), np.array([1.0]))
    lo, hi = max(1, math.ceil(dist.lower)), math.floor(dist.upper)
    counts = np.arange(lo, hi + 1, dtype=np.int64)
    if isinstance(dist, UniformDist):
        return TokenPmf(counts, np.full(counts.size, 1.0 / counts.size))
    cdf = dist.cdf(np.arange(lo, hi + 2, dtype=np.float64) - 0.5)
    cdf[0], cdf[-1] = 0.0, 1.0
    prob = np.clip(np.diff(cdf), 0.0, None)
    keep = prob > 0
    return TokenPmf(counts[keep], prob[keep])


@dataclass(frozen=True)
class TurnIndexLaw:
    """The turn index K of a random request: ``weights[k − 1] = P(K = k)`` for a finite turn law, or the ratio
    q of a geometric one (``P(K = k) = (1 − q)·q^(k−1)``). Exactly one of the two is set."""

    weights: FloatArray | None = None
    geometric_ratio: float | None = None

    def last_turn(self) -> int:
        """The largest turn index the grid must hold."""
        if self.weights is not None:
            return int(self.weights.size)
        q = float(self.geometric_ratio or 0.0)
        return 1 if q <= 0.0 else 1 + math.ceil(math.log(GEOMETRIC_TAIL) / math.log(q))

    def terms(self) -> int:
        """Horner terms needed (1 for the geometric closed form)."""
        return 1 if self.weights is None else int(self.weights.size)

    def transform(self, phi: ComplexArray) -> ComplexArray:
        """``Σ_k P(K = k)·φ^(k−1)``, element-wise (Horner's rule, or the geometric closed form)."""
        if self.weights is None:
            q = float(self.geometric_ratio or 0.0)
            return np.asarray((1.0 - q) / (1.0 - q * phi), dtype=np.complex128)
        acc = np.full_like(phi, self.weights[-1])
        for w in self.weights[-2::-1]:
            acc *= phi
            acc += w
        return acc


def _grid_step(span_tokens: int, terms: int) -> int:
    """Tokens per grid cell so that the grid and Horner's work stay within their caps."""
    by_cells = math.ceil(span_tokens / MAX_CELLS)
    by_work = math.ceil(span_tokens * terms / MAX_WORK)
    return max(1, by_cells, by_work)


def _on_grid(pmf: TokenPmf, step: int, cells: int) -> FloatArray:
    """Dense masses on cells ``0, step, 2·step, …``; an off-grid count splits between its neighbours."""
    x = pmf.values / step
    i0 = np.floor(x).astype(np.int64)
    frac = x - i0
    low = np.bincount(i0, weights=pmf.prob * (1.0 - frac), minlength=cells + 1)
    high = np.bincount(i0 + 1, weights=pmf.prob * frac, minlength=cells + 1)
    if low.size > cells + 1 or high.size > cells + 1 or low[cells] + high[cells] > 0:
        raise ValueError(f"a count of {int(pmf.values[-1])} tokens does not fit a grid of {cells} cells of {step}")
    return np.asarray((low + high)[:cells], dtype=np.float64)


def _from_grid(dense: FloatArray, step: int, shift: int) -> TokenPmf:
    dense = np.where(dense > DROP_BELOW, dense, 0.0)
    idx = np.flatnonzero(dense)
    return TokenPmf(idx.astype(np.int64) * step + shift, dense[idx], step)


def sum_of_parts(parts: list[TokenPmf], shift: int = 0) -> TokenPmf:
    """The law of ``shift`` plus the sum of independent parts."""
    span = sum(int(p.values[-1]) for p in parts) + 1
    step = _grid_step(span, 1)
    cells = span // step + len(parts) + 1
    size = fft.next_fast_len(cells)
    spectrum = np.ones(size // 2 + 1, dtype=np.complex128)
    for part in parts:
        spectrum *= fft.rfft(_on_grid(part, step, cells), size)
    return _from_grid(np.asarray(fft.irfft(spectrum, size)[:cells]), step, shift)


def turn_mixture(index: TurnIndexLaw, new: TokenPmf, out: TokenPmf, shift: int) -> tuple[TokenPmf, TokenPmf]:
    """(prompt, history) laws of a random request of a session (module docstring).

    ``new`` is the law of a turn's new tokens U, ``out`` of its output O, ``shift`` the tokens every prompt starts
    with (a system prompt). History = shift + Σ_{j<K}(U_j + O_j); prompt = history + U_K.
    """
    per_turn = int(new.values[-1] + out.values[-1])
    span = max((index.last_turn() - 1) * per_turn + int(new.values[-1]), per_turn) + 1
    step = _grid_step(span, index.terms())
    cells = span // step + index.last_turn() + 2
    size = fft.next_fast_len(cells)
    new_hat = fft.rfft(_on_grid(new, step, cells), size)
    phi = new_hat * fft.rfft(_on_grid(out, step, cells), size)
    history_hat = index.transform(phi)
    history = np.asarray(fft.irfft(history_hat, size)[:cells])
    prompt = np.asarray(fft.irfft(history_hat * new_hat, size)[:cells])
    return _from_grid(prompt, step, shift), _from_grid(history, step, shift)
