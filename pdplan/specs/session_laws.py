"""Laws of a session's shape: how many turns it has (a law on integers ≥ 1) and how long a user thinks between turns
(a law on times ≥ 0 s), for the ``sessions:`` block of :mod:`pdplan.specs.reuse` (docs/reuse_workloads.md §1).

* Turn counts: ``fixed`` (value), ``uniform`` (integers min..max), ``geometric`` (mean ≥ 1: P(T = k) = (1 − q)q^(k−1),
  q = 1 − 1/mean), ``histogram`` (turn counts ``values`` with relative ``weights``). Each gives E[T], E[T²] and the
  law of a random request's turn index, ``P(K = k) = P(T ≥ k)/E[T]`` (:mod:`pdplan.specs.token_pmf`).
* Think times, in seconds (unit strings such as ``"30s"`` are read by :func:`pdplan.units.parse_time_s`): ``fixed``
  (value), ``exponential`` (mean), ``lognormal`` (mean and log-space sigma: μ = ln(mean) − σ²/2), ``uniform``
  (min, max). Each gives its mean, squared coefficient of variation, cdf and quantile function.
"""

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from pdplan.numerics.normal import ndtr, ndtri
from pdplan.specs.base import FrozenModel
from pdplan.specs.token_pmf import TurnIndexLaw
from pdplan.types import FloatArray, Int64Array
from pdplan.units import parse_time_s

MAX_TURNS = 10_000
"""Turn counts pdplan accepts: DualPath's agent traces average 157 rounds (docs/mission_features.md §3.1); 10,000
keeps a 60× margin while the exact turn mixture stays computable (:mod:`pdplan.specs.token_pmf`)."""

TurnCount = Annotated[int, Field(ge=1, le=MAX_TURNS)]
NonNegSeconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
PosSeconds = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]


# ------------------------------------------------------------------------------------------- turn counts
class _TurnLaw(FrozenModel):
    """A law on the turns T of a session: its pmf (finite laws), moments and the request-level turn index."""

    def pmf(self) -> tuple[Int64Array, FloatArray]:
        """(counts, probabilities) of T for a finite law."""
        raise NotImplementedError

    def mean_turns(self) -> float:
        """E[T]."""
        counts, prob = self.pmf()
        return float(prob @ counts)

    def second_moment(self) -> float:
        counts, prob = self.pmf()
        return float(prob @ counts.astype(np.float64) ** 2)

    def index_law(self) -> TurnIndexLaw:
        """``P(K = k) = P(T ≥ k)/E[T]`` for k = 1..max T (:mod:`pdplan.specs.token_pmf`)."""
        counts, prob = self.pmf()
        at = np.zeros(int(counts[-1]))
        at[counts - 1] = prob
        survival = np.cumsum(at[::-1])[::-1]  # P(T >= k), k = 1..max
        return TurnIndexLaw(weights=survival / self.mean_turns())


class FixedTurns(_TurnLaw):
    """Every session has ``value`` turns."""

    dist: Literal["fixed"]
    value: TurnCount

    def pmf(self) -> tuple[Int64Array, FloatArray]:
        return np.array([self.value], dtype=np.int64), np.array([1.0])


class UniformTurns(_TurnLaw):
    """T uniform on the integers min..max."""

    dist: Literal["uniform"]
    min: TurnCount
    max: TurnCount

    @model_validator(mode="after")
    def _ordered(self) -> "UniformTurns":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def pmf(self) -> tuple[Int64Array, FloatArray]:
        counts = np.arange(self.min, self.max + 1, dtype=np.int64)
        return counts, np.full(counts.size, 1.0 / counts.size)


class GeometricTurns(_TurnLaw):
    """T geometric on 1, 2, … with the given mean: ``P(T = k) = (1 − q)·q^(k−1)``, q = 1 − 1/mean."""

    dist: Literal["geometric"]
    mean: Annotated[float, Field(ge=1.0, le=MAX_TURNS, allow_inf_nan=False)]

    @property
    def ratio(self) -> float:
        return 1.0 - 1.0 / self.mean

    def mean_turns(self) -> float:
        return float(self.mean)

    def second_moment(self) -> float:
        m = float(self.mean)
        return 2.0 * m * m - m  # E[T²] = (2 − p)/p² with p = 1/m

    def index_law(self) -> TurnIndexLaw:
        """P(T ≥ k) = q^(k−1), E[T] = 1/(1 − q): the index law is the same geometric (memorylessness)."""
        return TurnIndexLaw(geometric_ratio=self.ratio)


class HistogramTurns(_TurnLaw):
    """T takes the integer ``values`` with relative ``weights`` (a pmf: unlike the length-law histogram, which
    has bin edges, each value here is one turn count)."""

    dist: Literal["histogram"]
    values: list[TurnCount] = Field(min_length=1)
    weights: list[Annotated[float, Field(ge=0.0, allow_inf_nan=False)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "HistogramTurns":
        if len(self.values) != len(self.weights):
            raise ValueError(
                f"need one weight per value; got {len(self.weights)} weights for {len(self.values)} values"
            )
        if any(b <= a for a, b in zip(self.values, self.values[1:], strict=False)):
            raise ValueError("values must be strictly increasing turn counts")
        if sum(self.weights) <= 0:
            raise ValueError("weights must have a positive sum")
        return self

    def pmf(self) -> tuple[Int64Array, FloatArray]:
        w = np.asarray(self.weights, dtype=np.float64)
        return np.asarray(self.values, dtype=np.int64), w / w.sum()


TurnsLaw = Annotated[FixedTurns | UniformTurns | GeometricTurns | HistogramTurns, Field(discriminator="dist")]


# ------------------------------------------------------------------------------------------- times
class _TimeLaw(FrozenModel):
    """A law on a time ≥ 0 in seconds: mean, squared coefficient of variation, cdf and quantile function."""

    @field_validator("value", "mean", "min", "max", mode="before", check_fields=False)
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected a time such as '30s' or '500ms', got a boolean")
        return parse_time_s(value) if isinstance(value, str) else value

    def mean_s(self) -> float:
        raise NotImplementedError

    def scv(self) -> float:
        """Var/mean² (0 for a zero mean)."""
        raise NotImplementedError

    def cdf(self, t_s: FloatArray) -> FloatArray:
        raise NotImplementedError

    def ppf(self, q: FloatArray) -> FloatArray:
        raise NotImplementedError


class FixedTime(_TimeLaw):
    dist: Literal["fixed"]
    value: NonNegSeconds

    def mean_s(self) -> float:
        return float(self.value)

    def scv(self) -> float:
        return 0.0

    def cdf(self, t_s: FloatArray) -> FloatArray:
        return (np.asarray(t_s, dtype=np.float64) >= self.value).astype(np.float64)

    def ppf(self, q: FloatArray) -> FloatArray:
        return np.full(np.shape(q), float(self.value))


class ExponentialTime(_TimeLaw):
    dist: Literal["exponential"]
    mean: PosSeconds

    def mean_s(self) -> float:
        return float(self.mean)

    def scv(self) -> float:
        return 1.0

    def cdf(self, t_s: FloatArray) -> FloatArray:
        return np.asarray(-np.expm1(-np.maximum(np.asarray(t_s, dtype=np.float64), 0.0) / self.mean))

    def ppf(self, q: FloatArray) -> FloatArray:
        return np.asarray(-self.mean * np.log1p(-np.asarray(q, dtype=np.float64)))


class LognormalTime(_TimeLaw):
    """Lognormal with the given ``mean`` (s) and log-space ``sigma``: μ = ln(mean) − σ²/2."""

    dist: Literal["lognormal"]
    mean: PosSeconds
    sigma: Annotated[float, Field(gt=0.0, le=10.0, allow_inf_nan=False)]

    def mean_s(self) -> float:
        return float(self.mean)

    def scv(self) -> float:
        return math.expm1(self.sigma**2)

    def _mu(self) -> float:
        return math.log(self.mean) - 0.5 * self.sigma**2

    def cdf(self, t_s: FloatArray) -> FloatArray:
        t = np.maximum(np.asarray(t_s, dtype=np.float64), 1e-300)
        return np.asarray(ndtr((np.log(t) - self._mu()) / self.sigma))

    def ppf(self, q: FloatArray) -> FloatArray:
        return np.asarray(np.exp(self._mu() + self.sigma * ndtri(np.asarray(q, dtype=np.float64))))


class UniformTime(_TimeLaw):
    dist: Literal["uniform"]
    min: NonNegSeconds
    max: NonNegSeconds

    @model_validator(mode="after")
    def _ordered(self) -> "UniformTime":
        if self.min > self.max:
            raise ValueError(f"min ({self.min} s) must be <= max ({self.max} s)")
        return self

    def mean_s(self) -> float:
        return 0.5 * (self.min + self.max)

    def scv(self) -> float:
        mean = self.mean_s()
        return 0.0 if mean == 0 else (self.max - self.min) ** 2 / 12.0 / mean**2

    def cdf(self, t_s: FloatArray) -> FloatArray:
        t = np.asarray(t_s, dtype=np.float64)
        if self.max == self.min:
            return (t >= self.min).astype(np.float64)
        return np.clip((t - self.min) / (self.max - self.min), 0.0, 1.0)

    def ppf(self, q: FloatArray) -> FloatArray:
        return np.asarray(self.min + np.asarray(q, dtype=np.float64) * (self.max - self.min))


TimeLaw = Annotated[FixedTime | ExponentialTime | LognormalTime | UniformTime, Field(discriminator="dist")]
