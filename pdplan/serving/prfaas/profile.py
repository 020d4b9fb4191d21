"""Per-request prefill time ``T(l)`` and KV bytes ``S(l)`` of one prefill instance, as curves of the prompt length.

A **measured profile** (the paper's Table 5 form: a few lengths with their prefill latency and KV size) is
interpolated:

* ``T(l)``: monotone piecewise-cubic Hermite (PCHIP, Fritsch–Carlson) through the points, so the curve keeps
  the measured points, stays monotone and has no overshoot between them (a piecewise-linear curve would
  overstate a convex T(l) between points; the quadratic least-squares fit of the reference note is not
  interpolating). Fed Table 5, PCHIP gives E[T | L > 19.4K] = 2.50 s against the quadratic fit's 2.49 s.
* ``S(l)``: piecewise linear (KV grows linearly in ``l`` for full-attention layers, plus a constant recurrent
  state for linear-attention layers, so linear interpolation is exact for such models).

Below the first point both hold the first point's value: prefill time and KV size increase with ``l``, so
this is an upper bound, never an invented number. Above the last point there is no data: a length law whose
upper bound exceeds the last point is rejected (:meth:`MeasuredProfile.check_covers`).

A **roofline curve** is any pair of callables with the same signature (:class:`Curves`); the serving layer
builds them from pdplan's perf and KV models. ``source`` says which it is; reports print it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pdplan.errors import SpecError
from pdplan.numerics.pchip import Pchip
from pdplan.serving.prfaas.lengths import Curve
from pdplan.types import FloatArray


@dataclass(frozen=True)
class Curves:
    """``prefill_s(l)`` and ``kv_bytes(l)`` of one prefill instance; ``source`` names where they come from."""

    prefill_s: Curve
    kv_bytes: Curve
    source: str


@dataclass(frozen=True, eq=False)
class MeasuredProfile:
    """Measured prefill latencies (and optionally KV sizes) at increasing prompt lengths."""

    tokens: FloatArray
    prefill_s: FloatArray
    kv_bytes: FloatArray | None = None
    source: str = "measured profile"
    _pchip: Pchip = field(init=False, repr=False)

    def __post_init__(self) -> None:
        tok, t_s = np.asarray(self.tokens, float), np.asarray(self.prefill_s, float)
        if tok.ndim != 1 or tok.size < 2 or tok.shape != t_s.shape:
            raise SpecError("a prefill profile needs >= 2 rows of tokens,prefill_s", source=self.source)
        if np.any(np.diff(tok) <= 0) or tok[0] < 1:
            raise SpecError("profile tokens must be >= 1 and strictly increasing", source=self.source)
        if np.any(t_s <= 0) or np.any(np.diff(t_s) < 0):
            raise SpecError("profile prefill_s must be > 0 and non-decreasing in tokens", source=self.source)
        if self.kv_bytes is not None:
            kv = np.asarray(self.kv_bytes, float)
            if kv.shape != tok.shape or np.any(kv <= 0) or np.any(np.diff(kv) < 0):
                raise SpecError("profile kv_bytes must be > 0 and non-decreasing in tokens", source=self.source)
        object.__setattr__(self, "_pchip", Pchip(tok, t_s))  # SciPy's PchipInterpolator's doubles (numerics.pchip)

    @property
    def max_tokens(self) -> float:
        return float(self.tokens[-1])

    def check_covers(self, upper_tokens: float, what: str) -> None:
        """Reject a length law reaching beyond the profile's last point (no data there)."""
        if upper_tokens > self.max_tokens * (1.0 + 1e-9):
            raise SpecError(
                f"{what} reaches {upper_tokens:,.0f} tokens but the profile ends at {self.max_tokens:,.0f}; "
                "add a row at or above the longest prompt",
                source=self.source,
            )

    def prefill_time_s(self, tokens: FloatArray) -> FloatArray:
        l_tok = np.clip(np.asarray(tokens, float), self.tokens[0], self.tokens[-1])
        return self._pchip(l_tok)

    def kv_bytes_of(self, tokens: FloatArray) -> FloatArray:
        if self.kv_bytes is None:
            raise SpecError("this profile has no kv_bytes column; give the model's KV instead", source=self.source)
        return np.asarray(np.interp(np.asarray(tokens, float), self.tokens, self.kv_bytes), dtype=np.float64)

    def curves(self, kv_bytes: Curve | None = None) -> Curves:
        """Both curves; ``kv_bytes`` (from the model's KV shape) replaces or supplies the KV column."""
        kv = kv_bytes if kv_bytes is not None else self.kv_bytes_of
        return Curves(prefill_s=self.prefill_time_s, kv_bytes=kv, source=f"profile {self.source}")
