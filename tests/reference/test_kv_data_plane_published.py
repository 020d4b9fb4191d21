"""The KV data plane (pdplan.transfer.data_plane) against published transfer measurements (docs/kv_data_plane.md).

Each test names its source, which inputs are the source's and which are ours, and what is calibration rather than
prediction. Links and models come from the catalogue (hardware_db/links, pdplan/data/models), backends from
pdplan/data/kv_backends.yaml.
"""

from __future__ import annotations

import pytest

from pdplan.cli.common import catalog_from
from pdplan.io.kv_backends import kv_backend
from pdplan.transfer.data_plane import data_plane
from pdplan.transfer.kv import kv_transfer
from pdplan.transfer.kv_inputs import KvShape, TransferConfig, kv_shape_from_model

CATALOG = catalog_from(None, None)


def _vllm_50913(block_tokens: int) -> float:
    """Request-granularity transfer of 4,900 tokens of Qwen3-32B (fp8 KV) TP2 → TP2 over PCIe Gen4 (8xL20 in one
    node), NIXL over UCX cut by vLLM's NixlConnector at ``block_tokens``."""
    kv = kv_shape_from_model(CATALOG.model("qwen3-32b"), 1.0)
    plane = data_plane("nixl-ucx", kv_backend("nixl-ucx"), "block", block_tokens)
    cfg = TransferConfig(prefill_tp=2, decode_tp=2, data_plane=plane)
    return float(kv_transfer([4900.0], kv, CATALOG.link("pcie4"), cfg).time_s[0])


def test_vllm_50913_block_16_vs_64() -> None:
    """vLLM issue #50913 (https://github.com/vllm-project/vllm/issues/50913; 8xL20, Qwen3-32B-FP8 TP2 3P1D, fp8 KV,
    FlashInfer, ~4.9k-token prompts): transfer window ~105 ms at --block-size 16; --block-size 64 cuts it by ~58 ms.

    Calibration, not prediction: the per-descriptor cost (1.97 us) is derived from the 58 ms drop itself
    (kv_backends.yaml), so the drop is checked to the model's arithmetic (±2 ms). The absolute windows are the
    check: bytes/bandwidth from hardware_db's pcie4 (31.5 GB/s at 0.89, one lane per GPU) and the 3 ms launch of
    issue #23780 are independent of the issue. The model gives 92 ms (−12 %) and 34 ms (−27 % of the 47 ms the
    issue implies): ~13 ms the model lacks at both sizes (the issue's p50 windows under 3P1D load, where transfers
    queue behind each other; L20 peer traffic through the PCIe root complex). Tolerances: −20 %/+10 % at 16,
    −35 %/+10 % at 64."""
    t16, t64 = _vllm_50913(16), _vllm_50913(64)
    assert t16 - t64 == pytest.approx(0.058, abs=0.002)
    assert 0.80 * 0.105 <= t16 <= 1.10 * 0.105
    assert 0.65 * 0.047 <= t64 <= 1.10 * 0.047
    assert t16 > 2.0 * t64  # block 16: per-descriptor overhead dominates (the diagnosis)


MOONCAKE_VLLM_V1 = {  # prompt tokens → measured transfer ms (source table, "Actual Transfer Time")
    128: 0.54,
    256: 0.61,
    512: 0.92,
    1024: 1.50,
    2048: 2.51,
    4096: 4.75,
    8192: 8.84,
    16384: 16.43,
    32768: 31.65,
}


@pytest.mark.parametrize("tokens", sorted(MOONCAKE_VLLM_V1))
def test_mooncake_te_vllm_v1_transfer_times(tokens: int) -> None:
    """Mooncake's vLLM v1 benchmark (https://kvcache-ai.github.io/Mooncake/performance/vllm-v1-support-benchmark.html):
    Qwen3-8B 1P1D over 8x RoCE (~200 GB/s), transfer time per prompt length, 0.54 ms at 128 tokens to 31.65 ms at
    32,768 (4.5 GB).

    Ours: Qwen3-8B's KV from its HF config (36 layers, 8 KV heads, head_dim 128, bf16: 147,456 B/token; not in
    the model catalogue); TP 1 over 8 NICs (Mooncake TE spreads one transfer over every NIC); hardware_db
    roce-200g (0.87 efficiency, from Mooncake's 4x200G figure). Calibration: the 0.36 ms launch was derived from
    the 128-token row (kv_backends.yaml), so that row is exact by construction; the other eight are predictions.
    The model runs 6-18 % fast from 1K tokens up (this setup peaks at 71 % of line rate, the link file's 0.87 is
    Mooncake's 4x200G large-transfer figure): tolerance ±20 %."""
    kv = KvShape(2 * 36 * 8 * 128 * 2, num_layers=36, num_kv_heads=8)
    plane = data_plane("mooncake-te", kv_backend("mooncake-te"), "layer", 16)
    cfg = TransferConfig(nics_prefill=8, nics_decode=8, data_plane=plane)
    model_s = float(kv_transfer([float(tokens)], kv, CATALOG.link("roce-200g"), cfg).time_s[0])
    assert model_s == pytest.approx(MOONCAKE_VLLM_V1[tokens] * 1e-3, rel=0.20)
