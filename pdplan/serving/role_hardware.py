"""A resolved instance type of one role (:class:`RoleHardware`: model, GPU, kernel table, parallelism, precision,
engine) and its memory budget (:func:`instance_budget`).

**Memory** (:mod:`pdplan.perf.memory`): weights, workspace and KV capacity per instance; an instance whose weights do
not fit raises :class:`~pdplan.errors.NoFeasiblePlanError`. The performance of a role built on this (prefill S(l),
decode τ(B, K), chunk prices) is :mod:`pdplan.serving.roles`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from pdplan.errors import NoFeasiblePlanError
from pdplan.io.serving_defaults import serving_defaults
from pdplan.perf.memory import InstanceMemory, instance_memory
from pdplan.perf.moe_wideep import MoeKernel
from pdplan.perf.precision import Precision
from pdplan.specs.engine import EngineProfile
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.kernel_table import KernelTable
from pdplan.specs.model import ModelSpec
from pdplan.specs.perf_data import PerfData
from pdplan.specs.routing_law import RoutingLaw
from pdplan.units import GIB


@dataclass(frozen=True, slots=True)
class RoleHardware:
    """A resolved instance type: model, GPU spec, kernel table, parallelism, precision."""

    model: ModelSpec
    gpu: GpuSpec
    table: KernelTable
    tp: int
    pp: int
    precision: Precision
    gpu_memory_utilization: float | None = None
    kv_free_fraction: float = 1.0
    """Share of the memory left after weights and workspace that holds KV (TensorRT-LLM's basis; 1 otherwise)."""
    workspace_tokens: int | None = None
    """Tokens the activation workspace is sized for (None: the serving default)."""
    workspace_in_budget: bool = True
    """The activation workspace comes out of the usable share (vLLM, TensorRT-LLM); False: the engine's fraction
    holds weights and KV only (SGLang ``mem_fraction_static``, :func:`pdplan.perf.memory.instance_memory`)."""
    engine: EngineProfile | None = None
    """The serving engine's profile (:mod:`pdplan.serving.engine_bind`); None: kernel time only."""
    dp: int = 1
    """Attention data-parallel ranks per instance (:mod:`pdplan.perf.expert_parallel`)."""
    ep: int = 1
    """Expert-parallel size of the MoE layers."""
    expert_gather: bool = False
    """Prefill only: ZeRO-Prefill's expert-weight all-gather instead of the EP all-to-all."""
    redundant_experts: int = 0
    """EPLB redundant expert slots held besides the model's experts."""
    moe_kernel: MoeKernel = "fused"
    """The expert kernel family the engine runs here (:func:`pdplan.perf.moe_wideep.moe_kernel_for`)."""
    two_batch_overlap: bool | None = None
    """EP passes as two overlapped micro-batches (:mod:`pdplan.perf.two_batch_overlap`); None: the engine's default."""
    prefill_routing: RoutingLaw | None = None
    """How prefill tokens spread over experts (:mod:`pdplan.perf.moe_routing`); None: uniform. Set by the engine
    profile where EPLB runs (:func:`pdplan.serving.engine_bind.with_engine`); decode stays uniform."""
    kv_block_tokens: int = 1
    """The KV block (page) size the engine allocates in (:mod:`pdplan.perf.kv_blocks`: a sequence's last block is
    partly empty); 1: token-granular, no partial blocks. Set from the engine's ``kv_connector`` or the scenario's
    ``kv_block_tokens`` (:func:`pdplan.serving.engine_bind.with_engine`)."""
    perf_data: PerfData = field(default_factory=PerfData)
    """What the roofline prices beyond the kernel table for this instance type (EP constants, the overlap schedule,
    the GPU's W4A16 / CUTLASS MoE entries), read by :func:`pdplan.io.perf_data.perf_data` in
    :func:`pdplan.serving.engine_bind.with_engine`; empty: none loaded."""

    def __post_init__(self) -> None:
        """Weights never wider than the checkpoint stores them (an FP8 checkpoint is served in FP8)."""
        stored = self.model.checkpoint_weight_bytes
        if self.precision.weight_bytes > stored:
            object.__setattr__(self, "precision", dataclasses.replace(self.precision, weight_bytes=stored))

    @property
    def label(self) -> str:
        return (
            f"{self.gpu.name} TP{self.tp}"
            + (f" PP{self.pp}" if self.pp > 1 else "")
            + (f" DP{self.dp}" if self.dp > 1 else "")
            + (f" EP{self.ep}" if self.ep > 1 else "")
            + (" ZeRO-gather" if self.expert_gather and self.ep > 1 else "")
        )

    @property
    def parallel(self) -> dict[str, object]:
        """The DP/EP keyword arguments of :func:`pdplan.perf.roofline.phase_time` for this instance type."""
        return {"dp": self.dp, "ep": self.ep, "expert_gather": self.expert_gather}

    @property
    def moe_options(self) -> dict[str, object]:
        """The keyword arguments of :func:`pdplan.perf.roofline.phase_time` the engine binding sets for this instance
        type: the MoE kernel, two-batch overlap and the data beyond the kernel table."""
        return {
            "moe_kernel": self.moe_kernel,
            "two_batch_overlap": bool(self.two_batch_overlap),
            "data": self.perf_data,
        }

    @property
    def gpus_per_instance(self) -> int:
        """``tp·dp·pp``."""
        return self.tp * self.dp * self.pp


def instance_budget(hw: RoleHardware, role: str) -> InstanceMemory:
    """Memory of one instance; NoFeasiblePlanError (binding "memory") when weights do not fit."""
    mem = instance_memory(
        hw.model,
        hw.gpu.memory_bytes,
        defaults=serving_defaults(),
        tp=hw.tp,
        pp=hw.pp,
        weight_dtype_bytes=hw.precision.weight_bytes,
        kv_dtype_bytes=hw.precision.kv_bytes,
        act_dtype_bytes=hw.precision.act_bytes,
        gpu_memory_utilization=hw.gpu_memory_utilization,
        max_num_batched_tokens=hw.workspace_tokens,
        kv_free_fraction=hw.kv_free_fraction,
        dp=hw.dp,
        ep=hw.ep,
        redundant_experts=hw.redundant_experts,
        expert_gather=hw.expert_gather and hw.ep > 1,
        workspace_in_budget=hw.workspace_in_budget,
    )
    if not bool(np.all(mem.fits)):
        workspace = mem.workspace_bytes if hw.workspace_in_budget else 0.0
        need = float((mem.weight_bytes + workspace).max()) / GIB
        have = float(mem.usable_bytes.max()) / GIB
        what = "weights + workspace" if hw.workspace_in_budget else "weights"
        raise NoFeasiblePlanError(
            f"{role} instance {hw.label} does not fit {hw.model.name}: {what} "
            f"{need:.1f} GiB per GPU exceed the usable {have:.1f} GiB; raise TP/PP or use fp8",
            binding_constraint="memory",
        )
    return mem
