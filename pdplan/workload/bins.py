"""Workloads as numbers: bin a workload into a joint length histogram, or sample it.

**Binning** (:func:`discretize`, docs/queueing.md §5.1). Each length axis is cut at equal-probability
quantiles, snapped to whole token counts (the law binned is that of the sampled integer lengths,
:func:`sample`), and each bin is represented by its *conditional mean* E[X | bin], so Σ p_k·x_k =
E[X] up to the rounding of a draw to whole tokens (< ½ token): the mean prefill/decode work is
preserved by construction, and a bin of one token count is that count exactly. With
``max_bins = B`` the body [0, 0.99] gets B − 3 equal-probability bins and the tail gets its own
bins at probability levels 0.99–0.995, 0.995–0.999 and 0.999–1, so the P99.5/P99.9 requests that
drive TTFT tails are not averaged into a 1.6 %-wide top bin. A point mass (``fixed``) is one bin,
exactly.

Independent laws give ``prob = outer(p_in, p_out)``; a trace gives its empirical joint (marginal
quantile bins on each axis, joint mass per cell, conditional means per marginal bin).

**Context window.** A request with input + output > W is clipped the way serving engines truncate:
generation stops at the window first (n' = W − l), and only an input that alone fills the window is
cut to W − 1 (keeping one output token). Clipping never lengthens a request. ``clipped_fraction``
reports the share of requests affected (a warning for the caller to print); it is an error only
when the median input alone does not fit (l_median >= W). With clipping the joint is no longer a
product: the two laws are binned on a fine grid (``FINE_BINS`` per axis), clipped cell by cell and
re-binned to ``max_bins``. Because the re-binned axes are marginal, a cell next to the window edge
may show representative lengths whose sum is slightly above W; means remain those of the clipped
requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdplan.errors import SpecError
from pdplan.io.workloads import load_trace
from pdplan.numerics.sorted_stats import median, sorted_unique
from pdplan.specs.length_laws import ParametricDist, UniformDist
from pdplan.specs.workload import WorkloadSpec
from pdplan.types import FloatArray
from pdplan.types import Int64Array as IntArray

DEFAULT_MAX_BINS = 64
MIN_BINS = 8
TAIL_LEVELS = (0.99, 0.995, 0.999)
FINE_BINS = 256
EXACT_MEAN_COUNTS = 64
"""Bins spanning fewer token counts than this take the mean of the counts themselves (the law's
continuous conditional mean is off by up to ½ token there: a {1, 2} output bin was 1.86, not the
1.77 the sampler draws)."""


@dataclass(frozen=True, eq=False)
class JointLengths:
    """Joint histogram p(l, n) of input length l and output length n (token counts as floats).

    ``input_tokens[K]`` and ``output_tokens[M]`` are increasing bin representatives (conditional
    means), ``prob[K, M]`` sums to 1, ``clipped_fraction`` is the share of requests cut to the
    context window.
    """

    input_tokens: FloatArray
    output_tokens: FloatArray
    prob: FloatArray
    clipped_fraction: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "prob"):
            arr = np.array(getattr(self, name), dtype=np.float64)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        if self.prob.shape != (self.input_tokens.size, self.output_tokens.size):
            raise ValueError(
                f"prob shape {self.prob.shape} does not match ({self.input_tokens.size}, {self.output_tokens.size})"
            )

    def input_marginal(self) -> FloatArray:
        return np.asarray(self.prob.sum(axis=1))

    def output_marginal(self) -> FloatArray:
        return np.asarray(self.prob.sum(axis=0))

    def expect(self, fn: Callable[[FloatArray, FloatArray], FloatArray]) -> float:
        """E[fn(l, n)], ``fn`` vectorised over an l column [K, 1] and an n row [1, M]."""
        values = np.broadcast_to(fn(self.input_tokens[:, None], self.output_tokens[None, :]), self.prob.shape)
        return float(np.sum(self.prob * values))

    def input_moment(self, k: int) -> float:
        """E[l^k] (k = 2 gives E[l²], the prefill attention term)."""
        return float(self.input_marginal() @ self.input_tokens**k)

    def output_moment(self, k: int) -> float:
        """E[n^k]."""
        return float(self.output_marginal() @ self.output_tokens**k)

    def mean_input(self) -> float:
        return self.input_moment(1)

    def mean_output(self) -> float:
        return self.output_moment(1)

    def mean_input_times_output(self) -> float:
        """E[n·l] (KV-token-steps a request holds in decode, to first order)."""
        return float(self.input_tokens @ self.prob @ self.output_tokens)


def quantile_levels(max_bins: int) -> FloatArray:
    """Probability edges: B − 3 equal bins over [0, 0.99], then tail bins at TAIL_LEVELS and 1."""
    if max_bins < MIN_BINS:
        raise ValueError(f"max_bins must be >= {MIN_BINS}, got {max_bins}")
    body = np.linspace(0.0, TAIL_LEVELS[0], max_bins - len(TAIL_LEVELS) + 1)
    return np.concatenate([body, TAIL_LEVELS[1:], [1.0]])


def bin_distribution(dist: ParametricDist, max_bins: int) -> tuple[FloatArray, FloatArray]:
    """(representatives, probabilities) of one law: quantile bins, conditional means.

    The binned law is that of the sampled token count (:func:`_sample_dist`: ``rint`` of a draw,
    clipped to the integer range): quantile cuts snap to half-integers, so a bin is a range of
    whole token counts with its exact probability. A bin of fewer than ``EXACT_MEAN_COUNTS``
    counts is represented by the mean of those counts (a one-count bin by that count: the short
    outputs whose TPOT spans one or two intervals), wider bins by the law's conditional mean over
    the bin (one-token outputs are split off later for TPOT:
    :func:`pdplan.workload.quadrature.split_one_token`).
    """
    point = dist.point_value()
    if point is not None:
        return np.array([point]), np.array([1.0])
    lo, hi = max(1, math.ceil(dist.lower)), math.floor(dist.upper)
    cuts = np.floor(dist.ppf(quantile_levels(max_bins)[1:-1])) + 0.5
    cuts = sorted_unique(cuts[(cuts > lo) & (cuts < hi)])
    edges = np.concatenate([[lo - 0.5], cuts, [hi + 0.5]])
    cdf, part = _integer_cdf(dist, edges, lo, hi)
    p, m = np.diff(cdf), np.diff(part)
    keep = p > 1e-15
    first, last = np.ceil(edges[:-1][keep]), np.floor(edges[1:][keep])
    reps = np.clip(m[keep] / p[keep], first, last)
    for i in np.flatnonzero(last - first < EXACT_MEAN_COUNTS):
        reps[i] = _count_mean(dist, int(first[i]), int(last[i]), lo, hi)
    uniq, inverse = np.unique(reps, return_inverse=True)  # a near-point law: equal reps merge
    merged = np.asarray(np.bincount(inverse, weights=p[keep]), dtype=np.float64)
    return uniq, merged / merged.sum()


def _count_mean(dist: ParametricDist, first: int, last: int, lo: int, hi: int) -> float:
    """``E[N | first ≤ N ≤ last]`` of the sampled count N, summed count by count."""
    counts = np.arange(first, last + 1, dtype=np.float64)
    if isinstance(dist, UniformDist):
        return float(counts.mean())
    cdf = dist.cdf(np.concatenate([counts - 0.5, [last + 0.5]]))
    if first == lo:
        cdf[0] = 0.0  # draws below lo − ½ round up to lo
    if last == hi:
        cdf[-1] = 1.0  # draws above hi + ½ are clipped to hi
    mass = np.diff(cdf)
    return float(counts @ mass / mass.sum()) if mass.sum() > 0 else float(first)


def _integer_cdf(dist: ParametricDist, edges: FloatArray, lo: int, hi: int) -> tuple[FloatArray, FloatArray]:
    """P(N < e) and E[N·1{N < e}] of the sampled count N at half-integer ``edges`` (first lo − ½,
    last hi + ½); a uniform law is sampled as whole counts, others by rounding (conditional means
    over a bin are those of the continuous law)."""
    if isinstance(dist, UniformDist):
        j = np.floor(edges)  # counts below e: lo .. j
        count = np.clip(j - lo + 1.0, 0.0, hi - lo + 1.0)
        top = lo + count - 1.0
        return count / (hi - lo + 1.0), (top * (top + 1.0) - (lo - 1.0) * lo) / 2.0 / (hi - lo + 1.0)
    cdf, part = dist.cdf(edges), dist.partial_mean(edges)
    cdf[0], cdf[-1], part[0], part[-1] = 0.0, 1.0, 0.0, dist.mean_tokens()
    return np.asarray(cdf, dtype=np.float64), np.asarray(part, dtype=np.float64)


def bin_points(values: FloatArray, weights: FloatArray, max_bins: int) -> tuple[FloatArray, FloatArray, IntArray]:
    """Quantile-bin weighted points: (representatives, probabilities, bin index of each point)."""
    uniq, inverse = np.unique(values, return_inverse=True)
    w = np.bincount(inverse, weights=weights)
    w = w / w.sum()
    if uniq.size <= max_bins:
        bin_of = np.arange(uniq.size)
    else:  # ties stay together; the midpoint of a value's mass picks its bin
        mid = np.cumsum(w) - w / 2.0
        raw = np.searchsorted(quantile_levels(max_bins)[1:-1], mid, side="right")
        bin_of = np.unique(raw, return_inverse=True)[1]
    p = np.asarray(np.bincount(bin_of, weights=w), dtype=np.float64)
    reps = np.asarray(np.bincount(bin_of, weights=w * uniq), dtype=np.float64) / p
    first = np.searchsorted(bin_of, np.arange(p.size), side="left")
    last = np.searchsorted(bin_of, np.arange(p.size), side="right") - 1
    reps = np.clip(reps, uniq[first], uniq[last])  # a one-value bin is that value, exactly
    return reps, p, np.asarray(bin_of[inverse], dtype=np.int64)


def _joint_from_points(lin: FloatArray, n: FloatArray, w: FloatArray, max_bins: int, clipped: float) -> JointLengths:
    l_reps, _, l_idx = bin_points(lin, w, max_bins)
    n_reps, _, n_idx = bin_points(n, w, max_bins)
    prob = np.zeros((l_reps.size, n_reps.size))
    np.add.at(prob, (l_idx, n_idx), w / w.sum())
    return JointLengths(l_reps, n_reps, prob, clipped)


def clip_to_window(lin: FloatArray, n: FloatArray, window: float) -> tuple[FloatArray, FloatArray]:
    """Clip (input, output) so input + output <= window: output first, input only if it fills W."""
    l_c = np.minimum(lin, window - 1.0)
    return l_c, np.minimum(n, window - l_c)


def _check_window(median_input: float, window: int | None) -> None:
    if window is not None and median_input >= window:
        raise SpecError(
            f"the median input ({median_input:.0f} tokens) does not fit the context "
            f"window of {window} tokens; use a model with a longer window or shorter "
            "inputs",
            field="input_tokens",
        )


def discretize(
    spec: WorkloadSpec, *, max_bins: int = DEFAULT_MAX_BINS, context_window: int | None = None
) -> JointLengths:
    """Joint histogram p(l, n), at most ``max_bins`` bins per axis (see the module docstring)."""
    if context_window is not None and context_window < 2:
        raise SpecError(f"context window {context_window} must be >= 2 tokens", field="context_window")
    laws = spec.parametric()
    if laws is None:
        assert spec.trace is not None
        trace = load_trace(spec.trace.file)
        lin, n = trace.input_tokens.astype(float), trace.output_tokens.astype(float)
        _check_window(median(lin), context_window)
        w = np.full(lin.size, 1.0 / lin.size)
        clipped = 0.0
        if context_window is not None:
            clipped = float(w[lin + n > context_window].sum())
            lin, n = clip_to_window(lin, n, context_window)
        return _joint_from_points(lin, n, w, max_bins, clipped)
    inp, out = laws
    _check_window(inp.median_tokens(), context_window)
    if context_window is None or inp.upper + out.upper <= context_window:
        return _product(inp, out, max_bins)
    return _clipped_product(inp, out, max_bins, context_window)


def _product(inp: ParametricDist, out: ParametricDist, max_bins: int) -> JointLengths:
    lin, pl = bin_distribution(inp, max_bins)
    n, pn = bin_distribution(out, max_bins)
    return JointLengths(lin, n, np.outer(pl, pn))


def _clipped_product(inp: ParametricDist, out: ParametricDist, max_bins: int, window: int) -> JointLengths:
    """Fine product grid, clipped cell by cell, re-binned to ``max_bins``.

    clipped_fraction = Σ_j p_j · P(L > W − n_j) over fine output bins with the exact input CDF
    (exact when the output length is fixed).
    """
    lin, pl = bin_distribution(inp, FINE_BINS)
    n, pn = bin_distribution(out, FINE_BINS)
    clipped = min(1.0, max(0.0, float(pn @ (1.0 - inp.cdf(window - n)))))  # a probability: no rounding past 1
    if not np.any(lin[:, None] + n[None, :] > window):
        base = _product(inp, out, max_bins)
        return JointLengths(base.input_tokens, base.output_tokens, base.prob, clipped)
    ll, nn = np.meshgrid(lin, n, indexing="ij")
    lc, nc = clip_to_window(ll.ravel(), nn.ravel(), window)
    return _joint_from_points(lc, nc, np.outer(pl, pn).ravel(), max_bins, clipped)


# ---------------------------------------------------------------------------------------- sampling
def _sample_dist(dist: ParametricDist, n: int, rng: np.random.Generator) -> IntArray:
    point = dist.point_value()
    if isinstance(dist, UniformDist):
        return rng.integers(dist.min, dist.max + 1, size=n, dtype=np.int64)
    if point is not None:
        return np.full(n, round(point), dtype=np.int64)
    lo, hi = max(1, math.ceil(dist.lower)), math.floor(dist.upper)
    return np.clip(np.rint(dist.ppf(rng.random(n))), lo, hi).astype(np.int64)


def sample(
    spec: WorkloadSpec, n: int, rng: np.random.Generator, *, context_window: int | None = None
) -> tuple[IntArray, IntArray]:
    """``n`` requests' (input, output) token counts; a trace is resampled with replacement.

    Uses only the ``rng`` passed in (no global state); clipping as in :func:`discretize`.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    laws = spec.parametric()
    if laws is None:
        assert spec.trace is not None
        trace = load_trace(spec.trace.file)
        idx = rng.integers(0, trace.input_tokens.size, size=n)
        lin, out = trace.input_tokens[idx].copy(), trace.output_tokens[idx].copy()
    else:
        lin, out = _sample_dist(laws[0], n, rng), _sample_dist(laws[1], n, rng)
    if context_window is not None:
        lc, oc = clip_to_window(lin.astype(float), out.astype(float), context_window)
        lin, out = lc.astype(np.int64), oc.astype(np.int64)
    return lin, out


def trace_arrivals_s(spec: WorkloadSpec) -> FloatArray:
    """Arrival times (s) of a trace workload with ``arrival: trace``."""
    if spec.trace is None or spec.arrival != "trace":
        raise SpecError("arrival times exist only for arrival: trace with a trace file", field="arrival")
    arrival = load_trace(spec.trace.file).arrival_s
    if arrival is None:
        raise SpecError("trace has no arrival_s column", source=str(spec.trace.file), field="arrival")
    return arrival
