"""A per-bin mixture of shifted, optionally truncated, gamma loads (the colocated chunked TPOT).

:class:`ComponentMixture` is a :class:`~pdplan.queueing.distributions.GammaMixture` (``T_i =
offset_i + X_i`` per request bin i) whose load X_i is itself a mixture of K components: component k
has weight ``w_k``, mean ``m_k`` and variance ``v_k``, lives on ``[lo_k, hi_k]`` and is there a
gamma in ``X − lo_k`` with mean ``m_k − lo_k`` and variance ``v_k`` (lo_k = 0 and hi_k = ∞ give the
plain two-moment gamma of §2.4), renormalised on ``X ≤ hi_k`` when hi_k is finite (mass a
moment-matched gamma would put past a physical bound is removed, the rest scaled up). A component
with relative sd below 1e-6 is a point mass at m_k. ``P(T_i ≤ b) = Σ_k w_k P(lo_k + G_k ≤ b − offset_i
| ≤ hi_k)``. Means (``load_mean_s``) and the quantile bracket use the untruncated moments.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.numerics.special import gammainc
from pdplan.queueing.distributions import GammaMixture, mixture_quantile
from pdplan.queueing.exact_memo import exact_key, forgets
from pdplan.types import FloatArray

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentMixture(GammaMixture):
    """Components ``[K, R, M]``: weights, mean, variance, support ``[lo, hi]`` (module docstring);
    ``shape``/``scale``/``norm`` are derived by :meth:`of` (keyword-only fields)."""

    weights: FloatArray
    comp_mean_s: FloatArray
    comp_var_s2: FloatArray
    comp_lo_s: FloatArray
    comp_hi_s: FloatArray
    shape: FloatArray
    scale: FloatArray
    norm: FloatArray

    @classmethod
    def of(
        cls,
        offset_s: FloatArray,
        weights: FloatArray,
        mean_s: FloatArray,
        var_s2: FloatArray,
        prob: FloatArray,
        lo_s: FloatArray,
        hi_s: FloatArray,
    ) -> ComponentMixture:
        """Build from components; fills in the mixture load mean and (law of total) variance."""
        lo = np.minimum(np.broadcast_to(lo_s, mean_s.shape), mean_s)
        hi = np.broadcast_to(hi_s, mean_s.shape)
        mean = np.sum(weights * mean_s, axis=0)
        var = np.maximum(np.sum(weights * (var_s2 + mean_s**2), axis=0) - mean**2, 0.0)
        excess = mean_s - lo
        with np.errstate(divide="ignore", invalid="ignore"):
            random = (var_s2 > 0) & (excess > 0) & (np.sqrt(var_s2) > 1e-6 * excess)
            shape = np.where(random, excess**2 / var_s2, np.inf)
            scale = np.where(random, var_s2 / excess, 0.0)
            top = np.where(random & np.isfinite(hi), (hi - lo) / scale, np.inf)
        norm = np.ones_like(mean_s)
        cut = np.isfinite(top)
        norm[cut] = np.maximum(gammainc(shape[cut], top[cut]), 1e-300)
        return cls(
            offset_s,
            mean,
            var,
            prob,
            weights=weights,
            comp_mean_s=mean_s,
            comp_var_s2=var_s2,
            comp_lo_s=lo.copy(),
            comp_hi_s=hi.copy(),
            shape=shape,
            scale=scale,
            norm=norm,
        )

    def cdf_per_bin(self, b_s: float) -> FloatArray:
        """``Σ_k w_k P(offset + X_k ≤ b)`` per bin, shape ``[R, M]``."""
        return _cdf_per_bin(b_s - self.offset_s[None], _Prepared.of(self))

    def row(self, r: int) -> ComponentMixture:
        """The mixture at rate index ``r`` alone (``R = 1``)."""
        sl = slice(r, r + 1)
        return ComponentMixture(
            self.offset_s[sl],
            self.load_mean_s[sl],
            self.load_var_s2[sl],
            self.prob,
            weights=self.weights[:, sl],
            comp_mean_s=self.comp_mean_s[:, sl],
            comp_var_s2=self.comp_var_s2[:, sl],
            comp_lo_s=self.comp_lo_s[:, sl],
            comp_hi_s=self.comp_hi_s[:, sl],
            shape=self.shape[:, sl],
            scale=self.scale[:, sl],
            norm=self.norm[:, sl],
        )

    def quantile(self, q: float) -> FloatArray:
        """Mixture quantile per rate by brentq on the cdf; shape ``[R]``. Each rate's cdf is :meth:`first_cdf` of
        :meth:`row` with the row's masks taken once (the same doubles). Memoised on the exact doubles of ``q`` and
        every field (a search reads the same percentile of one colocated plan several times); a fresh copy each
        call."""
        key = exact_key((q, *self.shape.shape), tuple(getattr(self, name) for name in _FIELDS))
        hit = _QUANTILES.get(key)
        if hit is None:
            hit = self._quantile(q)
            _QUANTILES[key] = hit
            if len(_QUANTILES) > _QUANTILE_ENTRIES:
                _QUANTILES.popitem(last=False)
        else:
            _QUANTILES.move_to_end(key)
        return hit.copy()

    def _quantile(self, q: float) -> FloatArray:
        """:meth:`quantile` computed."""
        out = np.empty(self.offset_s.shape[0])
        for r in range(out.shape[0]):
            lo = float(self.offset_s[r].min())
            top = self.offset_s[r] + self.comp_mean_s[:, r] + 60.0 * np.sqrt(self.comp_var_s2[:, r])
            out[r] = mixture_quantile(_first_cdf(self.row(r)), q, lo, float(top.max()) + 1e-12, "TPOT")
        return out


_FIELDS = (
    "offset_s",
    "prob",
    "weights",
    "comp_mean_s",
    "comp_var_s2",
    "comp_lo_s",
    "comp_hi_s",
    "shape",
    "scale",
    "norm",
)
"""The fields :meth:`ComponentMixture.quantile` reads."""
_QUANTILES: OrderedDict[bytes, FloatArray] = OrderedDict()
_QUANTILE_ENTRIES = 256
"""Quantiles kept, least recently used dropped first (12 default-family sweep points ask for 19 distinct ones, 76
times)."""


@forgets
def clear_memo() -> None:
    """Forget the memoised quantiles (a search timed from scratch)."""
    _QUANTILES.clear()


def _first_cdf(one: ComponentMixture) -> Callable[[float], float]:
    """``one.first_cdf`` with the masks of :class:`_Prepared` and the offsets taken once (the same doubles)."""
    prepared, offset = _Prepared.of(one), one.offset_s[None]

    def cdf(b_s: float) -> float:
        return float(_cdf_per_bin(b_s - offset, prepared)[0] @ one.prob)

    return cdf


@dataclass(frozen=True, slots=True)
class _Prepared:
    """What :func:`_cdf_per_bin` reads of a mixture, taken once per mixture: its component arrays as contiguous
    ``[K, R, M]`` doubles (so that one flat index reads each), which components are random (finite shape) and which
    are live: random and of nonzero weight (those whose cdf needs ``gammainc``)."""

    weights: FloatArray
    mean_s: FloatArray
    lo_s: FloatArray
    hi_s: FloatArray
    shape: FloatArray
    scale: FloatArray
    norm: FloatArray
    random: BoolArray
    live: BoolArray

    @classmethod
    def of(cls, mix: ComponentMixture) -> _Prepared:
        random = np.isfinite(mix.shape)
        return cls(
            weights=np.ascontiguousarray(mix.weights),
            mean_s=np.ascontiguousarray(mix.comp_mean_s),
            lo_s=np.ascontiguousarray(mix.comp_lo_s),
            hi_s=np.ascontiguousarray(mix.comp_hi_s),
            shape=np.ascontiguousarray(mix.shape),
            scale=np.ascontiguousarray(mix.scale),
            norm=np.ascontiguousarray(mix.norm),
            random=random,
            live=random & (mix.weights > 0.0),
        )


def _cdf_per_bin(d_s: FloatArray, mix: _Prepared) -> FloatArray:
    """``Σ_k w_k P(X_k ≤ d)`` per bin at ``d = b − offset`` (``[1, R, M]``).

    ``gammainc`` runs only where its value counts: a live component below its cap ``hi`` with ``x = d − lo > 0``.
    Elsewhere the value is what the full formula gives, without the call: past the cap 1; at ``x ≤ 0`` 0 (its
    argument is 0 and ``P(k, 0) = 0``); a zero-weight component contributes ``0·w = 0`` whatever its cdf (finite,
    in [0, 1]); a point mass at m is the indicator ``d ≥ m``. Same doubles as evaluating ``gammainc`` everywhere
    (tests/unit/queueing/test_components.py). The components it runs on are read by one flat index each."""
    x = d_s - mix.lo_s
    below = d_s < mix.hi_s
    per = np.where(mix.random, ~below, d_s >= mix.mean_s).astype(np.float64)  # random: 1 past the cap, else 0
    run = np.flatnonzero(mix.live & below & (x > 0.0))
    gam = gammainc(mix.shape.take(run), x.take(run) / mix.scale.take(run)) / mix.norm.take(run)
    per.put(run, np.minimum(gam, 1.0))
    return np.asarray(np.sum(per * mix.weights, axis=0), dtype=np.float64)
