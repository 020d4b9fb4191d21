"""The PrfaaS capacity model (pdplan.serving.prfaas.capacity), hand-worked: the split at a threshold, the homogeneous
and naive ends, the threshold search, and the link or the decode pool binding."""

from __future__ import annotations

import numpy as np
import pytest

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
from pdplan.serving.prfaas.lengths import PointsLaw
from pdplan.serving.prfaas.profile import Curves


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
