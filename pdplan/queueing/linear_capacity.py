"""Closed-form decode capacity for a linear step time (the fast path of :func:`pdplan.queueing.linear_capacity`).

The search screens thousands of decode instance types; with ``τ(B, K) = t0 + t1·B + t2·K`` the utilisation bound is
linear in λ and the KV-occupancy and seat bounds are monotone scalar equations, solved by brentq (docs/queueing.md
§2.3–§2.4)
with the same margin ``z = Z99`` as the general bound.
"""

from __future__ import annotations

import math

from pdplan.numerics.roots import brentq
from pdplan.queueing.decode import (
    DecodeCapacity,
    DecodeWorkload,
    LinearStepTime,
    decode_fixed_point,
    kv_footprint,
    load_noise,
)
from pdplan.types import Z99


def _feedback(rate: float, wl: DecodeWorkload, step: LinearStepTime) -> float:
    """Load-feedback variance factor F of docs/queueing.md §2.4 at one per-instance rate."""
    _, fac = load_noise(decode_fixed_point([rate], wl, step), wl)
    return float(fac[0])


def _bound_rates(
    wl: DecodeWorkload,
    step: LinearStepTime,
    lam_u: float,
    kv_cap: float,
    seats: float,
    factor: float,
    held: DecodeWorkload,
) -> tuple[float, float]:
    """Rates at which ``K̄ + z·sd K = M_kv`` and ``N + z·sqrt(N F) = seats`` (inf if > lam_u); K counts the KV
    footprint ``held`` (:func:`pdplan.queueing.decode.kv_footprint`)."""
    per = step.t1_s_per_seq * wl.mean_steps + step.t2_s_per_token * wl.mean_work

    def lt(lam: float) -> float:  # λ·τ̄(λ), τ̄ = t0/(1 − u)
        return lam * step.t0_s / (1.0 - lam * per)

    def kv(lam: float) -> float:
        x = lt(lam)
        return x * held.mean_work + Z99 * math.sqrt(x * held.context_square_sum * factor) - kv_cap

    def seq(lam: float) -> float:
        n = lt(lam) * wl.mean_steps
        return n + Z99 * math.sqrt(n * factor) - seats

    out = []
    for fn in (kv, seq):
        out.append(math.inf if fn(lam_u) <= 0.0 else float(brentq(fn, 0.0, lam_u, xtol=1e-12, rtol=1e-9)))
    return out[0], out[1]


def fast_decode_capacity(
    wl: DecodeWorkload,
    step: LinearStepTime,
    *,
    kv_capacity_tokens: float,
    max_num_seqs: float,
    utilisation_max: float,
    state_tokens_per_seq: float = 0.0,
) -> DecodeCapacity:
    """Same bounds as :func:`pdplan.queueing.linear_capacity` for a linear τ, with closed forms.

    ``u(λ) = λ(t1 E[n] + t2 E[work])`` is linear, so λ_u = u_max/(t1 E[n] + t2 E[work]) exactly;
    the KV and seat bounds are monotone scalar equations in λ solved by brentq with the feedback
    factor F held fixed, F first taken at λ_u (F grows with load, so this is conservative) and then
    re-evaluated once at the solution (two §2.4 FFTs instead of one per brentq step; F changes
    slowly, the refinement moves the rate by well under 1 % in our examples). ``state_tokens_per_seq``: KV slots of
    fixed state per sequence, counted in the KV bound only (:func:`pdplan.queueing.decode.kv_footprint`).
    """
    per = step.t1_s_per_seq * wl.mean_steps + step.t2_s_per_token * wl.mean_work
    lam_u = utilisation_max / per
    held = kv_footprint(wl, state_tokens_per_seq)
    if float(held.peak_tokens.max()) > kv_capacity_tokens:
        return DecodeCapacity(0.0, lam_u, 0.0, math.inf, "kv")
    factor = _feedback(lam_u, wl, step)
    kv, seq = _bound_rates(wl, step, lam_u, kv_capacity_tokens, max_num_seqs, factor, held)
    if min(kv, seq) < lam_u:
        factor = _feedback(min(kv, seq), wl, step)
        kv, seq = _bound_rates(wl, step, lam_u, kv_capacity_tokens, max_num_seqs, factor, held)
    bounds = {"utilisation": lam_u, "kv": kv, "seqs": seq}
    binding = min(bounds, key=lambda k: bounds[k])
    return DecodeCapacity(bounds[binding], lam_u, kv, seq, binding)
