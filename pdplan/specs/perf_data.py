"""What the roofline reads besides the kernel table and the GPU's peaks (:class:`PerfData`; schema only).

The performance model (:mod:`pdplan.perf`) reads no files. These values come from packaged data files, read by
:mod:`pdplan.io.perf_data` where an instance type is resolved (:func:`pdplan.serving.engine_bind.with_engine`), and
reach the roofline as the ``data`` argument of :func:`pdplan.perf.roofline.phase_time`. Each part is loaded only for
an instance type that can use it; pricing raises where it needs a part it was not given, never inventing a number:

* ``expert_parallel`` (``pdplan/data/expert_parallel.yaml``): the scale-out NIC rate per GPU, DeepEP's per-call
  latencies, the all-to-all element bytes and ZeRO-Prefill's overlap jitter, for EP communication and for any
  all-reduce that crosses nodes (:mod:`pdplan.perf.expert_parallel`);
* ``rdma_fraction`` (``pdplan/data/ep_a2a.yaml``): DeepEP's achieved inter-node bandwidth per mode, for an EP group
  that spans nodes (:mod:`pdplan.perf.moe_a2a`);
* ``two_batch_overlap`` (``pdplan/data/two_batch_overlap.yaml``): the SMs DeepEP's normal mode holds in prefill and
  SGLang's decode overlap windows (:mod:`pdplan.perf.two_batch_overlap`);
* ``moe_kernels`` (``pdplan/data/moe_w4a16/<gpu>.yaml``, ``pdplan/data/moe_cutlass/<gpu>.yaml``): the GPU's fitted
  W4A16 and CUTLASS MoE entries, each None where the GPU has none (:mod:`pdplan.perf.moe_w4a16`,
  :mod:`pdplan.perf.moe_cutlass`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdplan.specs.kernel_table import A2aMode, MoeParams

TBO_WINDOWS = ("dispatch_window", "combine_window")
"""The decode overlap windows of ``pdplan/data/two_batch_overlap.yaml``."""


@dataclass(frozen=True)
class ExpertParallelDefaults:
    """EP all-to-all and weight-gather constants (see ``pdplan/data/expert_parallel.yaml`` for sources)."""

    inter_node_bytes_per_s_per_gpu: float
    dispatch_latency_s: dict[str, float]
    combine_latency_s: dict[str, float]
    dispatch_bytes_per_element: float
    combine_bytes_per_element: float
    gather_overlap_jitter: float
    sources: dict[str, str]


@dataclass(frozen=True)
class TwoBatchOverlapSchedule:
    """``prefill_comm_sms``: SMs DeepEP's normal-mode kernels hold while a prefill transfer runs; ``decode_windows``:
    per window of :data:`TBO_WINDOWS`, op name → share of the op's per-layer time that runs in it
    (``pdplan/data/two_batch_overlap.yaml``)."""

    prefill_comm_sms: int
    decode_windows: dict[str, dict[str, float]]


@dataclass(frozen=True)
class MoeKernelEntries:
    """The fitted MoE entries shipped for one GPU (a kernel table's ``gpu``) beside its kernel table: the W4A16 MXFP4
    kernel and TensorRT-LLM's CUTLASS FP8 kernel, each None where the GPU has none."""

    gpu: str
    w4a16: MoeParams | None
    cutlass: MoeParams | None


def _missing(part: str, source: str, use: str) -> ValueError:
    return ValueError(
        f"{use} needs {part} ({source}), which this PerfData does not carry: pass "
        "data=pdplan.io.perf_data.perf_data(model, gpu, tp=..., dp=..., ep=...) to the roofline"
    )


@dataclass(frozen=True)
class PerfData:
    """The roofline's inputs beyond the kernel table (module docstring); None: not loaded for this instance type."""

    expert_parallel: ExpertParallelDefaults | None = None
    rdma_fraction: dict[A2aMode, float] | None = None
    two_batch_overlap: TwoBatchOverlapSchedule | None = None
    moe_kernels: MoeKernelEntries | None = None

    def ep_defaults(self, use: str) -> ExpertParallelDefaults:
        """The EP constants; ValueError naming ``use`` where they were not loaded."""
        if self.expert_parallel is None:
            raise _missing("the EP constants", "pdplan/data/expert_parallel.yaml", use)
        return self.expert_parallel

    def tbo_schedule(self) -> TwoBatchOverlapSchedule:
        """SGLang's two-batch-overlap schedule; ValueError where it was not loaded."""
        if self.two_batch_overlap is None:
            raise _missing("the overlap schedule", "pdplan/data/two_batch_overlap.yaml", "two-batch overlap")
        return self.two_batch_overlap

    def moe_entries(self, use: str) -> MoeKernelEntries:
        """The GPU's W4A16 and CUTLASS MoE entries; ValueError naming ``use`` where they were not loaded."""
        if self.moe_kernels is None:
            raise _missing("the GPU's MoE kernel entries", "pdplan/data/moe_w4a16/, moe_cutlass/", use)
        return self.moe_kernels
