"""The PrfaaS throughput model (arXiv 2604.15039 §3.4, Eqs. 3–8): capacity only, no queueing.

Requests with uncached prompt length ``L > t`` go to the remote PrfaaS cluster (``N_r`` prefill instances),
the rest to the local PD cluster's ``N_p`` prefill instances; ``N_d`` local decode instances serve all.
With ``p = P(L > t)`` and the partial expectations of :mod:`.lengths`:

* Eq. 3, ``Θ_prfaas = min(N_r / E[T_r(L) | L>t], B_out / E[S(L) | L>t])``: remote compute and egress
  overlap (layer-wise pipelining), so the slower one binds. The paper writes ``T(l_long)``,
  ``S(l_long)`` with ``l_long = E[L | L>t]``; we use ``E[T(L) | L>t]``, the exact capacity of ``N``
  servers with i.i.d. service times (renewal–reward: a busy server completes ``1/E[T]`` per second).
  ``S`` is affine in ``l`` for KV + state models, where the two forms agree; for ``T`` the reference note
  (docs/mission_features.md §1.5) shows the paper's 1.61 and 2.45 req/s are reproduced only by the average.
* Eq. 4, ``Θ_pd-p = N_p / E[T_l(L) | L≤t]`` (intra-cluster RDMA assumed never binding, as in the paper).
* Eq. 5, ``Θ_pd-d = N_d · C_d / E[L_out]`` with ``C_d = BS_max / T_decode`` the decode tokens/s one
  instance sustains at the SLO (a measured or roofline input).
* Eq. 6, ``Λ_max = min(Θ_prfaas / p, Θ_pd-p / (1−p), Θ_pd-d)``. ``Θ_prfaas / p = min(N_r / E[T_r; L>t],
  B_out / E[S; L>t])`` is increasing in ``t`` and ``Θ_pd-p / (1−p) = N_p / E[T_l; L≤t]`` decreasing, so
  their minimum is unimodal in ``t``: a bounded scalar search (Brent, :func:`search_threshold`) finds the
  Eq. 7 balance ``Θ_prfaas / p = Θ_pd-p / (1−p)``. Decode does not depend on ``t``; it caps the result.
* Eq. 8 (ratio): :func:`search_split` tries every ``N_p + N_d = N`` split, each with its searched threshold.

Baselines: homogeneous PD (``t`` above every prompt, ``p = 0``) and naive heterogeneous PD (every prompt
prefilled remotely, ``p = 1``, no local prefill).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pdplan.errors import SpecError
from pdplan.numerics.bounded_min import minimize_bounded
from pdplan.serving.prfaas.lengths import SplitLaw
from pdplan.serving.prfaas.profile import Curves
from pdplan.types import FloatArray

THRESHOLD_XATOL_TOKENS = 1.0
"""Bounded-search tolerance on the threshold: one token (lengths are whole tokens)."""
REMOTE, LINK, LOCAL, DECODE = "remote prefill", "cross-DC link", "local prefill", "decode"


@dataclass(frozen=True)
class PrefillPool:
    curves: Curves
    instances: int


@dataclass(frozen=True)
class DecodePool:
    tokens_per_s_per_instance: float
    instances: int
    source: str


@dataclass(frozen=True)
class CapacityInputs:
    """Everything the throughput model reads. ``link_bytes_per_s`` is the usable cross-DC egress ``B_out``."""

    law: SplitLaw
    mean_output_tokens: float
    remote: PrefillPool
    local: PrefillPool
    decode: DecodePool
    link_bytes_per_s: float

    def __post_init__(self) -> None:
        if self.mean_output_tokens <= 0 or self.link_bytes_per_s <= 0:
            raise SpecError("prfaas capacity: mean output tokens and link bandwidth must be > 0")
        if min(self.remote.instances, self.local.instances, self.decode.instances) < 0:
            raise SpecError("prfaas capacity: instance counts must be >= 0")

    def sources(self) -> dict[str, str]:
        """Where each input number came from (printed by every report)."""
        return {
            REMOTE: self.remote.curves.source,
            LOCAL: self.local.curves.source,
            DECODE: self.decode.source,
        }


@dataclass(frozen=True)
class SplitCapacity:
    """Capacity at one threshold. Rates in req/s; ``egress_bytes_per_s`` at ``lambda_max_rps``."""

    threshold_tokens: float
    offload_fraction: float
    long_mean_tokens: float
    short_mean_tokens: float
    theta_remote_rps: float
    theta_remote_compute_rps: float
    theta_link_rps: float
    theta_local_prefill_rps: float
    theta_decode_rps: float
    lambda_max_rps: float
    binding: str
    egress_bytes_per_s: float
    link_utilization: float
    local_prefill_instances: int
    decode_instances: int
    remote_instances: int


def _rate(instances: float, partial_expectation: float) -> float:
    """``instances / E[x; region]``: infinite when the region is empty."""
    return math.inf if partial_expectation <= 0.0 else instances / partial_expectation


def _tokens(x: FloatArray) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def _prefill_bounds(inp: CapacityInputs, t: float) -> tuple[float, float, float]:
    """``(N_r / E[T_r; L>t], B_out / E[S; L>t], N_p / E[T_l; L≤t])``: per-aggregate-rate bounds of Eq. 6."""
    law = inp.law
    remote_s = law.tail(inp.remote.curves.prefill_s, t)
    bytes_tail = law.tail(inp.remote.curves.kv_bytes, t)
    local_s = law.head(inp.local.curves.prefill_s, t)
    return (
        _rate(inp.remote.instances, remote_s),
        _rate(inp.link_bytes_per_s, bytes_tail),
        _rate(inp.local.instances, local_s),
    )


def capacity_at(inp: CapacityInputs, threshold_tokens: float) -> SplitCapacity:
    """Eqs. 3–6 at threshold ``t`` (prompts with ``L > t`` are offloaded)."""
    law, t = inp.law, float(threshold_tokens)
    p = law.tail_mass(t)
    remote_cap, link_cap, local_cap = _prefill_bounds(inp, t)
    decode_rps = inp.decode.instances * inp.decode.tokens_per_s_per_instance / inp.mean_output_tokens
    bounds = {REMOTE: remote_cap, LINK: link_cap, LOCAL: local_cap, DECODE: decode_rps}
    binding = min(bounds, key=lambda k: bounds[k])
    lam = bounds[binding]
    if not math.isfinite(lam) or lam <= 0.0:
        raise SpecError(f"prfaas capacity is {lam} req/s at threshold {t:,.0f}: a pool serving requests is empty")
    long_sum, all_sum = law.tail(_tokens, t), law.tail(_tokens, law.lower - 1.0)
    egress = lam * law.tail(inp.remote.curves.kv_bytes, t)
    return SplitCapacity(
        threshold_tokens=t,
        offload_fraction=p,
        long_mean_tokens=long_sum / p if p > 0 else math.nan,
        short_mean_tokens=(all_sum - long_sum) / (1 - p) if p < 1 else math.nan,
        theta_remote_rps=min(remote_cap, link_cap) * p,
        theta_remote_compute_rps=remote_cap * p,
        theta_link_rps=link_cap * p,
        theta_local_prefill_rps=local_cap * (1 - p),
        theta_decode_rps=decode_rps,
        lambda_max_rps=lam,
        binding=binding,
        egress_bytes_per_s=egress,
        link_utilization=egress / inp.link_bytes_per_s,
        local_prefill_instances=inp.local.instances,
        decode_instances=inp.decode.instances,
        remote_instances=inp.remote.instances,
    )


def _prefill_bound(inp: CapacityInputs, t: float) -> float:
    return min(_prefill_bounds(inp, t))


def search_threshold(
    inp: CapacityInputs, lo_tokens: float | None = None, hi_tokens: float | None = None
) -> SplitCapacity:
    """The Eq. 7 threshold: maximise the prefill-side bound over ``t`` in ``[lo, hi]`` (default: the law's range).

    The bound is unimodal in ``t`` (see the module docstring), so a bounded Brent search (SciPy's
    ``method="bounded"``, :mod:`pdplan.numerics.bounded_min`) finds its maximum; both ends (offload everything,
    offload nothing) are compared too, so an optimum on the boundary is kept exactly.
    """
    lo = inp.law.lower - 1.0 if lo_tokens is None else float(lo_tokens)
    hi = inp.law.upper if hi_tokens is None else float(hi_tokens)
    if inp.remote.instances == 0 or hi <= lo:
        return capacity_at(inp, hi)
    if inp.local.instances == 0:
        return capacity_at(inp, lo)
    res = minimize_bounded(lambda t: -_prefill_bound(inp, t), lo, hi, xatol=THRESHOLD_XATOL_TOKENS)
    candidates = (res.x, lo, hi)
    best = max(candidates, key=lambda t: _prefill_bound(inp, t))
    return capacity_at(inp, best)


def homogeneous(inp: CapacityInputs) -> SplitCapacity:
    """Homogeneous PD on the local cluster: nothing offloaded (threshold at the longest prompt)."""
    return capacity_at(replace(inp, remote=replace(inp.remote, instances=0)), inp.law.upper)


def naive_heterogeneous(inp: CapacityInputs) -> SplitCapacity:
    """Naive heterogeneous PD: every prompt prefilled remotely, the local cluster only decodes."""
    return capacity_at(replace(inp, local=replace(inp.local, instances=0)), inp.law.lower - 1.0)


def search_split(inp: CapacityInputs, local_instances: int) -> SplitCapacity:
    """Eq. 8: the best ``N_p + N_d = local_instances`` split, each with its searched threshold (Eq. 7)."""
    if local_instances < 2:
        raise SpecError(f"prfaas: {local_instances} local instance(s); a PD split needs >= 2 (one prefill, one decode)")
    splits = (
        replace(
            inp, local=replace(inp.local, instances=n_p), decode=replace(inp.decode, instances=local_instances - n_p)
        )
        for n_p in range(1, local_instances)
    )
    return max((search_threshold(trial) for trial in splits), key=lambda cap: cap.lambda_max_rps)
