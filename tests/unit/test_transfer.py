"""Hand-checked formulas of pdplan.transfer.kv (numbers worked out in the comments)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.transfer.fan_in import fan_in_link_queue, fan_in_load, link_queue, required_bandwidth_bytes_per_s
from pdplan.transfer.kv import kv_bytes_per_request, kv_transfer, pipeline_exposed_s, transfer_for_request
from pdplan.transfer.kv_inputs import (
    KvShape,
    TransferConfig,
    effective_bandwidth_bytes_per_s,
    kv_shape_from_model,
    replication_factor,
)


@dataclass(frozen=True)
class Link:
    line_rate_bytes_per_s: float = 25e9
    per_message_latency_s: float = 2e-6
    efficiency: float = 0.8


@dataclass(frozen=True)
class FakeModel:
    num_layers: int = 4
    num_kv_heads: int = 8
    attention_kind: str = "gqa"
    state: float = 0.0

    def kv_bytes_per_token(self, kv_dtype_bytes: float) -> float:
        return 2 * self.num_layers * self.num_kv_heads * 128 * kv_dtype_bytes

    def linear_state_bytes_per_sequence(self) -> float:
        return self.state


KV = KvShape(kv_bytes_per_token=1000.0, num_layers=4, num_kv_heads=8)


def simulate_pipeline(ready_s: list[float], send_s: list[float]) -> float:
    """FIFO link: unit i may start when ready and when unit i-1 is sent; returns last finish."""
    finish = 0.0
    for ready, send in zip(ready_s, send_s, strict=True):
        finish = max(finish, ready) + send
    return finish


def test_kv_bytes_opt66b_distserve() -> None:
    # 2 (K,V) · 64 layers · 9216 hidden · 2 B = 2,359,296 B/token; × 512 = 1,207,959,552 B.
    kv = KvShape(2 * 64 * 9216 * 2, 64, 72)
    assert kv_bytes_per_request(512, kv) == pytest.approx(1_207_959_552)


def test_kv_bytes_state_and_gqa_replication() -> None:
    kv = KvShape(1000.0, 4, 8, state_bytes_per_sequence=5e6)
    # tp_d = 16 > 8 heads: every head to 2 GPUs → 2·1000·10 + 5e6 (state not replicated).
    assert kv_bytes_per_request(10, kv, decode_tp=16) == pytest.approx(2e4 + 5e6)
    assert replication_factor(8, 4) == 1.0
    assert replication_factor(8, 3) == pytest.approx(3 * 3 / 8)  # padded heads
    assert replication_factor(1, 8) == 8.0  # MLA latent on every rank


def test_kv_shape_from_model_mla_counts_one_head() -> None:
    assert kv_shape_from_model(FakeModel(attention_kind="mla"), 2).num_kv_heads == 1
    shape = kv_shape_from_model(FakeModel(state=7.0), 2)
    assert (shape.num_kv_heads, shape.kv_bytes_per_token, shape.state_bytes_per_sequence) == (
        8,
        2 * 4 * 8 * 128 * 2,
        7.0,
    )


def test_effective_bandwidth_mooncake() -> None:
    # 4 × 200 Gb/s = 4 × 25e9 B/s at 0.87 → 87e9 B/s.
    assert effective_bandwidth_bytes_per_s(Link(efficiency=0.87), 4) == pytest.approx(87e9)


def test_request_granularity_hand_numbers() -> None:
    # tp 2/2, 2 lanes; 4 layers; per layer ⌈2/2⌉ = 1 message per lane → α·4 = 8 µs.
    # bytes 1000·1000 = 1e6 over 2·25e9·0.8 = 4e10 B/s → 25 µs. time = exposed = 33 µs.
    cfg = TransferConfig(prefill_tp=2, decode_tp=2)
    res = kv_transfer([1000], KV, Link(), cfg)
    assert res.time_s[0] == pytest.approx(33e-6)
    assert res.exposed_s[0] == pytest.approx(33e-6)
    assert res.messages[0] == 4 * 2
    assert res.prefill_extra_s[0] == 0.0


def test_nics_override_and_lanes() -> None:
    # prefill 4 NICs, decode 1 NIC → lanes 1; tp 2 → 2 messages per layer on one lane.
    cfg = TransferConfig(prefill_tp=2, decode_tp=2, nics_prefill=4, nics_decode=1)
    res = kv_transfer([1000], KV, Link(), cfg)
    assert res.bandwidth_bytes_per_s == pytest.approx(20e9)
    assert res.time_s[0] == pytest.approx(4 * 2 * 2e-6 + 1e6 / 20e9)


def test_layer_granularity_matches_simulation() -> None:
    link = Link(line_rate_bytes_per_s=1e9, per_message_latency_s=1e-5)
    for prefill_s in (1e-4, 4e-3, 0.5):
        res = kv_transfer([1000], KV, link, TransferConfig(granularity="layer"), prefill_time_s=prefill_s)
        s = 1e-5 + 1e6 / 4 / 0.8e9
        c = prefill_s / 4
        expected = simulate_pipeline([c * (i + 1) for i in range(4)], [s] * 4) - prefill_s
        assert res.exposed_s[0] == pytest.approx(expected)
        assert res.time_s[0] == pytest.approx(4 * s)


def test_pipeline_closed_form() -> None:
    # link keeps up: only the last unit; link slower: s + (n-1)(s-c).
    assert pipeline_exposed_s(80, 2e-3, 4e-5) == pytest.approx(4e-5)
    assert pipeline_exposed_s(10, 1.0, 3.0) == pytest.approx(3.0 + 9 * 2.0)


def test_chunk_granularity_matches_simulation() -> None:
    kv = KvShape(1000.0, 4, 8, state_bytes_per_sequence=3e5)
    link = Link(line_rate_bytes_per_s=1e9, per_message_latency_s=1e-5)
    cfg = TransferConfig(granularity="chunk", chunk_tokens=300, chunk_overhead_s=1e-3, prefill_hbm_bytes_per_s=1e12)
    for tokens, prefill_s in ((1000, 0.5), (1000, 1e-3), (200, 0.1), (900, 0.03)):
        res = kv_transfer([tokens], kv, link, cfg, prefill_time_s=prefill_s)
        n = math.ceil(tokens / 300)
        sizes = [300] * (n - 1) + [tokens - 300 * (n - 1)]
        ready = list(np.cumsum(sizes) * prefill_s / tokens)
        sends = [4 * 1e-5 + k * 1000 / 0.8e9 for k in sizes]
        sends[-1] += 3e5 / 0.8e9
        assert res.exposed_s[0] == pytest.approx(simulate_pipeline(ready, sends) - prefill_s)
        assert res.time_s[0] == pytest.approx(sum(sends))
        assert res.messages[0] == n * 4
        # (n-1)·1 ms + C·n(n-1)/2 tokens re-read × 1000 B / 1e12 B/s
        reread = 300 * n * (n - 1) / 2 * 1000 / 1e12
        assert res.prefill_extra_s[0] == pytest.approx((n - 1) * 1e-3 + reread)


def test_tp_mismatch_relayout_and_messages() -> None:
    # tp 2 → 4: messages 4 layers × 4; lanes 2 → ⌈4/2⌉ = 2 per layer per lane → α·8.
    # re-layout 2·B/(tp_d·HBM) = 2·1e6/(4·1e12) = 0.5 µs.
    cfg = TransferConfig(prefill_tp=2, decode_tp=4, decode_hbm_bytes_per_s=1e12)
    res = kv_transfer([1000], KV, Link(), cfg)
    assert res.messages[0] == 16
    assert res.relayout_s[0] == pytest.approx(0.5e-6)
    assert res.time_s[0] == pytest.approx(8 * 2e-6 + 1e6 / 4e10 + 0.5e-6)


def test_layer_sync_overhead_goes_to_prefill() -> None:
    cfg = TransferConfig(granularity="layer", layer_sync_overhead_s=1e-4)
    res = kv_transfer([10, 20], KV, Link(), cfg, prefill_time_s=[1.0, 2.0])
    assert res.prefill_extra_s == pytest.approx([4e-4, 4e-4])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"granularity": "chunk"}, "chunk_tokens"),
        ({"granularity": "bogus"}, "granularity"),
        ({"prefill_tp": 0}, "prefill_tp"),
        ({"prefill_tp": 2, "decode_tp": 4}, "decode_hbm_bytes_per_s"),
        ({"granularity": "chunk", "chunk_tokens": 512}, "prefill_hbm_bytes_per_s"),
    ],
)
def test_config_errors(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError, match=field):
        TransferConfig(**kwargs)  # type: ignore[arg-type]


def test_input_errors() -> None:
    with pytest.raises(SpecError, match="prefill_time_s"):
        kv_transfer([10], KV, Link(), TransferConfig(granularity="layer"))
    with pytest.raises(SpecError, match="prompt_tokens"):
        kv_transfer([0], KV, Link())
    with pytest.raises(SpecError, match="efficiency"):
        kv_transfer([10], KV, Link(efficiency=1.5))
    with pytest.raises(SpecError, match="kv_dtype_bytes"):
        transfer_for_request(FakeModel(), 10, Link())


def test_pollaczek_khinchine() -> None:
    # M/D/1, λ=1, S=0.5: ρ=0.5, E[W] = 1·0.25/(2·0.5) = 0.25 s.
    assert link_queue([0.5], None, 1.0).mean_wait_s == pytest.approx(0.25)
    # two-point S ∈ {0.1, 0.5} equally likely, λ=1: E[S]=0.3, E[S²]=0.13 → 0.13/(2·0.7).
    q = link_queue([0.1, 0.5], [1.0, 1.0], 1.0)
    assert (q.rho, q.mean_wait_s) == pytest.approx((0.3, 0.13 / 1.4))
    assert math.isinf(link_queue([2.0], None, 1.0).mean_wait_s)


def test_fan_in_load_and_queue() -> None:
    # λ=10, E[B]=1e9: 4 prefill @ 50e9 → 2.5·1e9/50e9 = 0.05; 1 decode @ 20e9 → 0.5.
    load = fan_in_load(10.0, 1e9, 4, 1, 50e9, 20e9)
    assert (load.rho_prefill_side, load.rho_decode_side, load.bottleneck) == pytest.approx((0.05, 0.5, "decode"))
    assert required_bandwidth_bytes_per_s(10.0, 1e9, 0.5) == pytest.approx(2e10)
    cfg = TransferConfig()
    res = kv_transfer([1000, 3000], KV, Link(), cfg)
    q = fan_in_link_queue(res, [0.5, 0.5], 1000.0, 4, 2, Link(), cfg)
    assert q.arrival_rate_per_s == pytest.approx(500.0)  # decode side: λ/y
    assert q.service_s == pytest.approx(res.latency_s + res.bytes / 20e9)
    assert res.utilisation(1000.0) == pytest.approx(1000 * 2e6 / 20e9)


def test_transfer_for_request_contract_keys() -> None:
    out = transfer_for_request(FakeModel(), 1000, Link(), kv_dtype_bytes=2)
    assert {"bytes", "time_s", "exposed_s"} <= set(out)
    assert out["bytes"] == pytest.approx(1000 * 2 * 4 * 8 * 128 * 2)
    assert out["exposed_s"] == out["time_s"]


def _pipeline_from(busy_until_s: float, ready_s: list[float], send_s: list[float]) -> float:
    finish = busy_until_s
    for ready, send in zip(ready_s, send_s, strict=True):
        finish = max(finish, ready) + send
    return finish


@pytest.mark.parametrize("granularity", ["layer", "chunk"])
def test_stream_behind_a_busy_link_is_late_by_wait_minus_slack(granularity: str) -> None:
    """Units ready at c_i (prefill from 0 to T_p) on a link busy until f: the last unit lands at
    ``T_p + exposed + max(0, W − slack)`` with ``W = f − (T_p − overlap)``, the link wait counted
    from the earliest stream start (pdplan.queueing.link_delay)."""
    link = Link(line_rate_bytes_per_s=1e9, per_message_latency_s=1e-5)
    cfg = TransferConfig(
        granularity=granularity,
        chunk_tokens=300,  # type: ignore[arg-type]
        prefill_hbm_bytes_per_s=1e12,
    )
    tokens = 1000
    for prefill_s in (1e-3, 0.02, 0.5):
        res = kv_transfer([tokens], KV, link, cfg, prefill_time_s=prefill_s)
        if granularity == "layer":
            ready = [prefill_s * (i + 1) / 4 for i in range(4)]
            sends = [res.time_s[0] / 4] * 4
        else:
            ready = [prefill_s * 300 / tokens * (i + 1) for i in range(3)] + [prefill_s]
            sends = [4e-5 + k * 1000 / 0.8e9 for k in (300, 300, 300, 100)]
        assert ready[0] == pytest.approx(prefill_s - res.overlap_s[0])
        for busy_until in (0.0, 0.5 * prefill_s, prefill_s, 2.0 * prefill_s):
            wait = max(0.0, busy_until - ready[0])
            late = max(0.0, wait - float(res.slack_s[0]))
            assert _pipeline_from(busy_until, ready, sends) == pytest.approx(prefill_s + res.exposed_s[0] + late)


def test_request_granularity_has_no_overlap() -> None:
    res = kv_transfer([1000, 4000], KV, Link(), TransferConfig())
    assert np.all(res.overlap_s == 0.0)
    assert np.all(res.slack_s == 0.0)
