"""Token-length laws of a workload file: fixed, uniform, truncated normal and lognormal, histogram.

Each is a frozen pydantic model selected by its ``dist`` tag and exposes its closed-form ``cdf``,
``ppf`` and partial mean ``E[X; X <= x]`` so that :mod:`pdplan.workload.bins` can bin it exactly
(conditional means preserve the mean). Token lengths are integers >= 1; the laws are continuous and
sampling rounds (:func:`pdplan.workload.bins.sample`).

* ``normal``: ``mean``/``std`` are the parent normal's parameters, truncated to ``[min, max]``.
* ``lognormal``: ``mu``/``sigma`` are the parent's log-space parameters; ``mean`` instead asks for
  the mean *after* truncation to ``[min, max]`` (``mu`` is solved for), which is what a published
  "average input length" means.
* ``histogram``: ``bins`` are N+1 increasing edges, ``weights`` N relative weights, uniform within
  a bin (as ``numpy.histogram``).
"""

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import (
    Field,
    PrivateAttr,
    model_validator,
)

from pdplan.numerics import special
from pdplan.numerics.roots import brentq
from pdplan.specs.base import FrozenModel
from pdplan.types import FloatArray

TokenCount = Annotated[int, Field(ge=1)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
MIN_TRUNCATED_MASS = 1e-9  # below this, [min, max] holds essentially none of the parent law


def _phi_diff(z_lo: FloatArray, z_hi: FloatArray) -> FloatArray:
    """Φ(z_hi) − Φ(z_lo) without cancellation in the upper tail (uses survival functions there)."""
    upper = z_lo > 0
    diff = np.where(upper, special.ndtr(-z_lo) - special.ndtr(-z_hi), special.ndtr(z_hi) - special.ndtr(z_lo))
    return np.asarray(diff, dtype=np.float64)


def _pdf_std(z: FloatArray) -> FloatArray:
    return np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


class _Continuous(FrozenModel):
    """Shared interface: bounds, cdf, ppf, partial mean and point-mass detection."""

    @property
    def lower(self) -> float:
        raise NotImplementedError

    @property
    def upper(self) -> float:
        raise NotImplementedError

    def point_value(self) -> float | None:
        """The single length when the distribution is a point mass, else None."""
        return None

    def cdf(self, x: FloatArray) -> FloatArray:
        raise NotImplementedError

    def ppf(self, q: FloatArray) -> FloatArray:
        raise NotImplementedError

    def partial_mean(self, x: FloatArray) -> FloatArray:
        """E[X · 1{X <= x}]; at ``upper`` this is the mean."""
        raise NotImplementedError

    def mean_tokens(self) -> float:
        point = self.point_value()
        if point is not None:
            return point
        return float(self.partial_mean(np.array([self.upper]))[0])

    def median_tokens(self) -> float:
        point = self.point_value()
        return point if point is not None else float(self.ppf(np.array([0.5]))[0])


class FixedDist(_Continuous):
    """Every request has exactly ``value`` tokens."""

    dist: Literal["fixed"]
    value: TokenCount

    @property
    def lower(self) -> float:
        return float(self.value)

    @property
    def upper(self) -> float:
        return float(self.value)

    def point_value(self) -> float | None:
        return float(self.value)

    def cdf(self, x: FloatArray) -> FloatArray:
        return (np.asarray(x, dtype=float) >= self.value).astype(float)

    def ppf(self, q: FloatArray) -> FloatArray:
        return np.full(np.shape(q), float(self.value))

    def partial_mean(self, x: FloatArray) -> FloatArray:
        return self.cdf(x) * self.value


class UniformDist(_Continuous):
    """Uniform on [min, max] (sampled as integers min..max inclusive; same mean)."""

    dist: Literal["uniform"]
    min: TokenCount
    max: TokenCount

    @model_validator(mode="after")
    def _ordered(self) -> "UniformDist":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    @property
    def lower(self) -> float:
        return float(self.min)

    @property
    def upper(self) -> float:
        return float(self.max)

    def point_value(self) -> float | None:
        return float(self.min) if self.min == self.max else None

    def cdf(self, x: FloatArray) -> FloatArray:
        xa = np.asarray(x, dtype=float)
        if self.min == self.max:
            return (xa >= self.min).astype(float)
        return np.clip((xa - self.min) / (self.max - self.min), 0.0, 1.0)

    def ppf(self, q: FloatArray) -> FloatArray:
        return self.min + np.asarray(q, dtype=float) * (self.max - self.min)

    def partial_mean(self, x: FloatArray) -> FloatArray:
        xc = np.clip(np.asarray(x, dtype=float), self.min, self.max)
        return np.asarray(self.cdf(xc) * (self.min + xc) / 2.0, dtype=np.float64)


class _Truncated(_Continuous):
    """A parent law (normal in z-space) truncated to [min, max]; subclasses map x -> z."""

    min: TokenCount = 1
    max: TokenCount

    @property
    def lower(self) -> float:
        return float(self.min)

    @property
    def upper(self) -> float:
        return float(self.max)

    def _z(self, x: FloatArray) -> FloatArray:
        raise NotImplementedError

    def _x(self, z: FloatArray) -> FloatArray:
        raise NotImplementedError

    def _z_bounds(self) -> tuple[FloatArray, FloatArray]:
        return self._z(np.array([float(self.min)])), self._z(np.array([float(self.max)]))

    def mass(self) -> float:
        """Parent probability inside [min, max]."""
        za, zb = self._z_bounds()
        return float(_phi_diff(za, zb)[0])

    def cdf(self, x: FloatArray) -> FloatArray:
        point = self.point_value()
        if point is not None:
            return (np.asarray(x, dtype=float) >= point).astype(float)
        za, zb = self._z_bounds()
        xc = np.clip(np.asarray(x, dtype=float), self.min, self.max)
        return np.clip(_phi_diff(za, self._z(xc)) / _phi_diff(za, zb), 0.0, 1.0)

    def ppf(self, q: FloatArray) -> FloatArray:
        qa = np.asarray(q, dtype=float)
        point = self.point_value()
        if point is not None:
            return np.full(qa.shape, point)
        za, zb = self._z_bounds()
        if za[0] > 0:  # window in the upper tail: invert the survival function
            z = -special.ndtri(special.ndtr(-za) - qa * _phi_diff(za, zb))
        else:
            z = special.ndtri(special.ndtr(za) + qa * _phi_diff(za, zb))
        return np.clip(self._x(z), self.min, self.max)


class NormalDist(_Truncated):
    """Normal(mean, std) truncated to [min, max]; std = 0 is a point mass at ``mean``."""

    dist: Literal["normal"]
    mean: FiniteFloat = Field(gt=0)
    std: FiniteFloat = Field(ge=0)

    @model_validator(mode="after")
    def _check(self) -> "NormalDist":
        if self.min >= self.max:
            raise ValueError(f"min ({self.min}) must be < max ({self.max}); use dist: fixed")
        if not self.min <= self.mean <= self.max:
            raise ValueError(f"mean ({self.mean}) must lie within [min, max] = [{self.min}, {self.max}]")
        return self

    def point_value(self) -> float | None:
        # a spread below a billionth of the mean is a point mass (and would overflow z-scores)
        return float(self.mean) if self.std <= 1e-9 * self.mean else None

    def _z(self, x: FloatArray) -> FloatArray:
        return (np.asarray(x, dtype=float) - self.mean) / self.std

    def _x(self, z: FloatArray) -> FloatArray:
        return self.mean + self.std * z

    def partial_mean(self, x: FloatArray) -> FloatArray:
        if self.point_value() is not None:
            return self.cdf(x) * self.mean
        za, zb = self._z_bounds()
        zx = self._z(np.clip(np.asarray(x, dtype=float), self.min, self.max))
        num = self.mean * _phi_diff(za, zx) - self.std * (_pdf_std(zx) - _pdf_std(za))
        return num / _phi_diff(za, zb)


class LognormalDist(_Truncated):
    """Lognormal on [min, max], given ``mu`` (log-space) or ``mean`` (after truncation)."""

    dist: Literal["lognormal"]
    mean: FiniteFloat | None = Field(default=None, gt=0)
    mu: FiniteFloat | None = None
    sigma: FiniteFloat = Field(gt=0, le=10)
    _mu: float = PrivateAttr(default=0.0)

    @model_validator(mode="after")
    def _check(self) -> "LognormalDist":
        if (self.mean is None) == (self.mu is None):
            raise ValueError("give exactly one of mean (truncated mean) or mu (log-space location)")
        if self.min >= self.max:
            raise ValueError(f"min ({self.min}) must be < max ({self.max}); use dist: fixed")
        if self.mu is not None:
            self._mu = float(self.mu)
        else:
            assert self.mean is not None
            if not self.min < self.mean < self.max:
                raise ValueError(f"mean ({self.mean}) must lie strictly inside (min, max) = ({self.min}, {self.max})")
            self._mu = self._solve_mu(float(self.mean))
        if self.mass() < MIN_TRUNCATED_MASS:
            raise ValueError(
                f"[min, max] = [{self.min}, {self.max}] holds {self.mass():.1e} of "
                f"lognormal(mu={self._mu:.3f}, sigma={self.sigma}); widen it"
            )
        return self

    @property
    def mu_resolved(self) -> float:
        """Log-space location of the parent lognormal (given, or solved from ``mean``)."""
        return self._mu

    def _solve_mu(self, target: float) -> float:
        def gap(mu: float) -> float:
            self._mu = mu
            return self.mean_tokens() - target

        lo, hi = math.log(self.min) - 2.0 * self.sigma, math.log(self.max) + 2.0 * self.sigma
        for _ in range(20):
            if gap(lo) < 0 < gap(hi):
                return brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12)
            lo, hi = lo - self.sigma, hi + self.sigma
        raise ValueError(f"mean ({target}) too close to min/max for sigma {self.sigma}")

    def _z(self, x: FloatArray) -> FloatArray:
        return np.asarray((np.log(np.asarray(x, dtype=float)) - self._mu) / self.sigma)

    def _x(self, z: FloatArray) -> FloatArray:
        return np.exp(self._mu + self.sigma * np.asarray(z, dtype=float))

    def partial_mean(self, x: FloatArray) -> FloatArray:
        za, zb = self._z_bounds()
        zx = self._z(np.clip(np.asarray(x, dtype=float), self.min, self.max))
        scale = math.exp(self._mu + 0.5 * self.sigma**2)
        return scale * _phi_diff(za - self.sigma, zx - self.sigma) / _phi_diff(za, zb)


class HistogramDist(_Continuous):
    """Relative ``weights`` over ``bins`` (N+1 increasing edges), uniform within a bin."""

    dist: Literal["histogram"]
    bins: list[FiniteFloat] = Field(min_length=2)
    weights: list[FiniteFloat] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "HistogramDist":
        edges = np.asarray(self.bins)
        if len(self.weights) != len(self.bins) - 1:
            raise ValueError(
                f"need len(weights) = len(bins) - 1; got {len(self.weights)} weights for {len(self.bins)} edges"
            )
        if np.any(np.diff(edges) <= 0):
            raise ValueError("bins (edges) must be strictly increasing")
        if edges[0] < 1:
            raise ValueError(f"first edge {self.bins[0]} < 1; token lengths are >= 1")
        if min(self.weights) < 0 or sum(self.weights) <= 0:
            raise ValueError("weights must be >= 0 with a positive sum")
        return self

    @property
    def lower(self) -> float:
        return float(self.bins[0])

    @property
    def upper(self) -> float:
        return float(self.bins[-1])

    def _cum(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        edges = np.asarray(self.bins, dtype=float)
        p = np.asarray(self.weights, dtype=float) / math.fsum(self.weights)
        return edges, p, np.concatenate([[0.0], np.cumsum(p)])

    def cdf(self, x: FloatArray) -> FloatArray:
        edges, _, cum = self._cum()
        return np.asarray(np.interp(np.asarray(x, dtype=float), edges, cum), dtype=np.float64)

    def ppf(self, q: FloatArray) -> FloatArray:
        edges, _, cum = self._cum()
        return np.asarray(np.interp(np.asarray(q, dtype=float), cum, edges), dtype=np.float64)

    def partial_mean(self, x: FloatArray) -> FloatArray:
        edges, p, _ = self._cum()
        cum_m = np.concatenate([[0.0], np.cumsum(p * (edges[:-1] + edges[1:]) / 2.0)])
        xc = np.clip(np.asarray(x, dtype=float), edges[0], edges[-1])
        k = np.clip(np.searchsorted(edges, xc, side="right") - 1, 0, len(p) - 1)
        frac = (xc - edges[k]) / (edges[k + 1] - edges[k])
        return np.asarray(cum_m[k] + p[k] * frac * (edges[k] + xc) / 2.0, dtype=np.float64)


ParametricDist = FixedDist | UniformDist | NormalDist | LognormalDist | HistogramDist
