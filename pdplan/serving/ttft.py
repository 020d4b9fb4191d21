"""TTFT of a disaggregated deployment as a mixture over prompt bins (QUEUEING §1.2, §1.5).

``TTFT = W_p + W_link + g_l`` with ``W_p`` the prefill-pool wait (FFT, by routing policy),
``W_link`` the KV link's own FCFS wait when it is busy (an independent M/G/1 on the transfer
times) and ``g_l`` everything deterministic given the prompt bin l (prefill latency, exposed
transfer, decode step boundary and first step for convention A). Because a request's FCFS wait is
independent of its own service under Poisson arrivals,

    P(TTFT ≤ a | l) = E_{W_link}[ F_{W_p}(a − g_l − W_link) ]

where the outer expectation runs over a discretised link wait: its atom ``P(W_link = 0)`` plus
``LINK_POINTS`` equal-probability conditional quantile points (a midpoint rule; the link wait is a
second-order term). Percentiles come from this mixture cdf by brentq — never by adding quantiles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.queueing import WaitDistribution, erlang_c, mg1_wait_distribution, mixture_quantile
from pdplan.queueing.distributions import FloatArray

LINK_POINTS = 16
GRID_CELLS = 2**13
"""FFT lattice cells for waits in the serving model (queueing default 2^16): the grid still spans
≥ 30 conditional mean waits + max S (§1.2(1) sizing), at 1/8 of the cost; the interpolated cdf at an
SLO threshold moves by < 1e−3 in our examples."""


def prefill_wait(policy: str, rates: FloatArray, service_s: FloatArray, prob: FloatArray,
                 instances: int, max_cells: int = GRID_CELLS) -> WaitDistribution:
    """:func:`pdplan.queueing.prefill_wait_distribution` with a ``max_cells`` lattice (same models:
    random → M/G/1 at λ/x; round-robin → Kingman-rescaled M/G/1; least-work → Erlang-C × M/G/1 on
    S/x). Kept in step with ``pdplan.queueing.mgc``; to be dropped when that takes ``max_cells``."""
    s, p = np.asarray(service_s, dtype=np.float64), np.asarray(prob, dtype=np.float64)
    if policy == "least-work":
        a = rates * float(p @ s)
        w1 = mg1_wait_distribution(rates, s / instances, p, max_cells=max_cells)
        c = erlang_c(instances, a)
        rho = a / instances
        ratio = np.where(rho > 0, c / np.where(rho > 0, rho, 1.0), 0.0)
        cdf = np.clip(1.0 - ratio[:, None] * (1.0 - w1.cdf_grid), 0.0, 1.0)
        return WaitDistribution(w1.h_s, cdf, 1.0 - c, ratio * w1.mean_s)
    w1 = mg1_wait_distribution(rates / instances, s, p, max_cells=max_cells)
    if policy == "random":
        return w1
    m1, m2 = float(p @ s), float(p @ s**2)
    cs2 = m2 / m1**2 - 1.0
    scale = (1.0 / instances + cs2) / (1.0 + cs2)
    if scale <= 0:  # deterministic service, x = 1 impossible here; keep the M/G/1 wait
        return w1
    return WaitDistribution(w1.h_s * scale, w1.cdf_grid, w1.atom, w1.mean_s * scale)


@dataclass(frozen=True, slots=True)
class PointMass:
    """A per-rate discrete distribution: ``points_s[r, j]`` with weights ``weights[r, j]``."""

    points_s: FloatArray
    weights: FloatArray

    @property
    def mean_s(self) -> FloatArray:
        return np.asarray(np.sum(self.points_s * self.weights, axis=1), dtype=np.float64)


def zero_wait(n_rates: int) -> PointMass:
    """No link queue: W_link ≡ 0."""
    return PointMass(np.zeros((n_rates, 1)), np.ones((n_rates, 1)))


def discretise_wait(wait: WaitDistribution, points: int = LINK_POINTS) -> PointMass:
    """Atom at 0 plus ``points`` mid-probability conditional quantiles, per rate."""
    n_rates = wait.h_s.size
    pts = np.zeros((n_rates, points + 1))
    wts = np.zeros((n_rates, points + 1))
    mids = (np.arange(points) + 0.5) / points
    for r in range(n_rates):
        atom = float(wait.atom[r])
        top = float(wait.cdf_grid[r, -1])
        levels = np.minimum(atom + (1.0 - atom) * mids, top - 1e-12)
        levels = np.maximum(levels, atom)
        pts[r, 1:] = wait.row(r).quantile(levels)[0]
        wts[r, 0] = atom
        wts[r, 1:] = (1.0 - atom) / points
    return PointMass(pts, wts)


@dataclass(frozen=True, slots=True)
class TtftMixture:
    """TTFT per rate: prefill wait ``[R]`` ⊕ link wait points ⊕ bin offsets ``[R, K]``."""

    wait: WaitDistribution
    link: PointMass
    offsets_s: FloatArray
    prob: FloatArray

    @property
    def mean_s(self) -> FloatArray:
        """``E[W_p] + E[W_link] + Σ_l p_l g_l`` per rate."""
        return np.asarray(self.wait.mean_s + self.link.mean_s + self.offsets_s @ self.prob,
                          dtype=np.float64)

    def cdf_per_bin(self, a_s: float) -> FloatArray:
        """``P(TTFT ≤ a | l)``, shape ``[R, K]``."""
        t = a_s - self.offsets_s[:, :, None] - self.link.points_s[:, None, :]
        return np.asarray(np.einsum("rkj,rj->rk", self.wait.cdf_rowwise(t), self.link.weights),
                          dtype=np.float64)

    def cdf(self, a_s: float) -> FloatArray:
        """Mixture cdf per rate, shape ``[R]``."""
        return np.asarray(self.cdf_per_bin(a_s) @ self.prob, dtype=np.float64)

    def first_cdf(self, a_s: float) -> float:
        """Mixture cdf of the first rate as a float (root-finding helper)."""
        return float(self.cdf(a_s)[0])

    def row(self, r: int) -> TtftMixture:
        sl = slice(r, r + 1)
        return TtftMixture(self.wait.row(r), PointMass(self.link.points_s[sl],
                           self.link.weights[sl]), self.offsets_s[sl], self.prob)

    def quantile(self, q: float) -> FloatArray:
        """Mixture quantile per rate (brentq on the cdf), shape ``[R]``."""
        out = np.empty(self.offsets_s.shape[0])
        for r in range(out.size):
            one = self.row(r)
            lo = float(one.offsets_s.min())
            span = float(one.wait.h_s[0]) * (one.wait.cdf_grid.shape[1] - 1)
            hi = float(one.offsets_s.max() + one.link.points_s.max()) + span
            out[r] = mixture_quantile(one.first_cdf, q, lo, hi, "TTFT")
        return out
