"""Roofline phase times on an ideal machine (every efficiency 1), worked by hand."""

import numpy as np
import pytest
from support.tables import ToyGpu, ideal_table

from pdplan.io.catalog import open_catalog
from pdplan.perf.op_types import AllReduceOp, GemmOp, PassShape, kv_heads_per_gpu
from pdplan.perf.ops import forward_ops
from pdplan.perf.ops_moe import expected_distinct_experts
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import decode_step_s, phase_time, prefill_time_s

GPU = ToyGpu()
TABLE = ideal_table()


@pytest.fixture(scope="module")
def llama70() -> object:
    return open_catalog().model("llama-3.1-70b")


@pytest.fixture(scope="module")
def llama8() -> object:
    return open_catalog().model("llama-3.1-8b")


def test_decode_batch1_is_reading_the_weights(llama70: object) -> None:
    # Llama-3.1-70B: every weight but the embedding table is read once per step (the embedding is only
    # gathered): (70.55e9 − 128256·8192) params x 2 B = 139.0 GB; at 1 TB/s that is 0.1390 s.
    # The KV read adds 1024 tokens x 327,680 B = 0.336 GB -> 0.34 ms; activations are tiny.
    read_params = llama70.total_params() - llama70.embedding_params()  # type: ignore[attr-defined]
    weights_s = read_params * 2 / 1e12
    kv_s = 1024 * 327_680 / 1e12
    t = decode_step_s(llama70, GPU, TABLE, batch=1, context=1024)  # type: ignore[arg-type]
    assert float(t[()]) == pytest.approx(weights_s + kv_s, rel=0.01)
    assert float(t[()]) >= weights_s  # never faster than reading the weights once at peak


def test_prefill_long_prompt_is_compute_bound(llama8: object) -> None:
    # 4096-token prompt on Llama-3.1-8B: GEMM FLOPs = 2·(non-embedding params)·s at 1 PFLOP/s,
    # causal attention FLOPs = 2·d·(s+1)·s·h per layer (kernel convention), at 1 PFLOP/s,
    # the LM head on the last token reads its 128256·4096·2 B weights at 1 TB/s,
    # elementwise traffic per layer s·(2 norms x 4·h + rotary 4·h + activation 3·I)·2 B and the embedding
    # gather s·h·2·2 B at 1 TB/s.
    s = 4096
    m = llama8
    gemm = 2 * m.non_embedding_params() * s / 1e15  # type: ignore[attr-defined]
    attn = m.num_layers * 2 * 128 * (s + 1) * s * 32 / 1e15  # type: ignore[attr-defined]
    head = 128256 * 4096 * 2 / 1e12
    elementwise = (32 * s * (12 * 4096 + 3 * 14336) * 2 + s * 4096 * 4) / 1e12
    expected = gemm + attn + head + elementwise
    result = phase_time(m, GPU, TABLE, phase="prefill", batch=1, tokens=s)  # type: ignore[arg-type]
    assert float(result.time_s[()]) == pytest.approx(expected, rel=0.03)
    assert result.bound() == "compute"


def test_tensor_parallel_shards_gemms_and_adds_two_allreduces_per_layer(llama70: object) -> None:
    shape = PassShape("decode", np.array(4.0), np.array(512.0), np.array(4.0))
    ops = {op.name: op for op in forward_ops(llama70, shape)}  # type: ignore[arg-type]
    # q: 64 heads x 128 / 4 = 2048 columns, k and v: 8 kv heads / 4 = 2 heads x 128 = 256 each
    qkv, down, allreduce = ops["attn.qkv_proj"], ops["mlp.down"], ops["tp.allreduce"]
    assert isinstance(qkv, GemmOp)
    assert isinstance(down, GemmOp)
    assert isinstance(allreduce, AllReduceOp)
    assert float(qkv.n) == 2048 + 2 * 256
    assert float(down.k) == 28672 / 4
    assert ops["tp.allreduce"].count == 2 * 80
    assert float(allreduce.bytes) == 4 * 8192 * 2  # 4 tokens x hidden x bf16


def test_gqa_kv_heads_replicate_beyond_n_kv(llama70: object) -> None:
    # 8 KV heads: TP 4 -> 2 per GPU, TP 8 -> 1, TP 16 -> still 1 (replicated)
    assert kv_heads_per_gpu(llama70, np.array([4.0, 8.0, 16.0])).tolist() == [2.0, 1.0, 1.0]  # type: ignore[arg-type]


def test_expected_distinct_experts() -> None:
    # E=8, k=2: one token touches exactly 2; many tokens touch all 8
    got = expected_distinct_experts(8, 2, np.array([1.0, 2.0, 1000.0]))
    # T=2: 8·(1 − (6/8)²) = 8·0.4375 = 3.5
    assert got.tolist() == pytest.approx([2.0, 3.5, 8.0])


def test_allreduce_cost_is_alpha_beta_ring() -> None:
    # one all-reduce of 1 MB over 4 GPUs at 100 GB/s bus bandwidth: 2·3/4 · 1e6 / 1e11 = 15 µs
    from pdplan.perf.kernels import allreduce_time_s

    assert float(allreduce_time_s(1e6, 4, GPU, TABLE)) == pytest.approx(15e-6)
    assert float(allreduce_time_s(1e6, 1, GPU, TABLE)) == 0.0


def test_fp8_weights_halve_decode_weight_time(llama70: object) -> None:
    bf16 = decode_step_s(llama70, GPU, TABLE, batch=1, context=16)  # type: ignore[arg-type]
    fp8 = decode_step_s(
        llama70,
        GPU,
        TABLE,
        batch=1,
        context=16,  # type: ignore[arg-type]
        precision=Precision(weight_bytes=1.0),
    )
    assert float(fp8[()]) == pytest.approx(float(bf16[()]) / 2, rel=0.02)


def test_pipeline_parallel_latency_and_stage_time(llama70: object) -> None:
    one = phase_time(llama70, GPU, TABLE, phase="prefill", batch=1, tokens=1024)  # type: ignore[arg-type]
    two = phase_time(llama70, GPU, TABLE, phase="prefill", batch=1, tokens=1024, pp=2)  # type: ignore[arg-type]
    # hand-off: 1024 tokens x 8192 x 2 B = 16.8 MB over 100 GB/s = 168 µs
    handoff = 1024 * 8192 * 2 / 1e11
    assert float(two.time_s[()]) == pytest.approx(float(one.time_s[()]) + handoff, rel=1e-9)
    assert float(two.stage_time_s[()]) == pytest.approx(float(one.time_s[()]) / 2 + handoff, rel=1e-9)


def test_vectorised_call_matches_scalar_calls(llama8: object) -> None:
    tokens = np.array([128.0, 1024.0, 8192.0])
    many = prefill_time_s(llama8, GPU, TABLE, batch=1, tokens=tokens, tp=2)  # type: ignore[arg-type]
    single = [float(prefill_time_s(llama8, GPU, TABLE, batch=1, tokens=t, tp=2)[()]) for t in tokens]  # type: ignore[arg-type]
    assert many.tolist() == pytest.approx(single)
