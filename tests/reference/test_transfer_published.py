"""pdplan.transfer.kv against published KV-transfer figures (docs/published_results.md).

Each test names the source row it checks and says which inputs are ours (assumed) and which are
the source's. Tolerances are the honest ones: exact arithmetic where the source gives arithmetic,
order-of-magnitude where the source measured something the closed-form model does not derive.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from pdplan.transfer.fan_in import required_bandwidth_bytes_per_s
from pdplan.transfer.kv import kv_bytes_per_request, kv_transfer
from pdplan.transfer.kv_inputs import KvShape, TransferConfig

GIB = 2.0**30


@dataclass(frozen=True)
class Link:
    line_rate_bytes_per_s: float
    per_message_latency_s: float
    efficiency: float


# Llama-2-70B / Llama-3-70B: 80 layers, 8 KV heads, head_dim 128, bf16 → 327,680 B/token.
LLAMA_70B = KvShape(2 * 80 * 8 * 128 * 2, num_layers=80, num_kv_heads=8)


def test_distserve_opt66b_kv_size_and_bandwidth() -> None:
    """DistServe §1.7 (exact): OPT-66B, 512 tokens → KV ≈ 1.13 GB; 10 rps → 11.3 GB/s ≈ 90 Gbps.
    The source's units are binary: 1.125 GiB, 11.25 GiB/s, 90 Gib/s (exact arithmetic)."""
    opt66b = KvShape(2 * 64 * 9216 * 2, num_layers=64, num_kv_heads=72)
    kv = float(kv_bytes_per_request(512, opt66b))
    assert kv / GIB == 1.125
    need = required_bandwidth_bytes_per_s(10.0, kv)
    assert need / GIB == 11.25
    assert need * 8 / GIB == 90.0


def test_distserve_opt175b_nvlink_segment_under_30ms() -> None:
    """DistServe §1.7 (exact): OPT-175B, >95 % of requests see < 30 ms transfer, as Alg. 2 keeps
    a stage's prefill (TP3) and decode (TP4) segments on one node (NVLink). Our inputs: the worst
    case, 2048 tokens (OPT's context), one PP stage = 32 of 96 layers, NVLink3 300 GB/s per
    direction per GPU (docs/hardware_facts.md §2) at an assumed 0.8 efficiency, α = 1 µs, A100 HBM
    2.039 TB/s for the 3→4 re-layout, all sent after prefill. Model: ≈ 5.3 ms, well under 30 ms."""
    stage = KvShape(2 * 96 * 12288 * 2 / 3, num_layers=32, num_kv_heads=96)
    nvlink3 = Link(300e9, 1e-6, 0.8)
    cfg = TransferConfig(prefill_tp=3, decode_tp=4, decode_hbm_bytes_per_s=2.039e12)
    res = kv_transfer([2048], stage, nvlink3, cfg)
    assert res.exposed_s[0] == pytest.approx(5.3e-3, rel=0.05)
    assert res.exposed_s[0] < 30e-3


@pytest.mark.parametrize(
    ("gpu", "nic_bytes_per_s", "dense_flops_per_s", "published_s"),
    [("a100", 25e9, 312e12, 8e-3), ("h100", 50e9, 989e12, 5e-3)],
)
def test_splitwise_layerwise_constant_vs_serialized_linear(
    gpu: str, nic_bytes_per_s: float, dense_flops_per_s: float, published_s: float
) -> None:
    """Splitwise §4.3/§6.1 (exact): layer-wise non-overlapped cost ≈ constant, ~8 ms A100 /
    ~5 ms H100; serialized grows linearly with prompt size (Fig. 14). Llama-2-70B, TP8 → TP8,
    8 NICs per side (8×200G HDR A100, 8×400G NDR H100). Our inputs: efficiency 0.8, α = 2 µs (RDMA
    RTT, one switch), prefill T_p = 2·69e9·l / (8 GPUs · dense bf16 peak · 50 % MFU): ≈ 166 ms (A100) and 52 ms
    (H100) at 1500 tokens.

    Honest finding: bandwidth + pipeline alone give a layer-wise exposure of 0.04 ms (A100) and
    0.02 ms (H100) at 1500 tokens — ~200× below Splitwise's constant, which is then dominated by
    per-layer synchronisation (event + MSCCL++ proxy signal) and interference, not by the link.
    pdplan carries that as ``layer_sync_overhead_s`` (a calibration input, default 0). One shared
    value, 80 µs/layer (fitted here, not predicted), puts both GPUs within 2× of the source.
    """
    link = Link(nic_bytes_per_s, 2e-6, 0.8)
    lengths = np.array([500.0, 1500.0, 3000.0])
    prefill_s = 2 * 69e9 * lengths / (8 * dense_flops_per_s * 0.5)
    layer = TransferConfig(granularity="layer", prefill_tp=8, decode_tp=8)
    lw = kv_transfer(lengths, LLAMA_70B, link, layer, prefill_time_s=prefill_s)
    ser = kv_transfer(lengths, LLAMA_70B, link, TransferConfig(prefill_tp=8, decode_tp=8))
    # Serialized grows linearly (affine: latency term + bytes/BW); layer-wise grows 1/L as fast
    # (only the last layer's share is exposed while the link keeps up) and stays sub-ms.
    assert np.diff(ser.exposed_s) / np.diff(lengths) == pytest.approx(
        2 * [LLAMA_70B.kv_bytes_per_token / (8 * nic_bytes_per_s * 0.8)]
    )
    assert np.diff(lw.exposed_s) == pytest.approx(np.diff(ser.exposed_s) / 80, rel=0.01)
    assert np.all(lw.exposed_s < 1e-3)
    assert np.all(lw.exposed_s < ser.exposed_s / 40)
    synced = TransferConfig(granularity="layer", prefill_tp=8, decode_tp=8, layer_sync_overhead_s=80e-6)
    cost = kv_transfer([1500], LLAMA_70B, link, synced, prefill_time_s=prefill_s[1])
    non_overlapped = cost.exposed_s[0] + cost.prefill_extra_s[0]
    assert published_s / 2 <= non_overlapped <= published_s * 2


def test_mooncake_transfer_engine_40gb() -> None:
    """Mooncake Transfer Engine README (§3): 40 GB in 87 GB/s on 4×200 Gb/s RoCE; 190 GB/s on
    8×400 Gb/s. 40 GB = 128 Ki tokens of Llama-3-70B KV, which is exactly 40 GiB (binary).
    Our inputs: 4 NICs per side at efficiency 0.87 (= 87/100, so the rate check is arithmetic),
    α = 2 µs; with 40e9 B the time is 0.46 s (with 40 GiB it would be 0.49 s)."""
    assert float(kv_bytes_per_request(128 * 1024, LLAMA_70B)) == 40 * GIB
    shape = KvShape(40e9 / (128 * 1024), num_layers=80, num_kv_heads=8)
    cfg = TransferConfig(nics_prefill=4, nics_decode=4)
    res = kv_transfer([128 * 1024], shape, Link(25e9, 2e-6, 0.87), cfg)
    assert res.bandwidth_bytes_per_s == pytest.approx(87e9)
    assert res.time_s[0] == pytest.approx(0.46, rel=0.01)
    # 8×400G at 190 GB/s ⇔ efficiency 0.475 (docs/published_results.md §3.3: "about 48 % of nominal").
    res8 = kv_transfer([128 * 1024], shape, Link(50e9, 2e-6, 0.475), TransferConfig(nics_prefill=8, nics_decode=8))
    assert res8.time_s[0] == pytest.approx(40e9 / 190e9, rel=0.01)


# PrfaaS Table 5: internal 1T hybrid (KDA:MLA = 3:1) on 8×H200 — tokens, KV MiB, prefill s, Gbps.
PRFAAS_T5 = [
    (1024, 190.8, 0.44, 3.61),
    (8192, 308.9, 0.72, 3.59),
    (32768, 701.3, 1.84, 3.19),
    (131072, 2316.3, 7.40, 2.62),
]


def _prfaas_hybrid() -> KvShape:
    """KV/token and fixed state fitted on the 1K and 8K rows only (two equations, two unknowns)."""
    (l1, m1, _, _), (l2, m2, _, _) = PRFAAS_T5[:2]
    slope = (m2 - m1) * 2**20 / (l2 - l1)
    return KvShape(slope, num_layers=64, num_kv_heads=1, state_bytes_per_sequence=m1 * 2**20 - l1 * slope)


def test_prfaas_hybrid_kv_is_linear_plus_state() -> None:
    """PrfaaS §4 Table 5 (secondary transcription): the hybrid's KV = l·kvb + fixed state. Fitted on
    1K/8K, it predicts 32K and 128K within 2 % (model: 713.8 and 2333.5 MiB vs 701.3 and 2316.3);
    KV throughput Φ = bytes/T_prefill matches the Gbps column within 2 % (prefill times are printed
    to 2 digits)."""
    kv = _prfaas_hybrid()
    for tokens, mib, prefill_s, gbps in PRFAAS_T5:
        kv_bytes = float(kv_bytes_per_request(tokens, kv))
        assert kv_bytes / 2**20 == pytest.approx(mib, rel=0.02)
        assert mib * 2**20 * 8 / prefill_s / 1e9 == pytest.approx(gbps, rel=0.02)


def test_prfaas_case_study_egress() -> None:
    """PrfaaS §4 case study (model-to-model, secondary): Λ_max = 3.24 req/s, t* = 19.4K,
    lognormal(μ=9.90, σ=1.00) on [128, 128K], ~50 % offloaded; average PrfaaS egress 13 Gbps =
    13 % of the 100 Gbps link. Assumed: the case-study model is Table 5's hybrid and egress is
    measured at Λ_max. Model: p = 0.496, E[l | l > t*] ≈ 45K → 12.3 Gbps, ρ = 0.123 (−5 %);
    tolerance 15 %."""
    edges = np.linspace(128.0, 131072.0, 200_001)
    mid = (edges[:-1] + edges[1:]) / 2
    pdf = np.exp(-((np.log(mid) - 9.90) ** 2) / 2.0) / mid
    weights = pdf / pdf.sum()
    long = mid > 19_400
    p_long = float(weights[long].sum())
    assert p_long == pytest.approx(0.5, abs=0.01)
    eth100 = Link(12.5e9, 50e-6, 1.0)
    res = kv_transfer(mid[long], _prfaas_hybrid(), eth100, TransferConfig())
    rho = res.utilisation(3.24 * p_long, weights[long])
    assert rho == pytest.approx(0.13, rel=0.15)
