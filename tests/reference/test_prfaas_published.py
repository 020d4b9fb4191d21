"""PrfaaS throughput model (Eqs. 3–8) against the paper's case study.

Source: Qin et al., "Prefill-as-a-Service", arXiv 2604.15039, §4 and Table 6 (PrfaaS-PD 4/3/5 at t = 19.4K:
Λ_max 3.24; homogeneous PD 9/3: 2.11; naive heterogeneous 4/—/8: 2.45 req/s; 49.6 % offloaded,
E[L | L>t] ≈ 44K, egress ≈ 13 Gb/s of a 100 Gb/s VPC), as recorded in docs/mission_features.md §1.3–§1.5.

Inputs: the measured H200 profile (Table 5, ``prfaas-1t-hybrid-h200``), the length law (truncated lognormal
μ = 9.90, σ = 1.00 on [128, 128K]) and the H20 side from the paper's own H20 throughputs: decode
Θ_pd-d / N_d = 3.91/5 = 2.35/3 = 6.25/8 = 0.782 req/s at 1024 output tokens (801 tok/s per instance), and
the derived H20 prefill curve ``prfaas-1t-hybrid-h20-derived`` (fitted to Θ_pd-p = 1.64 at N_p = 3, t = 19.4K
and 2.11 at N_p = 9, p = 0; the first test re-checks that derivation). The threshold, the offloaded share,
the long-prompt mean, Θ_prfaas and the naive baseline come from the H200 profile and the law alone.
Tolerances: ± 5 % (rates, threshold), ± 15 % egress (the paper does not say how its 13 Gb/s was computed;
Θ_prfaas · S_kv(l_long) gives 12.1).
"""

from __future__ import annotations

import math

import pytest

from pdplan.io.profiles import load_profile, resolve_profile
from pdplan.serving.prfaas.capacity import (
    LOCAL,
    REMOTE,
    CapacityInputs,
    DecodePool,
    PrefillPool,
    homogeneous,
    naive_heterogeneous,
    search_split,
    search_threshold,
)
from pdplan.serving.prfaas.lengths import QuantileLaw
from pdplan.serving.prfaas.profile import MeasuredProfile
from pdplan.specs.length_laws import LognormalDist

DECODE_TOKENS_PER_S = 0.782 * 1024  # Θ_pd-d / N_d of Table 6 times L_out (docs/mission_features.md §1.5, D)
LINK_BYTES_PER_S = 100e9 / 8  # "about 100 Gbps aggregate cross-cluster bandwidth"


def _profile(name: str) -> MeasuredProfile:
    t = load_profile(resolve_profile(name))
    return MeasuredProfile(t.tokens, t.prefill_s, t.kv_bytes, source=t.source)


def _inputs(n_remote: int, n_p: int, n_d: int) -> CapacityInputs:
    law = QuantileLaw(LognormalDist(dist="lognormal", mu=9.90, sigma=1.00, min=128, max=131072))
    h200, h20 = _profile("prfaas-1t-hybrid-h200"), _profile("prfaas-1t-hybrid-h20-derived")
    return CapacityInputs(
        law=law,
        mean_output_tokens=1024.0,
        remote=PrefillPool(h200.curves(), n_remote),
        local=PrefillPool(h20.curves(kv_bytes=h200.kv_bytes_of), n_p),
        decode=DecodePool(DECODE_TOKENS_PER_S, n_d, source="Table 6 (derived 801 tok/s per 8xH20)"),
        link_bytes_per_s=LINK_BYTES_PER_S,
    )


def test_derived_h20_curve_reproduces_the_published_h20_throughputs() -> None:
    inp = _inputs(4, 3, 5)
    law, t20 = inp.law, inp.local.curves.prefill_s
    short = law.head(t20, 19_400.0) / (1 - law.tail_mass(19_400.0))
    assert 3 / short == pytest.approx(1.64, rel=0.01)
    assert 9 / law.head(t20, law.upper) == pytest.approx(2.11, rel=0.01)


def test_prfaas_pd_threshold_and_capacity() -> None:
    cap = search_threshold(_inputs(4, 3, 5))
    assert cap.threshold_tokens == pytest.approx(19_400, rel=0.05)
    assert cap.offload_fraction == pytest.approx(0.496, abs=0.01)
    assert 44_000 <= cap.long_mean_tokens <= 45_500
    assert cap.theta_remote_rps == pytest.approx(1.61, rel=0.05)
    assert cap.theta_local_prefill_rps == pytest.approx(1.64, rel=0.05)
    assert cap.theta_decode_rps == pytest.approx(3.91, rel=0.01)
    assert cap.lambda_max_rps == pytest.approx(3.24, rel=0.05)
    assert cap.binding in (REMOTE, LOCAL)  # "compute-bound with ample bandwidth headroom"
    assert cap.egress_bytes_per_s * 8 / 1e9 == pytest.approx(13.0, rel=0.15)
    assert cap.link_utilization == pytest.approx(0.13, abs=0.02)


def test_baselines() -> None:
    homo = homogeneous(_inputs(0, 9, 3))
    assert homo.lambda_max_rps == pytest.approx(2.11, rel=0.05)
    assert homo.offload_fraction == 0.0
    assert homo.egress_bytes_per_s == 0.0
    naive = naive_heterogeneous(_inputs(4, 0, 8))
    assert naive.lambda_max_rps == pytest.approx(2.45, rel=0.05)
    assert naive.offload_fraction == 1.0
    assert naive.binding == REMOTE
    assert math.isnan(naive.short_mean_tokens)


def test_ratio_search_picks_the_papers_split() -> None:
    """Eq. 8 with N_p + N_d = 8 local instances: the paper's 3/5 and Λ_max 3.24 (1.54× homogeneous)."""
    best = search_split(_inputs(4, 1, 1), local_instances=8)
    assert (best.local_prefill_instances, best.decode_instances) == (3, 5)
    assert best.lambda_max_rps / 2.11 == pytest.approx(1.54, rel=0.05)
