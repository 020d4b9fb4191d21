"""Synthetic kernel tables and GPUs for hand-worked roofline tests (every efficiency 1, no overheads)."""

from __future__ import annotations

from dataclasses import dataclass

from pdplan.specs.kernel_table import KernelTable

SHARP_Q = 64.0  # smooth_max ≈ max within 1.1% when the two terms are equal, exact to <1e-9 when 2x apart


@dataclass(frozen=True)
class ToyGpu:
    """A GPU with round numbers: 1 PFLOP/s bf16, 2 PFLOP/s fp8, 1 TB/s HBM, 100 GB/s scale-up."""

    name: str = "toy"
    bf16_flops_per_s: float = 1e15
    fp8_flops_per_s: float | None = 2e15
    memory_bytes_per_s: float = 1e12
    memory_bytes: float = 80 * 2**30
    scale_up_bytes_per_s: float = 1e11


def ideal_table(*, step_overhead_s: float = 0.0, bus_bytes_per_s: float = 1e11) -> KernelTable:
    """Kernel table of a perfect machine: every fraction 1, no saturation constants or overheads."""
    gemm = {
        "peak_fraction": 1.0,
        "m0_tokens": 0.0,
        "n0_elements": 0.0,
        "k0_elements": 0.0,
        "memory_fraction": 1.0,
        "overhead_s": 0.0,
        "smooth_q": SHARP_Q,
    }
    prefill = {
        "compute_fraction": 1.0,
        "s0_tokens": 0.0,
        "w0_batch_heads": 0.0,
        "memory_fraction": 1.0,
        "overhead_s": 0.0,
        "smooth_q": SHARP_Q,
    }
    decode = {
        "memory_fraction": 1.0,
        "c0_tokens": 0.0,
        "w0_seq_heads": 0.0,
        "compute_fraction": 1.0,
        "overhead_s": 0.0,
        "smooth_q": SHARP_Q,
    }
    return KernelTable.model_validate(
        {
            "schema_version": 1,
            "gpu": "toy",
            "calibrated": False,
            "stack": "ideal (tests)",
            "derived_from": None,
            "gemm": {"bf16": gemm, "fp8": gemm},
            "prefill_attention": {"bf16": prefill, "fp8": prefill},
            "decode_attention": {"bf16": decode, "fp8": decode},
            "allreduce": {"alpha_s": 0.0, "bus_bytes_per_s": bus_bytes_per_s},
            "elementwise": {"memory_fraction": 1.0, "overhead_s": 0.0},
            "framework": {"decode_step_overhead_s": step_overhead_s},
            "sources": {"all": "synthetic test table"},
        }
    )
