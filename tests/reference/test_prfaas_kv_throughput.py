"""KV throughput one 8xH200 prefill instance emits (PrfaaS Eq. 1) against the paper's Table 3.

Source: Qin et al., "Prefill-as-a-Service", arXiv 2604.15039, Table 3 ("KV throughput Φ_kv (Gbps) at various
input lengths. All models are benchmarked on 8×H200 with SGLang v0.5.9"), as recorded in MISSION_FEATURES.md
§1.2. pdplan's roofline carries no framework overhead, so absolute Φ is higher than measured (Qwen3-235B at 32K:
51.6 vs 33.35 Gb/s); the dense-vs-hybrid *ratio* is what the paper's argument rests on: Qwen3-235B (GQA) over
Qwen3.5-397B (Gated DeltaNet + GQA, 3:1) at 32K is 33.35 / 8.25 = 4.04× ("a 4× reduction"), and MiniMax-M2.5
over MiMo-V2-Flash (sliding-window + global GQA, 5:1) is 59.93 / 4.66 = 12.9× ("a 13× reduction"). Tolerance ± 25 %.
"""

from __future__ import annotations

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.serving.prfaas.sweep import kv_throughput_sweep, parse_lengths

LENGTHS = parse_lengths("1K,8K,32K,128K")


def _phi_gbps(model: str) -> list[float]:
    doc = kv_throughput_sweep(open_catalog(), model=model, gpu="h200-sxm", tp=8, lengths=LENGTHS)
    return [row["kv_gbps"] for row in doc["rows"]]


def test_dense_over_hybrid_ratio_at_32k() -> None:
    """3.31x (-18 %) with the Gated DeltaNet kernel family fitted on aiconfigurator-kernels (docs/kernel_accuracy.md):
    Qwen3-235B 32K prefill 1,097 ms (46.0 Gb/s, paper 33.35), Qwen3.5-397B 690 ms (13.9 Gb/s, paper 8.25). Before that
    fit the hybrid's GDN layers were priced from the roofline (616 ms, 2.96x, a strict xfail). Nothing tuned to
    Table 3."""
    ratio = _phi_gbps("qwen3-235b-a22b")[2] / _phi_gbps("qwen3.5-397b-a17b")[2]
    assert ratio == pytest.approx(33.35 / 8.25, rel=0.25)


@pytest.mark.xfail(
    strict=True,
    reason="9.09x vs 12.86x (-29 %): MiniMax-M2.5 32K prefill 578 ms (115.2 Gb/s, paper 59.93), MiMo-V2-Flash 493 ms "
    "(12.7 Gb/s, paper 4.66): pdplan's MiMo prefill is the more optimistic (2.7x the measured KV rate vs 1.9x). Its "
    "39 sliding-window layers are priced as 128-query blocks on the full-attention kernel table and its FP8 MoE with "
    "the fused-MoE fit; SGLang's SWA kernels and the attention-sink biases are not measured here. Not tuned",
)
def test_dense_over_sliding_window_ratio_at_32k() -> None:
    ratio = _phi_gbps("minimax-m2.5")[2] / _phi_gbps("mimo-v2-flash")[2]
    assert ratio == pytest.approx(59.93 / 4.66, rel=0.25)


def test_dense_models_emit_far_more_kv_than_hybrids_from_8k() -> None:
    """Table 3: from 8K on every dense column is above every hybrid column (22–60 vs 1.5–8.3 Gb/s)."""
    dense = [_phi_gbps(m) for m in ("qwen3-235b-a22b", "minimax-m2.5")]
    hybrid = [_phi_gbps(m) for m in ("qwen3.5-397b-a17b", "qwen3-next-80b-a3b", "kimi-linear-48b-a3b", "mimo-v2-flash")]
    for i in (1, 2, 3):
        assert min(d[i] for d in dense) > max(h[i] for h in hybrid)


def test_kv_bytes_of_the_dense_baseline() -> None:
    """MiniMax-M2.5: 62 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 253,952 B/token (MISSION_FEATURES §1.2)."""
    doc = kv_throughput_sweep(open_catalog(), model="minimax-m2.5", gpu="h200-sxm", tp=8, lengths=[32768])
    assert doc["rows"][0]["kv_bytes"] == 253_952 * 32768
