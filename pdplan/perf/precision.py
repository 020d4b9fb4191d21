"""Bytes per element of a forward pass: weights and GEMM inputs, activations, the KV cache (:class:`Precision`)."""

from __future__ import annotations

from dataclasses import dataclass

from pdplan.specs.kernel_table import GemmFlavour


@dataclass(frozen=True)
class Precision:
    """Bytes per element: weights/GEMM inputs (2 bf16, 1 fp8), activations, KV cache."""

    weight_bytes: float = 2.0
    act_bytes: float = 2.0
    kv_bytes: float = 2.0

    @property
    def gemm_flavour(self) -> GemmFlavour:
        """The kernel table's GEMM family for these weights: ``fp8`` at one byte or less, else ``bf16``."""
        return "fp8" if self.weight_bytes <= 1.0 else "bf16"
