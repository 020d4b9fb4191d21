"""Hypothesis invariants of the roofline (pdplan.perf.roofline) on every preset model."""

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tables import ToyGpu, ideal_table

from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import moe_kernel_entries
from pdplan.io.serving_defaults import serving_defaults
from pdplan.perf.memory import instance_memory
from pdplan.perf.op_types import GemmOp, PassShape
from pdplan.perf.ops import forward_ops
from pdplan.perf.roofline import decode_step_s, phase_time
from pdplan.specs.perf_data import PerfData

CATALOG = open_catalog()
MODELS = {name: CATALOG.model(name) for name in CATALOG.names("model")}
TABLE = ideal_table(step_overhead_s=1e-3)
GPU = ToyGpu()
DATA = PerfData(moe_kernels=moe_kernel_entries(TABLE.gpu))  # the toy GPU has no W4A16 / CUTLASS MoE entry

model_names = st.sampled_from(sorted(MODELS))
tps = st.sampled_from([1, 2, 4, 8])
phases = st.sampled_from(["prefill", "decode"])


@settings(deadline=None, max_examples=40)
@given(name=model_names, tp=tps, phase=phases, batch=st.integers(1, 64), tokens=st.integers(1, 8192))
def test_time_grows_with_tokens_and_batch(name: str, tp: int, phase: str, batch: int, tokens: int) -> None:
    model = MODELS[name]
    args = {"phase": phase, "tp": tp, "data": DATA}
    base = phase_time(model, GPU, TABLE, batch=batch, tokens=tokens, **args).time_s  # type: ignore[arg-type]
    more_tokens = phase_time(model, GPU, TABLE, batch=batch, tokens=tokens * 2, **args).time_s  # type: ignore[arg-type]
    more_batch = phase_time(model, GPU, TABLE, batch=batch * 2, tokens=tokens, **args).time_s  # type: ignore[arg-type]
    assert more_tokens >= base * (1 - 1e-12)
    assert more_batch >= base * (1 - 1e-12)


@settings(deadline=None, max_examples=40)
@given(
    name=model_names,
    tp=tps,
    phase=phases,
    batch=st.integers(1, 64),
    tokens=st.integers(1, 8192),
    factor=st.floats(1.0, 8.0),
)
def test_more_bandwidth_or_flops_is_never_slower(
    name: str, tp: int, phase: str, batch: int, tokens: int, factor: float
) -> None:
    model = MODELS[name]
    args = {"phase": phase, "batch": batch, "tokens": tokens, "tp": tp, "data": DATA}
    base = phase_time(model, GPU, TABLE, **args).time_s  # type: ignore[arg-type]
    faster_mem = replace(GPU, memory_bytes_per_s=GPU.memory_bytes_per_s * factor)
    faster_flops = replace(GPU, bf16_flops_per_s=GPU.bf16_flops_per_s * factor)
    assert phase_time(model, faster_mem, TABLE, **args).time_s <= base * (1 + 1e-12)  # type: ignore[arg-type]
    assert phase_time(model, faster_flops, TABLE, **args).time_s <= base * (1 + 1e-12)  # type: ignore[arg-type]


@settings(deadline=None, max_examples=30)
@given(name=model_names, tp=st.sampled_from([1, 2, 4]))
def test_tensor_parallelism_never_increases_per_gpu_weights(name: str, tp: int) -> None:
    model = MODELS[name]
    one = instance_memory(model, GPU.memory_bytes, defaults=serving_defaults(), tp=tp).weight_bytes
    two = instance_memory(model, GPU.memory_bytes, defaults=serving_defaults(), tp=tp * 2).weight_bytes
    assert two <= one

    # and the GEMM weight traffic of a decode step per GPU does not grow either
    def gemm_weight_elems(t: int) -> float:
        shape = PassShape("decode", np.array(1.0), np.array(64.0), np.array(float(t)))
        return sum(float(op.k * op.n) * op.count for op in forward_ops(model, shape) if isinstance(op, GemmOp))

    assert gemm_weight_elems(tp * 2) <= gemm_weight_elems(tp) * (1 + 1e-12)


@settings(deadline=None, max_examples=30)
@given(name=model_names, tp=tps, batch=st.integers(1, 256), context=st.integers(1, 32768))
def test_decode_never_beats_reading_active_weights_at_peak(name: str, tp: int, batch: int, context: int) -> None:
    model = MODELS[name]
    step = float(decode_step_s(model, GPU, TABLE, batch=batch, context=context, tp=tp, data=DATA)[()])  # type: ignore[arg-type]
    # every step reads at least the weights one token activates (top-k experts), sharded over tp, at peak;
    # routed experts at the bytes the checkpoint stores them in (gpt-oss: MXFP4, 0.53 B)
    c = model.layer_param_counts()
    routed = c.num_moe_layers * model.moe.experts_per_token * c.expert if model.moe else 0
    active_bytes = (model.active_non_embedding_params() - routed) * 2 + routed * model.expert_bytes(2.0)
    lower = active_bytes / tp / GPU.memory_bytes_per_s
    assert step >= lower * 0.999
