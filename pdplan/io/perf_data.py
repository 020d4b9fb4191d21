"""The packaged data the roofline takes as parameters (:class:`pdplan.specs.perf_data.PerfData`), and MoE routing laws.

Each file is read once per process (cached) and only for an instance type that can use it (:func:`perf_data`):
the EP constants for expert parallelism or an all-reduce that crosses nodes, DeepEP's inter-node fractions for an EP
group wider than a node, SGLang's overlap schedule for two-batch overlap under EP, and the GPU's W4A16 / CUTLASS MoE
entries for an MoE model. Dense models within a node read none of them.
"""

from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path

from pdplan.errors import SpecError
from pdplan.io.expert_parallel import expert_parallel_defaults
from pdplan.io.files import read_yaml_mapping
from pdplan.io.kernel_tables import read_moe_entry
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.kernel_table import A2aMode, KernelTable, MoeParams
from pdplan.specs.model import ModelSpec
from pdplan.specs.perf_data import TBO_WINDOWS, MoeKernelEntries, PerfData, TwoBatchOverlapSchedule
from pdplan.specs.routing_law import RoutingLaw

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
W4A16_DIR = DATA_DIR / "moe_w4a16"
"""``<gpu>.yaml``: the fitted W4A16 MXFP4 MoE entry (:mod:`pdplan.perf.moe_w4a16`)."""
CUTLASS_DIR = DATA_DIR / "moe_cutlass"
"""``<gpu>.yaml``: the fitted CUTLASS FP8 MoE entry (:mod:`pdplan.perf.moe_cutlass`)."""


@lru_cache(maxsize=1)
def rdma_fractions() -> dict[A2aMode, float]:
    """Achieved inter-node bandwidth / NIC line rate per DeepEP mode (``pdplan/data/ep_a2a.yaml``)."""
    data = read_yaml_mapping(DATA_DIR / "ep_a2a.yaml")
    return {
        "normal": float(data["rdma_fraction"]["normal"]),
        "low_latency": float(data["rdma_fraction"]["low_latency"]),
    }


@lru_cache(maxsize=1)
def two_batch_overlap_schedule() -> TwoBatchOverlapSchedule:
    """The SMs DeepEP's normal mode holds in prefill and SGLang's decode overlap windows
    (``pdplan/data/two_batch_overlap.yaml``; :mod:`pdplan.perf.two_batch_overlap`)."""
    data = read_yaml_mapping(DATA_DIR / "two_batch_overlap.yaml")
    prefill = data.get("prefill")
    if not isinstance(prefill, dict) or not isinstance(prefill.get("comm_sms"), int) or prefill["comm_sms"] < 0:
        raise SpecError("two_batch_overlap.yaml: prefill.comm_sms must be a whole number >= 0", field="prefill")
    decode = data.get("decode")
    if not isinstance(decode, dict) or set(decode) != set(TBO_WINDOWS):
        raise SpecError(f"two_batch_overlap.yaml: decode must have exactly {', '.join(TBO_WINDOWS)}", field="decode")
    windows = {w: {str(k): float(v) for k, v in decode[w].items()} for w in TBO_WINDOWS}
    return TwoBatchOverlapSchedule(prefill_comm_sms=int(prefill["comm_sms"]), decode_windows=windows)


@cache
def w4a16_params(gpu_name: str) -> MoeParams | None:
    """The fitted W4A16 MXFP4 MoE entry for ``gpu_name`` (a kernel table's ``gpu``), or None if none is shipped."""
    return read_moe_entry(W4A16_DIR, gpu_name, "moe_w4a16")


@cache
def cutlass_params(gpu_name: str) -> MoeParams | None:
    """The fitted CUTLASS FP8 MoE entry for ``gpu_name`` (a kernel table's ``gpu``), or None if none is shipped."""
    return read_moe_entry(CUTLASS_DIR, gpu_name, "moe_cutlass")


def moe_kernel_entries(gpu_name: str) -> MoeKernelEntries:
    """Both MoE entries shipped for ``gpu_name`` (a kernel table's ``gpu``)."""
    return MoeKernelEntries(gpu_name, w4a16_params(gpu_name), cutlass_params(gpu_name))


def perf_data(
    model: ModelSpec,
    gpu: GpuSpec,
    table: KernelTable,
    *,
    tp: int = 1,
    dp: int = 1,
    ep: int = 1,
    two_batch_overlap: bool = False,
) -> PerfData:
    """What pricing ``model`` on one instance of ``tp × dp`` ``gpu``s with EP ``ep`` (and ``table``, whose ``gpu``
    names the MoE entries) can use, each part only where it applies (module docstring)."""
    crosses_nodes = tp * dp > gpu.gpus_per_node  # a TP or DP-attention MoE all-reduce over more than one node
    return PerfData(
        expert_parallel=expert_parallel_defaults() if ep > 1 or crosses_nodes else None,
        rdma_fraction=rdma_fractions() if ep > gpu.gpus_per_node else None,
        two_batch_overlap=two_batch_overlap_schedule() if two_batch_overlap and ep > 1 else None,
        moe_kernels=moe_kernel_entries(table.gpu) if model.moe is not None else None,
    )


@lru_cache(maxsize=64)
def routing_law(name: str) -> RoutingLaw:
    """A named law of ``pdplan/data/moe_routing.yaml`` (``uniform``, ``balanced``, ``power-law-1.2``, ``eplb`` ...)."""
    laws = read_yaml_mapping(DATA_DIR / "moe_routing.yaml")["laws"]
    if name not in laws:
        raise SpecError(f"unknown MoE routing law {name!r}; known: {', '.join(sorted(laws))}", field="routing")
    entry = laws[name]
    return RoutingLaw(entry["kind"], float(entry.get("alpha", 0.0)), float(entry.get("load_scale", 1.0)))
