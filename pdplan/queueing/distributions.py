"""Distribution containers shared by the queueing models.

Every model in :mod:`pdplan.queueing` returns one of three small frozen containers with the same
interface — ``mean_s`` (shape ``[R]``), ``cdf(t)`` (shape ``[R, *t.shape]``) and ``quantile(q)``
(shape ``[R, *q.shape]``) — batched over ``R`` arrival rates:

* :class:`WaitDistribution`: a queueing wait W on a uniform grid ``t_k = k·h`` (one ``h`` per
  rate) with an atom ``P(W = 0)``; produced by the FFT Pollaczek–Khinchine/Beneš method
  (docs/queueing.md §1.2(1)) and by the M/G/c and round-robin variants built on it (§1.3).
* :class:`ShiftedMixture`: ``T = W + g_l`` with a request-class dependent deterministic shift
  ``g_l`` (e.g. TTFT = wait + prefill service + KV transfer, §1.2, §1.5). Because a request's FCFS
  wait under Poisson arrivals is independent of its own service,
  ``P(T ≤ a) = Σ_l p_l F_W(a − g_l)``.
* :class:`GammaMixture`: ``T = offset_i + X_i`` with ``X_i ~ Gamma(mean_i, var_i)`` per request bin
  ``i`` (TPOT model of §2.4 and §3), optionally plus ``D/n_i``: a random delay D independent of
  X_i, given as discrete points with weights per rate (e.g. the KV link wait that token 2 waits
  for under TTFT convention B, spread over the request's n_i intervals).

Mixture quantiles are found with :func:`pdplan.numerics.roots.brentq` on the monotone mixture cdf, never by
adding quantiles (docs/queueing.md §1.2 measured −60…+41 % error for that shortcut).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from pdplan.numerics.brent_rows import brentq_rows
from pdplan.numerics.roots import brentq
from pdplan.numerics.special import gammainc
from pdplan.types import FloatArray


def check_pmf(values: ArrayLike, prob: ArrayLike, name: str) -> tuple[FloatArray, FloatArray]:
    """Validate a discretised distribution (support points and probabilities).

    Returns float64 copies with ``prob`` renormalised (it must already sum to 1 within 1e-6).
    Raises ValueError on shape mismatch, negative or non-finite entries.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    p = np.asarray(prob, dtype=np.float64).ravel()
    if v.shape != p.shape or v.size == 0:
        raise ValueError(f"{name}: values and prob must be non-empty and of equal length")
    if not (np.all(np.isfinite(v)) and np.all(np.isfinite(p))):
        raise ValueError(f"{name}: values and prob must be finite")
    if np.any(v < 0) or np.any(p < 0):
        raise ValueError(f"{name}: values and prob must be non-negative")
    total = float(p.sum())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"{name}: probabilities sum to {total:.9g}, expected 1")
    return v, p / total


def as_rates(rate_per_s: ArrayLike) -> FloatArray:
    """Arrival rates as a 1-D float64 array; raises ValueError if negative or non-finite."""
    r = np.atleast_1d(np.asarray(rate_per_s, dtype=np.float64))
    if r.ndim != 1:
        raise ValueError("rate_per_s must be a scalar or a 1-D array")
    if np.any(~np.isfinite(r)) or np.any(r < 0):
        raise ValueError(f"rate_per_s must be finite and >= 0, got {r}")
    return r


QUANTILE_XTOL_S = 1e-12
"""Absolute tolerance of every mixture quantile's root (seconds; with :data:`QUANTILE_RTOL`, Brent's
``xtol + rtol·|t|``): far below the microsecond the reports print."""
QUANTILE_RTOL = 1e-10
"""Relative tolerance of every mixture quantile's root (see :data:`QUANTILE_XTOL_S`)."""


def mixture_quantile(cdf_row: Callable[[float], float], q: float, lo: float, hi: float, what: str) -> float:
    """Quantile of a monotone cdf by brentq on ``cdf(t) − q`` over ``[lo, hi]``.

    Returns ``lo`` when ``cdf(lo) ≥ q``; raises ValueError when ``cdf(hi) < q`` (the quantile lies
    beyond the modelled range — no number is invented). The two end values are handed to brentq, which
    would otherwise evaluate them again (same iterates, same root).
    """
    at_lo = cdf_row(lo)
    if at_lo >= q:
        return lo
    at_hi = cdf_row(hi)
    if at_hi < q:
        raise ValueError(f"{what}: quantile {q} lies beyond the modelled range ({hi:.6g} s)")
    root = brentq(lambda t: cdf_row(t) - q, lo, hi, QUANTILE_XTOL_S, QUANTILE_RTOL, f_a=at_lo - q, f_b=at_hi - q)
    return float(root)


RowsCdf = Callable[[FloatArray, npt.NDArray[np.intp]], FloatArray]
"""``cdf(t, rows)``: the mixture cdf of rate ``rows[k]`` at ``t[k]``, for every k."""


def mixture_quantile_rows(cdf_rows: RowsCdf, q: float, lo: FloatArray, hi: FloatArray, what: str) -> FloatArray:
    """:func:`mixture_quantile` of every rate at once, shape ``[R]``: rate r's answer is the double
    ``mixture_quantile(lambda t: cdf_rows([t], [r])[0], q, lo[r], hi[r], what)`` returns when ``cdf_rows`` gives each
    rate the value its one-rate cdf gives (:func:`pdplan.numerics.brent_rows.brentq_rows`: the same Brent iterates,
    one batched cdf per step). The range error names the first rate whose quantile lies beyond ``hi``; it is raised
    before any root is sought."""
    every = np.arange(lo.size)
    at_lo = np.asarray(cdf_rows(lo, every), dtype=np.float64)
    at_hi = np.asarray(cdf_rows(hi, every), dtype=np.float64)
    run = np.flatnonzero(at_lo < q)
    beyond = run[at_hi[run] < q]
    if beyond.size:
        raise ValueError(f"{what}: quantile {q} lies beyond the modelled range ({float(hi[beyond[0]]):.6g} s)")
    out = np.array(lo, dtype=np.float64)
    if run.size:

        def excess(t: FloatArray, rows: npt.NDArray[np.intp]) -> FloatArray:
            return np.asarray(cdf_rows(t, run[rows]), dtype=np.float64) - q

        ends = (at_lo[run] - q, at_hi[run] - q)
        roots = brentq_rows(excess, lo[run], hi[run], QUANTILE_XTOL_S, QUANTILE_RTOL, f_a=ends[0], f_b=ends[1])
        out[run] = roots
    return out


@dataclass(frozen=True, slots=True)
class WaitDistribution:
    """Waiting time W on a grid: ``cdf_grid[r, k] = P(W ≤ k·h_s[r])``, ``atom[r] = P(W = 0)``.

    ``mean_s`` is the analytic mean (Pollaczek–Khinchine or its M/G/c / Kingman variant), not a
    grid sum. Beyond the grid the cdf is held at its last value (the builders check that the missing
    tail mass is below 1e-4).
    """

    h_s: FloatArray
    cdf_grid: FloatArray
    atom: FloatArray
    mean_s: FloatArray

    def cdf(self, t_s: ArrayLike) -> FloatArray:
        """``P(W ≤ t)`` for every rate; shape ``[R, *t.shape]`` (linear interpolation)."""
        t = np.asarray(t_s, dtype=np.float64)
        return self.cdf_rowwise(np.broadcast_to(t, (self.h_s.shape[0], *t.shape)))

    def cdf_rowwise(self, t_s: FloatArray) -> FloatArray:
        """``P(W_r ≤ t[r, ...])``: one set of thresholds per rate, ``t`` of shape ``[R, ...]``.

        With ``x = t/h``, cell ``k = min(max(⌊x⌋, 0), n − 1)`` and ``F = F_k + min(x − k, 1)·(F_{k+1} − F_k)``
        (the last cell held beyond the grid), 0 where ``x < 0``; ``x − k`` is never below 0 where ``x ≥ 0``, so the
        fraction needs no lower clip. The two cells are read from the flattened grid by one flat index each."""
        extra = t_s.ndim - 1
        n_rows, n_cells = self.cdf_grid.shape
        x = t_s / self.h_s.reshape((-1,) + (1,) * extra)
        cell = np.floor(x)  # k as a double (exact: an integer below 2^53), so x − k reads the same doubles
        np.maximum(cell, 0.0, out=cell)
        np.minimum(cell, n_cells - 1.0, out=cell)
        frac = x - cell
        np.minimum(frac, 1.0, out=frac)
        at = cell.astype(np.intp)
        if n_rows > 1:
            at += (np.arange(n_rows) * n_cells).reshape((-1,) + (1,) * extra)
        flat = self.cdf_grid.reshape(-1)
        lo = flat.take(at)
        at += cell < n_cells - 1.0  # the next cell, the last one held
        out = flat.take(at)
        out -= lo
        out *= frac
        out += lo  # lo + frac·(F_{k+1} − F_k): the same rounding, sum and product commute exactly
        out[x < 0] = 0.0
        return out

    def row(self, r: int) -> WaitDistribution:
        """The distribution for rate index ``r`` alone (``R = 1``)."""
        sl = slice(r, r + 1)
        return WaitDistribution(self.h_s[sl], self.cdf_grid[sl], self.atom[sl], self.mean_s[sl])

    def quantile(self, q: ArrayLike) -> FloatArray:
        """Inverse cdf per rate; shape ``[R, *q.shape]``. 0 where ``q ≤ atom``."""
        qa = np.asarray(q, dtype=np.float64)
        if np.any((qa < 0) | (qa >= 1)):
            raise ValueError("quantile levels must lie in [0, 1)")
        out = np.empty((self.cdf_grid.shape[0], *qa.shape))
        grid = np.arange(self.cdf_grid.shape[1], dtype=np.float64)
        for r in range(self.cdf_grid.shape[0]):
            row = self.cdf_grid[r]
            if np.any(qa > row[-1]):
                raise ValueError(f"wait quantile {float(qa.max())} beyond the grid (cdf max {row[-1]:.6f})")
            out[r] = np.where(qa <= self.atom[r], 0.0, np.interp(qa, row, grid) * self.h_s[r])
        return out


def delayed_tail_wait(
    conditional: WaitDistribution,
    delay_prob: FloatArray,
    load: FloatArray,
    *,
    time_scale: FloatArray | float,
    mean_s: FloatArray,
) -> WaitDistribution:
    """A many-server wait as "wait with chance π, then the M/G/1 conditional tail": ``P(W ≤ t) = 1 − (π/ρ)·(1 −
    F_ρ(t/σ))``, where ``F_ρ`` (``conditional``) is an M/G/1 wait cdf at load ρ, whose waiting mass is ρ, so π/ρ
    rescales it to the delay probability π; σ stretches its time axis. The M/G/c (π = Erlang C, σ = 1 on a 1/c
    service) and the count-routed (π from the JSQ chain, σ its stretch) waits are both this shape.
    ``mean_s`` is passed in, each model's own analytic mean; π/ρ is 0 on an idle row."""
    busy = load > 0.0
    share = np.where(busy, delay_prob / np.where(busy, load, 1.0), 0.0)  # π/ρ
    cdf = 1.0 - share[:, None] * (1.0 - conditional.cdf_grid)
    return WaitDistribution(
        h_s=conditional.h_s * time_scale,
        cdf_grid=np.clip(cdf, 0.0, 1.0),
        atom=1.0 - delay_prob,
        mean_s=mean_s,
    )


@dataclass(frozen=True, slots=True)
class ShiftedMixture:
    """``T = W + g_l``, ``l ~ prob``: e.g. TTFT = prefill wait + per-class service/transfer.

    ``offsets_s`` has shape ``[L]`` (same for every rate) or ``[R, L]``.
    """

    wait: WaitDistribution
    offsets_s: FloatArray
    prob: FloatArray

    def _offsets(self) -> FloatArray:
        n_rates = self.wait.h_s.shape[0]
        return np.broadcast_to(self.offsets_s, (n_rates, self.prob.shape[0]))

    @property
    def mean_s(self) -> FloatArray:
        """``E[W] + Σ_l p_l g_l`` per rate, shape ``[R]``."""
        return np.asarray(self.wait.mean_s + self._offsets() @ self.prob, dtype=np.float64)

    def cdf_per_bin(self, a_s: float) -> FloatArray:
        """``P(T ≤ a | class l) = F_W(a − g_l)``, shape ``[R, L]``."""
        return self.wait.cdf_rowwise(a_s - self._offsets())

    def cdf(self, a_s: ArrayLike) -> FloatArray:
        """``Σ_l p_l F_W(a − g_l)`` (one matrix-vector product per threshold); ``[R, *a.shape]``."""
        a = np.asarray(a_s, dtype=np.float64)
        off = self._offsets()
        t = a[None, ..., None] - off.reshape((off.shape[0],) + (1,) * a.ndim + (off.shape[1],))
        return np.asarray(self.wait.cdf_rowwise(t) @ self.prob, dtype=np.float64)

    def first_cdf(self, a_s: float) -> float:
        """Mixture cdf of the first rate as a float (root-finding helper)."""
        return float(self.cdf(a_s)[0])

    def quantile(self, q: float) -> FloatArray:
        """Mixture quantile per rate by brentq on the cdf; shape ``[R]``."""
        off = self._offsets()
        out = np.empty(off.shape[0])
        for r in range(off.shape[0]):
            one = ShiftedMixture(self.wait.row(r), off[r], self.prob)
            hi = float(off[r].max() + one.wait.h_s[0] * (one.wait.cdf_grid.shape[1] - 1))
            out[r] = mixture_quantile(one.first_cdf, q, float(off[r].min()), hi, "TTFT")
        return out


@dataclass(frozen=True, slots=True)
class SpreadDelay:
    """A random delay D (points and their probabilities) that bin i spreads over its ``n_i`` intervals."""

    points_s: FloatArray
    """``[R, P]`` (or per bin ``[R, M, P]``) points of D."""
    weights: FloatArray
    """``[R, P]`` (or per bin ``[R, M, P]``) their probabilities (summing to 1 over P)."""
    intervals: FloatArray
    """``[M]`` the n_i over which bin i spreads D."""

    def row(self, r: int) -> SpreadDelay:
        sl = slice(r, r + 1)
        return SpreadDelay(self.points_s[sl], self.weights[sl], self.intervals)

    def take(self, rows: npt.NDArray[np.intp]) -> SpreadDelay:
        """The delays of rates ``rows`` (repeats allowed)."""
        return SpreadDelay(self.points_s[rows], self.weights[rows], self.intervals)

    def points(self) -> FloatArray:
        """Points as ``[R, M or 1, P]``."""
        return self.points_s[:, None, :] if self.points_s.ndim == 2 else self.points_s

    def probs(self) -> FloatArray:
        """Weights as ``[R, M or 1, P]``."""
        return self.weights[:, None, :] if self.weights.ndim == 2 else self.weights


@dataclass(frozen=True, slots=True)
class UniformPart:
    """An independent ``U(0, width_s)`` present with probability ``prob`` (else 0), e.g. the wait for a decode step
    boundary."""

    width_s: FloatArray
    """``[R, M]`` width of the uniform."""
    prob: FloatArray
    """``[R]`` probability that it is present."""

    def row(self, r: int) -> UniformPart:
        sl = slice(r, r + 1)
        return UniformPart(self.width_s[sl], self.prob[sl])

    def take(self, rows: npt.NDArray[np.intp]) -> UniformPart:
        """The uniform parts of rates ``rows`` (repeats allowed)."""
        return UniformPart(self.width_s[rows], self.prob[rows])


@dataclass(frozen=True, slots=True)
class GammaMixture:
    """``T_i = offset_i + X_i``, ``X_i ~ Gamma(mean = load_mean_s, variance = load_var_s2)``.

    Arrays have shape ``[R, M]`` (rates × request bins); ``prob`` has shape ``[M]``. A bin with zero
    variance is deterministic at ``offset + mean``. Optionally plus a random delay spread over the bin's intervals
    (``delay``) and an independent uniform part (``uniform``); the uniform's cdf is exact: with
    ``Γ(x) = ∫₀ˣ F_X = x·P(k, x/θ) − kθ·P(k+1, x/θ)`` (shape k, scale θ; ``(x − m)⁺`` for a point mass),
    ``P(X + U ≤ x) = (Γ(x) − Γ(x − w))/w``.
    """

    offset_s: FloatArray
    load_mean_s: FloatArray
    load_var_s2: FloatArray
    prob: FloatArray
    delay: SpreadDelay | None = None
    uniform: UniformPart | None = None

    @property
    def mean_s(self) -> FloatArray:
        """Mixture mean per rate, shape ``[R]``."""
        return np.asarray(self.bin_mean_s @ self.prob, dtype=np.float64)

    @property
    def bin_mean_s(self) -> FloatArray:
        """Mean per request bin, shape ``[R, M]``."""
        mean = self.offset_s + self.load_mean_s
        if self.delay is not None:
            d = np.sum(self.delay.points() * self.delay.probs(), axis=2)
            mean = mean + d / self.delay.intervals[None, :]
        if self.uniform is not None:
            mean = mean + self.uniform.prob[:, None] * self.uniform.width_s / 2.0
        return np.asarray(mean, dtype=np.float64)

    def cdf_per_bin(self, b_s: float) -> FloatArray:
        """``P(T_i ≤ b)`` per bin; shape ``[R, M]`` (mixed over the delay points if any)."""
        return self._cdf_per_bin(b_s)

    def _cdf_per_bin(self, b_s: float | FloatArray) -> FloatArray:
        """:meth:`cdf_per_bin` at one threshold, or at one threshold per rate (``b_s`` of shape ``[R]``); either way
        every entry is the same elementwise arithmetic on the same doubles."""
        b: float | FloatArray = b_s
        b_points: float | FloatArray = b_s
        if np.ndim(b_s) > 0:
            column = np.asarray(b_s, dtype=np.float64)
            b, b_points = column[:, None], column[:, None, None]
        if self.delay is None:
            return self._load_cdf(b - self.offset_s, self.load_mean_s, self.load_var_s2, self.uniform)
        shift = self.delay.points() / self.delay.intervals[None, :, None]
        x = b_points - self.offset_s[:, :, None] - shift
        uniform = None if self.uniform is None else UniformPart(self.uniform.width_s[:, :, None], self.uniform.prob)
        c = self._load_cdf(x, self.load_mean_s[:, :, None], self.load_var_s2[:, :, None], uniform)
        return np.asarray(np.sum(c * self.delay.probs(), axis=2), dtype=np.float64)

    def _load_cdf(self, x: FloatArray, m: FloatArray, v: FloatArray, uniform: UniformPart | None) -> FloatArray:
        """``P(X (+ U) ≤ x)``: the gamma load, mixed with its uniform-shifted law if any."""
        c = self._gamma_cdf(x, m, v)
        if uniform is None:
            return c
        q = uniform.prob.reshape((-1,) + (1,) * (x.ndim - 1))
        w = np.broadcast_to(uniform.width_s, x.shape)
        wide = w > 1e-12
        safe_w = np.where(wide, w, 1.0)
        with_u = (self._gamma_integral(x, m, v) - self._gamma_integral(x - safe_w, m, v)) / safe_w
        return np.asarray((1.0 - q) * c + q * np.where(wide, with_u, c), dtype=np.float64)

    @staticmethod
    def _gamma_integral(x: FloatArray, m: FloatArray, v: FloatArray) -> FloatArray:
        """``∫₀ˣ P(X ≤ u) du`` for X ~ Gamma(mean m, variance v) (point mass when v ≈ 0)."""
        random_part, shape, scale = _gamma_shape(x, m, v)
        xp = np.clip(x, 0.0, None)
        gam = xp * gammainc(shape, xp / scale) - shape * scale * gammainc(shape + 1.0, xp / scale)
        mean = np.broadcast_to(m, x.shape)
        return np.asarray(np.where(random_part, gam, np.maximum(x - mean, 0.0)), dtype=np.float64)

    @staticmethod
    def _gamma_cdf(x: FloatArray, m: FloatArray, v: FloatArray) -> FloatArray:
        """``P(X ≤ x)`` for X ~ Gamma(mean m, variance v) (a point mass when v ≈ 0).

        The law's (random part, shape k, scale θ) are :func:`_gamma_shape`'s, computed on ``m`` and ``v`` as given
        (``[R, M, 1]`` against an ``x`` of ``[R, M, P]``: once per bin, not per delay point; the same doubles
        elementwise) and broadcast by the ufuncs; ``P(k, x/θ)`` is read at ``max(x, 0)`` and replaced by 0 where
        ``x ≤ 0``, as ``P(k, 0) = 0``."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            cv = np.sqrt(v) / m
        random_part = (m > 0) & (v > 0) & (cv > 1e-6)
        cv2 = np.where(random_part, cv, 1.0) ** 2
        gam = gammainc(1.0 / cv2, np.maximum(x, 0.0) / (np.where(random_part, m, 1.0) * cv2))
        out = np.where(random_part, np.where(x > 0, gam, 0.0), x >= m)
        if out.shape != x.shape:
            raise ValueError(f"gamma cdf: mean/variance of shape {np.shape(m)} do not broadcast to x {x.shape}")
        return np.asarray(out, dtype=np.float64)

    def cdf(self, b_s: ArrayLike) -> FloatArray:
        """Mixture cdf ``Σ_i p_i P(T_i ≤ b)``, shape ``[R, *b.shape]``."""
        b = np.asarray(b_s, dtype=np.float64)
        flat = [self.cdf_per_bin(float(x)) @ self.prob for x in b.ravel()]
        return np.asarray(np.stack(flat, axis=-1).reshape((-1, *b.shape)), dtype=np.float64)

    def first_cdf(self, b_s: float) -> float:
        """Mixture cdf of the first rate as a float (root-finding helper)."""
        return float(self.cdf_per_bin(b_s)[0] @ self.prob)

    def row(self, r: int) -> GammaMixture:
        """The mixture at rate index ``r`` alone."""
        sl = slice(r, r + 1)
        return GammaMixture(
            self.offset_s[sl],
            self.load_mean_s[sl],
            self.load_var_s2[sl],
            self.prob,
            None if self.delay is None else self.delay.row(r),
            None if self.uniform is None else self.uniform.row(r),
        )

    def _take(self, rows: npt.NDArray[np.intp]) -> GammaMixture:
        """The mixture at rates ``rows`` (repeats allowed; :meth:`row` for an index array)."""
        return GammaMixture(
            self.offset_s[rows],
            self.load_mean_s[rows],
            self.load_var_s2[rows],
            self.prob,
            None if self.delay is None else self.delay.take(rows),
            None if self.uniform is None else self.uniform.take(rows),
        )

    def _rows_cdf(self, b_s: FloatArray, rows: npt.NDArray[np.intp]) -> FloatArray:
        """Mixture cdf of rate ``rows[k]`` at ``b_s[k]``: the value :meth:`first_cdf` of :meth:`row` gives, one
        batched per-bin cdf for all k, then each rate's own product with ``prob`` (the same 1-D dot)."""
        per_bin = self._take(rows)._cdf_per_bin(b_s)
        return np.array([float(per_bin[k] @ self.prob) for k in range(rows.size)])

    def quantile(self, q: float) -> FloatArray:
        """Mixture quantile per rate by brentq, all rates at once (:func:`mixture_quantile_rows`); shape ``[R]``.

        Bracket: from the least offset to the largest offset + mean + 60 sd (plus the longest spread delay and the
        widest uniform part), past every bin's mass."""
        lo = self.offset_s.min(axis=1)
        hi = (self.offset_s + self.load_mean_s + 60.0 * np.sqrt(self.load_var_s2)).max(axis=1) + 1e-12
        if self.delay is not None:
            points = self.delay.points_s.reshape(self.delay.points_s.shape[0], -1)
            hi = hi + points.max(axis=1) / self.delay.intervals.min()
        if self.uniform is not None:
            hi = hi + self.uniform.width_s.max(axis=1)
        return mixture_quantile_rows(self._rows_cdf, q, lo, hi, "TPOT")


def _gamma_shape(x: FloatArray, m: FloatArray, v: FloatArray) -> tuple[npt.NDArray[np.bool_], FloatArray, FloatArray]:
    """(random part, shape k, scale θ) of Gamma(mean m, variance v) broadcast to ``x``; m ≤ 0,
    v ≤ 0 or a relative sd below 1e-6 (k > 1e12) is a point mass (k = θ = 1 placeholders)."""
    m, v = np.broadcast_to(m, x.shape), np.broadcast_to(v, x.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cv = np.sqrt(v) / m
    random_part = (m > 0) & (v > 0) & (cv > 1e-6)
    safe_cv = np.where(random_part, cv, 1.0)
    return random_part, 1.0 / safe_cv**2, np.where(random_part, m, 1.0) * safe_cv**2
