"""PrfaaS capacity model, lengths and profiles: hand-worked numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.profiles import load_profile, resolve_profile
from pdplan.serving.prfaas.capacity import (
    DECODE,
    LINK,
    REMOTE,
    CapacityInputs,
    DecodePool,
    PrefillPool,
    capacity_at,
    homogeneous,
    naive_heterogeneous,
    search_threshold,
)
from pdplan.serving.prfaas.lengths import PointsLaw, QuantileLaw
from pdplan.serving.prfaas.profile import Curves, MeasuredProfile
from pdplan.specs.length_laws import LognormalDist


def _two_point(link_bytes_per_s: float = 3e6, decode_instances: int = 1) -> CapacityInputs:
    """Prompts of 1000 or 3000 tokens (½ each); remote T = l/1000 s, local T = 2l/1000 s, S = 1000·l bytes."""
    law = PointsLaw(np.array([1000.0, 3000.0]), np.array([0.5, 0.5]))
    kv = lambda x: 1000.0 * x  # noqa: E731
    remote = Curves(prefill_s=lambda x: x / 1000.0, kv_bytes=kv, source="hand")
    local = Curves(prefill_s=lambda x: 2.0 * x / 1000.0, kv_bytes=kv, source="hand")
    return CapacityInputs(
        law=law,
        mean_output_tokens=100.0,
        remote=PrefillPool(remote, 1),
        local=PrefillPool(local, 1),
        decode=DecodePool(1000.0, decode_instances, source="hand"),
        link_bytes_per_s=link_bytes_per_s,
    )


def test_hand_worked_split() -> None:
    # t in [1000, 3000): p = ½; remote 1/(½·3 s) = 2/3, local 1/(½·2 s) = 1, link 3e6/(½·3e6) = 2, decode 10.
    cap = capacity_at(_two_point(), 2000.0)
    assert cap.offload_fraction == 0.5
    assert cap.lambda_max_rps == pytest.approx(2 / 3)
    assert cap.binding == REMOTE
    assert cap.theta_remote_rps == pytest.approx(1 / 3)  # Θ_prfaas = (2/3)·p
    assert cap.theta_local_prefill_rps == pytest.approx(0.5)
    assert cap.egress_bytes_per_s == pytest.approx(2 / 3 * 1.5e6)
    assert cap.link_utilization == pytest.approx(1 / 3)
    assert (cap.long_mean_tokens, cap.short_mean_tokens) == (3000.0, 1000.0)


def test_ends_and_search() -> None:
    inp = _two_point()
    assert homogeneous(inp).lambda_max_rps == pytest.approx(1 / (0.5 * 2 + 0.5 * 6))  # 0.25
    assert naive_heterogeneous(inp).lambda_max_rps == pytest.approx(1 / (0.5 + 1.5))  # 0.5
    best = search_threshold(inp)
    assert best.lambda_max_rps == pytest.approx(2 / 3)
    assert 1000.0 <= best.threshold_tokens < 3000.0


def test_link_and_decode_bind() -> None:
    slow = capacity_at(_two_point(link_bytes_per_s=0.5e6), 2000.0)  # 0.5e6 / 1.5e6 = 1/3 req/s
    assert (slow.binding, slow.lambda_max_rps) == (LINK, pytest.approx(1 / 3))
    assert slow.link_utilization == pytest.approx(1.0)
    starved = capacity_at(_two_point(decode_instances=1), 2000.0)
    assert starved.theta_decode_rps == pytest.approx(10.0)
    tiny = capacity_at(
        CapacityInputs(**{**_two_point().__dict__, "decode": DecodePool(10.0, 1, source="hand")}), 2000.0
    )
    assert (tiny.binding, tiny.lambda_max_rps) == (DECODE, pytest.approx(0.1))


def test_quantile_law_matches_closed_form_partial_mean() -> None:
    dist = LognormalDist(dist="lognormal", mu=9.90, sigma=1.00, min=128, max=131072)
    law = QuantileLaw(dist)
    t = 19_400.0
    closed = float(dist.partial_mean(np.array([dist.upper]))[0] - dist.partial_mean(np.array([t]))[0])
    assert law.tail(lambda x: x, t) == pytest.approx(closed, rel=1e-6)
    assert law.tail_mass(t) == pytest.approx(1 - float(dist.cdf(np.array([t]))[0]))
    assert law.head(lambda x: np.ones_like(x), t) + law.tail_mass(t) == pytest.approx(1.0)


def test_profile_interpolates_holds_and_rejects() -> None:
    prof = MeasuredProfile(np.array([1024.0, 8192.0]), np.array([0.4, 0.7]), np.array([1e8, 3e8]), source="x.csv")
    assert prof.prefill_time_s(np.array([1024.0, 8192.0, 100.0])).tolist() == pytest.approx([0.4, 0.7, 0.4])
    assert prof.kv_bytes_of(np.array([4608.0]))[0] == pytest.approx(2e8)
    with pytest.raises(SpecError, match="profile ends at 8,192"):
        prof.check_covers(131072, "the workload")
    with pytest.raises(SpecError, match="strictly increasing"):
        MeasuredProfile(np.array([8.0, 4.0]), np.array([0.1, 0.2]))
    with pytest.raises(SpecError, match="non-decreasing"):
        MeasuredProfile(np.array([4.0, 8.0]), np.array([0.3, 0.2]))


def test_profile_files(tmp_path: Path) -> None:
    table = load_profile(resolve_profile("prfaas-1t-hybrid-h200"))
    assert table.tokens.tolist() == [1024, 8192, 32768, 131072]
    phi_gbps = table.kv_bytes * 8 / table.prefill_s / 1e9  # Table 5: 3.61 / 3.59 / 3.19 / 2.62
    assert phi_gbps.tolist() == pytest.approx([3.61, 3.59, 3.19, 2.62], rel=0.011)
    bad = tmp_path / "bad.csv"
    bad.write_text("tokens,seconds\n1,2\n3,4\n")
    with pytest.raises(SpecError, match="expected tokens,prefill_s"):
        load_profile(bad)
    bad.write_text("tokens,prefill_s\n1,2\n3,-4\n")
    with pytest.raises(SpecError, match="row 3: prefill_s"):
        load_profile(bad)
    with pytest.raises(SpecError, match="unknown prefill profile"):
        resolve_profile("no-such-profile")


def test_parse_lengths() -> None:
    from pdplan.serving.prfaas.sweep import parse_lengths

    assert parse_lengths("1K, 8k,32K,128K,500") == [1024, 8192, 32768, 131072, 500]
    with pytest.raises(SpecError, match="token count"):
        parse_lengths("1K,lots")
    with pytest.raises(SpecError, match="whole number"):
        parse_lengths("0.5K,0")
