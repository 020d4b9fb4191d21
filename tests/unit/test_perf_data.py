"""The roofline's data beyond the kernel table (pdplan.specs.perf_data, read by pdplan.io.perf_data): each part loaded
only for an instance type that can use it, and a pass that needs a part it was not given raises (never a default)."""

from __future__ import annotations

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import moe_kernel_entries, perf_data
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.specs.perf_data import PerfData

CAT = open_catalog()
GPU, TABLE = CAT.gpu("h100-sxm"), CAT.kernel_table("h100-sxm")
FP8 = Precision(weight_bytes=1.0, act_bytes=2.0, kv_bytes=1.0)


def test_a_dense_model_inside_a_node_loads_nothing() -> None:
    assert perf_data(CAT.model("llama-3.1-70b"), GPU, TABLE, tp=8) == PerfData()


def test_tp_across_nodes_loads_the_ep_constants_only() -> None:
    data = perf_data(CAT.model("llama-3.1-405b"), GPU, TABLE, tp=16)
    assert data.expert_parallel is not None
    assert data.expert_parallel.inter_node_bytes_per_s_per_gpu == 50e9  # pdplan/data/expert_parallel.yaml
    assert (data.rdma_fraction, data.two_batch_overlap, data.moe_kernels) == (None, None, None)


def test_wide_ep_with_overlap_loads_every_part_for_its_gpu() -> None:
    data = perf_data(CAT.model("deepseek-v3"), GPU, TABLE, dp=72, ep=72, two_batch_overlap=True)
    assert data.expert_parallel is not None
    assert data.rdma_fraction == {"normal": 0.855, "low_latency": 0.78}  # pdplan/data/ep_a2a.yaml
    assert data.two_batch_overlap is not None
    assert data.two_batch_overlap.prefill_comm_sms == 20
    assert data.moe_kernels == moe_kernel_entries("h100-sxm")
    assert data.moe_kernels.gpu == TABLE.gpu
    # EP inside one node: no inter-node share; no overlap asked: no schedule
    inside = perf_data(CAT.model("deepseek-v3"), GPU, TABLE, dp=8, ep=8)
    assert (inside.rdma_fraction, inside.two_batch_overlap) == (None, None)


def test_an_ep_pass_without_its_data_raises() -> None:
    ds = CAT.model("deepseek-v3")
    args = {"phase": "decode", "batch": 64, "tokens": 2000, "tp": 1, "dp": 8, "ep": 8, "precision": FP8}
    with pytest.raises(ValueError, match=r"expert_parallel\.yaml"):
        phase_time(ds, GPU, TABLE, **args)  # type: ignore[arg-type]
    priced = phase_time(ds, GPU, TABLE, **args, data=perf_data(ds, GPU, TABLE, dp=8, ep=8))  # type: ignore[arg-type]
    assert float(priced.time_s) > 0.0


def test_four_bit_experts_need_the_gpus_entries() -> None:
    oss = CAT.model("gpt-oss-120b")
    with pytest.raises(ValueError, match="MoE kernel entries"):
        phase_time(oss, GPU, TABLE, phase="decode", batch=8, tokens=1024, tp=2)
    other = PerfData(moe_kernels=moe_kernel_entries("h200-sxm"))
    with pytest.raises(ValueError, match="h200-sxm"):
        phase_time(oss, GPU, TABLE, phase="decode", batch=8, tokens=1024, tp=2, data=other)
