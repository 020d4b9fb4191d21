"""TTFT as a mixture over prompt bins: prefill wait ⊕ KV-link delay per bin ⊕ deterministic offsets
(docs/queueing.md §1.2, §1.5).

``TTFT = W_p + W_link + g_l``: a request's FCFS wait is independent of its own service under Poisson arrivals, so

    P(TTFT ≤ a | l) = E_{W_link | l}[ F_{W_p}(a − g_l − W_link) ]

with the outer expectation over a discretised link delay per bin (:mod:`pdplan.queueing.link_delay`). Percentiles
come from this mixture cdf by brentq — never by adding quantiles. The serving model that fills it in is
:mod:`pdplan.serving.ttft`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from pdplan.queueing.distributions import WaitDistribution, mixture_quantile_rows
from pdplan.queueing.link_delay import BinDelay
from pdplan.types import FloatArray

if TYPE_CHECKING:
    from pdplan.queueing.batched_ttft import PerBinWait


@dataclass(frozen=True, slots=True)
class TtftMixture:
    """TTFT per rate: prefill wait ``[R]`` (or per bin) ⊕ link delay per bin ⊕ offsets ``[R, K, J]``.

    ``offsets_s[r, k, j]`` is everything deterministic for quadrature length j of prompt bin k
    (equal weights within a bin, :func:`pdplan.workload.quadrature.input_quadrature`). ``wait`` is a
    :class:`~pdplan.queueing.WaitDistribution` shared by all prompts (FCFS prefill) or a
    :class:`~pdplan.queueing.batched_ttft.PerBinWait` (batched prefill: the wait depends on the
    prompt).
    """

    wait: WaitDistribution | PerBinWait
    link: BinDelay
    offsets_s: FloatArray
    prob: FloatArray

    @property
    def mean_s(self) -> FloatArray:
        """``E[W_p] + E[W_link] + Σ_k p_k mean_j g_kj`` per rate."""
        wait = self.wait.mean_s
        wait_mean = wait @ self.prob if wait.ndim == 2 else wait
        link = np.broadcast_to(self.link.bin_mean_s, self.offsets_s.shape[:2])
        return np.asarray(wait_mean + (link + self.offsets_s.mean(axis=2)) @ self.prob, dtype=np.float64)

    def cdf_per_bin(self, a_s: float) -> FloatArray:
        """``P(TTFT ≤ a | k)``, shape ``[R, K]`` (mean over the bin's quadrature lengths)."""
        t = a_s - self.offsets_s[:, :, :, None] - self.link.points_s[:, :, None, :]
        c = self.wait.cdf_rowwise(t)
        j = self.offsets_s.shape[2]
        wts = np.broadcast_to(self.link.weights, (*self.offsets_s.shape[:2], c.shape[3]))
        return np.asarray(np.einsum("rkjp,rkp->rk", c, wts) / j, dtype=np.float64)

    def cdf(self, a_s: float) -> FloatArray:
        """Mixture cdf per rate, shape ``[R]``."""
        return np.asarray(self.cdf_per_bin(a_s) @ self.prob, dtype=np.float64)

    def first_cdf(self, a_s: float) -> float:
        """Mixture cdf of the first rate as a float (root-finding helper)."""
        return float(self.cdf(a_s)[0])

    def row(self, r: int) -> TtftMixture:
        sl = slice(r, r + 1)
        return TtftMixture(self.wait.row(r), self.link.row(r), self.offsets_s[sl], self.prob)

    def _rows_cdf(self, a_s: FloatArray, rows: npt.NDArray[np.intp]) -> FloatArray:
        """Mixture cdf of rate ``rows[k]`` at ``a_s[k]``: the value :meth:`first_cdf` of :meth:`row` gives. The wait's
        cdf is read for the rates in ``rows`` alone, all at once: each rate's cdf is elementwise in its own row, so
        leaving the others out gives the same doubles, and a step of Brent's with few rates still running
        (:func:`pdplan.numerics.brent_rows.brentq_rows`) costs those rates' lattices, not every rate's. Each rate is
        then reduced on its own, as :meth:`cdf_per_bin` of its one-rate mixture reduces it (a reduction over several
        rates at once may add in another order)."""
        t = a_s[:, None, None, None] - self.offsets_s[rows, :, :, None] - self.link.points_s[rows, :, None, :]
        c = _wait_rows(self.wait, rows).cdf_rowwise(t)
        j = self.offsets_s.shape[2]
        out = np.empty(rows.size)
        for k, r in enumerate(rows.tolist()):
            wts = np.broadcast_to(self.link.weights[r : r + 1], (1, self.offsets_s.shape[1], c.shape[3]))
            out[k] = float((np.einsum("rkjp,rkp->rk", c[k : k + 1], wts) / j @ self.prob)[0])
        return out

    def quantile(self, q: float) -> FloatArray:
        """Mixture quantile per rate (brentq on the cdf, all rates at once: :func:`mixture_quantile_rows`), shape
        ``[R]``. Bracket: the least offset to the largest offset + longest link delay + the wait lattice's span."""
        n_rates = self.offsets_s.shape[0]
        low = np.asarray(self.offsets_s.reshape(n_rates, -1).min(axis=1), dtype=np.float64)  # the least offset
        span = _span_s(self.wait).reshape(n_rates, -1).max(axis=1)
        top = self.offsets_s.reshape(n_rates, -1).max(axis=1) + self.link.points_s.reshape(n_rates, -1).max(axis=1)
        return mixture_quantile_rows(self._rows_cdf, q, low, top + span, "TTFT")


def _wait_rows(wait: WaitDistribution | PerBinWait, rows: npt.NDArray[np.intp]) -> WaitDistribution | PerBinWait:
    """``wait`` at the rates ``rows`` alone: every field taken along its leading rate axis, as ``wait.row`` slices
    one rate; ``wait`` itself where ``rows`` is every rate in order."""
    if rows.size == wait.h_s.shape[0] and bool(np.all(rows == np.arange(rows.size))):
        return wait
    return type(wait)(*(getattr(wait, f.name)[rows] for f in dataclasses.fields(wait)))


def _span_s(wait: WaitDistribution | PerBinWait) -> FloatArray:
    """Largest lattice time of a wait distribution per rate."""
    return np.asarray(wait.h_s * (wait.cdf_grid.shape[-1] - 1), dtype=np.float64)


class BinnedTtft(Protocol):
    """A TTFT law read per bin (:class:`TtftMixture`, or one with the overlap scheduler's step coupled to it,
    :class:`pdplan.serving.overlap_ttft.OverlapTtft`)."""

    @property
    def mean_s(self) -> FloatArray: ...
    def cdf_per_bin(self, a_s: float) -> FloatArray: ...
    def quantile(self, q: float) -> FloatArray: ...


@dataclass(frozen=True, slots=True)
class GroupedTtft:
    """A TTFT law over ``K·H`` sub-bins (bin k's H classes, e.g. the prefix-cache classes of
    :mod:`pdplan.serving.prefix_cache`) read per bin: ``P(TTFT ≤ a | k) = Σ_h w[k, h] P(TTFT ≤ a | k, h)``.

    ``inner`` weighs sub-bin (k, h) by ``p_k·w[k, h]``, so its mean and quantiles are already the whole law's."""

    inner: BinnedTtft
    weights: FloatArray
    """``[K, H]``, rows summing to 1."""

    @property
    def mean_s(self) -> FloatArray:
        return self.inner.mean_s

    def cdf_per_bin(self, a_s: float) -> FloatArray:
        """``P(TTFT ≤ a | k)``, shape ``[R, K]``."""
        sub = self.inner.cdf_per_bin(a_s)
        k, h = self.weights.shape
        return np.asarray(np.einsum("rkh,kh->rk", sub.reshape(sub.shape[0], k, h), self.weights), dtype=np.float64)

    def quantile(self, q: float) -> FloatArray:
        return self.inner.quantile(q)
