"""Closed-form decode capacity for a linear step time (the fast path of :func:`pdplan.queueing.linear_capacity`).

The search screens thousands of decode instance types; with ``τ(B, K) = t0 + t1·B + t2·K`` the utilisation bound is
linear in λ and the KV-occupancy and seat bounds are monotone scalar equations, solved by brentq (docs/queueing.md
§2.3–§2.4)
with the same margin ``z = Z99`` as the general bound. :func:`riding_capacity` solves the same KV and seat bounds for
an instance whose decode steps also carry prefill (colocated, docs/queueing.md §3), with the feedback factor of
:func:`riding_feedback`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pdplan.numerics.roots import brentq
from pdplan.queueing.decode import (
    DecodeCapacity,
    DecodeWorkload,
    LinearStepTime,
    decode_fixed_point,
    feedback_factor,
    kv_footprint,
)
from pdplan.types import Z99


def _feedback(rate: float, wl: DecodeWorkload, step: LinearStepTime) -> float:
    """Load-feedback variance factor F of docs/queueing.md §2.4 at one per-instance rate."""
    return float(feedback_factor(decode_fixed_point([rate], wl, step), wl)[0])


def riding_feedback(rate: float, prefill_utilisation: float, wl: DecodeWorkload, step: LinearStepTime) -> float:
    """F of docs/queueing.md §2.4 for decodes whose steps also carry prefill (a colocated instance, §3).

    Derivation: prefill takes a share u_p of every step, ``τ = t0 + t1·B + t2·K + u_p·τ``, so a step with decode load
    X lasts ``(t0 + X)/(1 − u_p)`` and admits Poisson(λ·τ) sequences: a load excess δX admits ``λ·δX/(1 − u_p)``
    more, the §2.4 loop gain ``λ·G(f)`` becomes ``λ·G(f)/(1 − u_p)`` (at f = 0, ``u_d/(1 − u_p)``, below 1 while
    u_d + u_p < 1). F = Σ_f R/|1 − λ'G|² / Σ_f R does not depend on the source strength λτ̄, so it is the F of a
    decode-only instance at rate ``λ' = λ/(1 − u_p)`` with the same (t1, t2). ``prefill_utilisation`` 0: the
    decode-only F."""
    if not 0.0 <= prefill_utilisation < 1.0:
        raise ValueError(f"prefill utilisation must be in [0, 1), got {prefill_utilisation}")
    return _feedback(rate / (1.0 - prefill_utilisation), wl, step)


def _bound_rates(
    wl: DecodeWorkload,
    step: LinearStepTime,
    lam_u: float,
    kv_cap: float,
    seats: float,
    factor: Callable[[float], float],
    held: tuple[float, float],
    riding_per: Callable[[float], float] | float = 0.0,
) -> tuple[float, float]:
    """Rates at which ``K̄ + z·sd K = M_kv`` and ``N + z·sqrt(N F) = seats`` (inf if > lam_u), F = ``factor(λ)``; K
    counts the KV footprint ``held`` = (E[token·steps held], E[Σ over the steps of the tokens held²]) (§2.3,
    :func:`pdplan.queueing.decode.kv_footprint`, :func:`pdplan.queueing.kv_admission.kv_held`). ``riding_per``:
    seconds of prefill per request riding the decode steps (colocated, u_p = λ·riding_per, τ̄ = t0/(1 − u_d − u_p)),
    a number or p(λ) (the prompt tokens priced at the step's width, :mod:`pdplan.queueing.chunk_width`)."""
    per = step.per_request_s(wl)
    work, square_sum = held
    riding = riding_per if callable(riding_per) else (lambda _lam: float(riding_per))

    def lt(lam: float) -> float:  # λ·τ̄(λ), τ̄ = t0/(1 − u)
        return lam * step.t0_s / (1.0 - lam * (per + riding(lam)))

    def kv(lam: float) -> float:
        x = lt(lam)
        return x * work + Z99 * math.sqrt(x * square_sum * factor(lam)) - kv_cap

    def seq(lam: float) -> float:
        n = lt(lam) * wl.mean_steps
        return n + Z99 * math.sqrt(n * factor(lam)) - seats

    out = []
    for fn in (kv, seq):
        top = fn(lam_u)  # handed to brentq as its f(b): the same iterates, one evaluation (and F) fewer
        out.append(math.inf if top <= 0.0 else float(brentq(fn, 0.0, lam_u, xtol=1e-12, rtol=1e-9, f_b=top)))
    return out[0], out[1]


def riding_capacity(
    wl: DecodeWorkload,
    step: LinearStepTime,
    *,
    prefill_s_per_request: Callable[[float], float] | float,
    rate_max: float,
    kv_capacity_tokens: float,
    max_num_seqs: float,
    held: tuple[float, float],
) -> tuple[float, float]:
    """Per-instance KV and seat rates (inf where they do not bind below ``rate_max``) of an instance whose decode
    steps carry prefill (colocated, docs/queueing.md §3): the §2.3 P99 bounds at τ̄ = t0/(1 − u_d − u_p),
    u_p = λ·``prefill_s_per_request`` (a number, or p(λ) where the riding prefill's price moves with the rate: the
    prompt tokens priced at the step's width, :mod:`pdplan.queueing.chunk_width`), with the load-feedback factor of
    :func:`riding_feedback` evaluated at each trial rate (F moves more with load here than on a decode instance,
    2.8–3.6 against 1.8–2.0 near the OPT-13B colocated knee, docs/accuracy.md §6, so it is not held fixed as in
    :func:`fast_decode_capacity`; one §2.4 inverse FFT per trial). ``held``: (E[token·steps held], E[Σ tokens
    held²]) of the footprint the engine admits on (:func:`pdplan.queueing.kv_admission.kv_held`). F and p are kept per
    trial rate for this call: the KV and seat searches both start at ``rate_max`` and often cross the same rates (a
    value-keyed memo that ends with the call, the same doubles as solving again)."""
    seen: dict[float, float] = {}
    prices: dict[float, float] = {}
    given = prefill_s_per_request

    def riding(lam: float) -> float:
        if lam not in prices:
            prices[lam] = given(lam) if callable(given) else float(given)
        return prices[lam]

    def factor(lam: float) -> float:
        if lam not in seen:
            seen[lam] = riding_feedback(lam, lam * riding(lam), wl, step)
        return seen[lam]

    return _bound_rates(wl, step, rate_max, kv_capacity_tokens, max_num_seqs, factor, held, riding)


def fast_decode_capacity(
    wl: DecodeWorkload,
    step: LinearStepTime,
    *,
    kv_capacity_tokens: float,
    max_num_seqs: float,
    utilisation_max: float,
    state_tokens_per_seq: float = 0.0,
    reserved_tokens_per_seq: float = 0.0,
) -> DecodeCapacity:
    """Same bounds as :func:`pdplan.queueing.linear_capacity` for a linear τ, with closed forms.

    ``u(λ) = λ(t1 E[n] + t2 E[work])`` is linear, so λ_u = u_max/(t1 E[n] + t2 E[work]) exactly;
    the KV and seat bounds are monotone scalar equations in λ solved by brentq with the feedback
    factor F held fixed, F first taken at λ_u (F grows with load, so this is conservative) and then
    re-evaluated once at the solution (two §2.4 FFTs instead of one per brentq step; F changes
    slowly, the refinement moves the rate by well under 1 % in our examples). ``state_tokens_per_seq``: KV slots of
    fixed state per sequence, counted in the KV bound only (:func:`pdplan.queueing.decode.kv_footprint`).
    ``reserved_tokens_per_seq``: R, tokens the engine's admission counts per request beyond what it holds (SGLang's
    PD decode server, :func:`pdplan.queueing.kv_admission.decode_server_footprint`): the KV bound counts the context
    shifted by s + R, and a request fits only if its final footprint and its prompt plus R each fit the pool.
    """
    per = step.per_request_s(wl)
    lam_u = utilisation_max / per
    held = kv_footprint(wl, state_tokens_per_seq)
    if (
        float(held.peak_tokens.max()) > kv_capacity_tokens
        or _prompt_plus_reserve_tokens(held, reserved_tokens_per_seq) > kv_capacity_tokens
    ):
        return DecodeCapacity(0.0, lam_u, 0.0, math.inf, "kv")
    counted = kv_footprint(wl, state_tokens_per_seq + reserved_tokens_per_seq) if reserved_tokens_per_seq else held
    sums = (counted.mean_work, counted.context_square_sum)
    factor = _feedback(lam_u, wl, step)
    kv, seq = _bound_rates(wl, step, lam_u, kv_capacity_tokens, max_num_seqs, lambda _: factor, sums)
    if min(kv, seq) < lam_u:
        factor = _feedback(min(kv, seq), wl, step)
        kv, seq = _bound_rates(wl, step, lam_u, kv_capacity_tokens, max_num_seqs, lambda _: factor, sums)
    bounds = {"utilisation": lam_u, "kv": kv, "seqs": seq}
    binding = min(bounds, key=lambda k: bounds[k])
    return DecodeCapacity(bounds[binding], lam_u, kv, seq, binding)


def _prompt_plus_reserve_tokens(held: DecodeWorkload, reserved_tokens: float) -> float:
    """The largest KV an admission of prompt + R asks for (``held``: the workload with its fixed state, so its input
    is L + s, windowed min(L, w) + s); 0 when R = 0 (the final footprint, checked beside it, is the larger)."""
    if reserved_tokens == 0.0:
        return 0.0
    top = held.input_tokens if held.window_tokens is None else np.minimum(held.input_tokens, held.window_tokens)
    return float(np.max(top)) + reserved_tokens
