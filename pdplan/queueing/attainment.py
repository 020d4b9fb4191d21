"""SLO attainment and goodput from the queueing distributions (docs/queueing.md §1.2, §5.2).

* TTFT attainment: ``P(TTFT ≤ a) = Σ_l p_l F_W(a − g_l)`` — one matrix-vector product on the
  histogram, valid because under FCFS with Poisson arrivals a request's wait is independent of its
  own service (§1.2). ``g_l`` collects everything deterministic given the class (prefill service,
  KV transfer, decode step boundary; §1.5).
* Joint attainment (disaggregated): TTFT and TPOT are produced on different instances and are taken
  conditionally independent given the request class, ``A = Σ_{l,n} p(l,n) P_TTFT(l) P_TPOT(l,n)``
  (§5.2). For the colocated baseline the product is an approximation (same instance).
* Goodput: the largest rate whose attainment meets the target, by brentq on the monotone
  attainment curve A(λ) (non-increasing in λ, §5.2).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from pdplan.numerics.roots import brentq
from pdplan.queueing.distributions import WaitDistribution, check_pmf
from pdplan.types import FloatArray


def ttft_attainment(wait: WaitDistribution, offsets_s: ArrayLike, prob: ArrayLike, slo_s: float) -> FloatArray:
    """``Σ_l p_l F_W(slo − g_l)`` per rate (shape ``[R]``); offsets shape ``[L]`` or ``[R, L]``."""
    _, p = check_pmf(np.zeros(np.size(prob)), prob, "prob")
    off = np.broadcast_to(np.asarray(offsets_s, dtype=np.float64), (wait.h_s.size, p.size))
    return np.asarray(wait.cdf_rowwise(slo_s - off) @ p, dtype=np.float64)


def joint_attainment(ttft_ok: ArrayLike, tpot_ok: ArrayLike, prob: ArrayLike) -> FloatArray:
    """``Σ_i p_i P_TTFT,i P_TPOT,i`` from per-bin SLO probabilities ``[R, M]``; returns ``[R]``."""
    a = np.asarray(ttft_ok, dtype=np.float64)
    b = np.asarray(tpot_ok, dtype=np.float64)
    p = np.asarray(prob, dtype=np.float64)
    if a.shape[-1] != p.size or b.shape[-1] != p.size:
        raise ValueError("per-bin attainment arrays must have one column per workload bin")
    if np.any((a < 0) | (a > 1)) or np.any((b < 0) | (b > 1)):
        raise ValueError("per-bin attainment values must lie in [0, 1]")
    return np.asarray((a * b) @ p, dtype=np.float64)


def goodput_rate(
    attainment_fn: Callable[[float], float],
    target: float,
    rate_max: float,
    *,
    rate_min_fraction: float = 1e-6,
) -> float:
    """Largest Poisson rate λ ≤ rate_max with ``attainment_fn(λ) ≥ target`` (brentq).

    ``attainment_fn`` must be non-increasing in λ. Conventions (documented, not silent):
    returns ``rate_max`` if the attainment at ``rate_max·(1 − 1e−6)`` (just below the stability
    limit) still meets the target; returns 0.0 if it fails even at the tiny rate
    ``rate_min_fraction·rate_max`` (the SLO is unreachable at any load — e.g. the service time alone
    exceeds it). ValueError for a target outside (0, 1] or a non-positive ``rate_max``.
    """
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target attainment must lie in (0, 1], got {target}")
    if not (np.isfinite(rate_max) and rate_max > 0):
        raise ValueError(f"rate_max must be finite and > 0, got {rate_max}")
    hi = rate_max * (1.0 - 1e-6)
    lo = rate_max * rate_min_fraction
    if attainment_fn(hi) >= target:
        return float(rate_max)
    if attainment_fn(lo) < target:
        return 0.0
    return float(brentq(lambda lam: attainment_fn(lam) - target, lo, hi, xtol=1e-9 * rate_max))
