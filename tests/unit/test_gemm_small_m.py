"""Hand-worked checks of the small-M GEMM entry (``GemmParams.small_m``) and of its fit."""

from __future__ import annotations

import numpy as np
import pytest
from fitting.fit_gemm import fit_gemm, l2_evidenced
from pydantic import ValidationError
from support.tables import SHARP_Q, ToyGpu

from pdplan.io.kernel_tables import load_kernel_table
from pdplan.perf.kernels import gemm_time_s
from pdplan.specs.kernel_table import GemmParams, KernelTable

N = K = 8192.0
GENERAL = {
    "peak_fraction": 0.5,
    "m0_tokens": 0.0,
    "n0_elements": 0.0,
    "k0_elements": 0.0,
    "memory_fraction": 0.5,
    "overhead_s": 1e-6,
    "smooth_q": SHARP_Q,
}


def table(small_memory_fraction: float) -> KernelTable:
    base = load_kernel_table("h100-sxm").model_dump()
    small = {**GENERAL, "memory_fraction": small_memory_fraction}
    base["gemm"]["fp8"] = {**GENERAL, "small_m_tokens": 128, "small_m": small}
    return KernelTable.model_validate(base)


# ToyGpu: 2 PFLOP/s fp8, 1 TB/s. General entry at m = 129 (n = k = 8192, fp8 weights 1 B, bf16 out):
# compute 2·129·8192²/(2e15·0.5) = 17.3 us, memory (129·(8192 + 2·8192) + 8192²)/(1e12·0.5)
# = 70,279,168 B / 5e11 = 140.558 us (8x the compute: the q = 64 blend is the max), + 1 us.
CAP_S = 1e-6 + 70_279_168 / 5e11


def test_small_m_rows_priced_by_the_small_entry() -> None:
    # small entry at m = 1, memory_fraction 1: (24,576 + 8192²) B / 1e12 = 67.133 us, + 1 us
    t = table(1.0)
    assert gemm_time_s(1, N, K, "fp8", ToyGpu(), t) == pytest.approx(1e-6 + 67_133_440 / 1e12, rel=1e-6)
    assert gemm_time_s(129, N, K, "fp8", ToyGpu(), t) == pytest.approx(CAP_S, rel=1e-6)


def test_small_entry_capped_by_the_general_entry_at_the_threshold() -> None:
    # memory_fraction 0.2: 67,133,440 B / 2e11 = 335.7 us > the general 141.6 us at m = 129: capped there
    t = table(0.2)
    assert gemm_time_s(1, N, K, "fp8", ToyGpu(), t) == pytest.approx(CAP_S, rel=1e-6)
    assert gemm_time_s(128, N, K, "fp8", ToyGpu(), t) <= gemm_time_s(129, N, K, "fp8", ToyGpu(), t)


def test_array_call_matches_scalar_calls() -> None:
    t = table(1.0)
    m = np.array([1.0, 64.0, 128.0, 129.0, 4096.0])
    scalar = [float(gemm_time_s(x, N, K, "fp8", ToyGpu(), t)) for x in m]
    assert gemm_time_s(m, N, K, "fp8", ToyGpu(), t) == pytest.approx(scalar, rel=1e-12)
    n = np.array([1024.0, 4096.0, N, N, N])  # array n as well: the broadcast path
    scalar = [float(gemm_time_s(x, y, K, "fp8", ToyGpu(), t)) for x, y in zip(m, n, strict=True)]
    assert gemm_time_s(m, n, K, "fp8", ToyGpu(), t) == pytest.approx(scalar, rel=1e-12)


def test_small_m_needs_its_threshold_and_does_not_nest() -> None:
    with pytest.raises(ValidationError, match="small_m_tokens"):
        GemmParams(**GENERAL, small_m=GemmParams(**GENERAL))
    with pytest.raises(ValidationError, match="small_m_tokens"):
        GemmParams(**GENERAL, small_m_tokens=128)
    inner = GemmParams(**GENERAL, small_m_tokens=16, small_m=GemmParams(**GENERAL))
    with pytest.raises(ValidationError, match="its own small_m"):
        GemmParams(**GENERAL, small_m_tokens=128, small_m=inner)


def test_l2_evidence_is_a_weight_stream_above_the_hbm_rate() -> None:
    # 1 MB of fp8 weights at m = 1: 2 us is 0.5 TB/s (HBM can), 0.5 us is 2 TB/s (> 1 TB/s: only an L2 hit)
    m, n, k = np.array([1.0, 1.0]), np.array([1000.0, 1000.0]), np.array([1000.0, 1000.0])
    assert not l2_evidenced((m[:1], n[:1], k[:1], np.array([2e-6])), "fp8", ToyGpu())
    assert l2_evidenced((m, n, k, np.array([2e-6, 5e-7])), "fp8", ToyGpu())
    # bf16 weights are 2 B: 2 MB in 1.5 us is 1.33 TB/s
    assert l2_evidenced((m[:1], n[:1], k[:1], np.array([1.5e-6])), "bf16", ToyGpu())
    # rows above m = 16 are not evidence (activations and outputs share the bytes)
    assert not l2_evidenced((np.array([32.0]), n[:1], k[:1], np.array([5e-7])), "fp8", ToyGpu())


def test_fp8_fit_recovers_a_two_kernel_table() -> None:
    """Rows priced by a known small-M table (flat memory-bound kernel up to m = 128, a slower one above)
    are fitted back within 2 % on every row, with the small-M entry and no warm-L2 term (none shown)."""
    truth = table(1.0)
    grid = np.array([1, 4, 16, 32, 64, 128, 129, 256, 1024, 4096], dtype=float)
    sizes = np.array([1024, 4096, 8192, 16384], dtype=float)
    m, n, k = (a.ravel() for a in np.meshgrid(grid, sizes, sizes, indexing="ij"))
    t_s = gemm_time_s(m, n, k, "fp8", ToyGpu(), truth, warm_l2=True)
    params, stats = fit_gemm({"m": m, "n": n, "k": k, "latency_ms": t_s * 1e3}, "fp8", ToyGpu(), "toy")
    assert params.small_m_tokens == 128
    assert params.small_m is not None
    assert params.l2_speedup == 1.0
    assert params.small_m.l2_speedup == 1.0
    assert stats.p90_abs_pct < 2.0
