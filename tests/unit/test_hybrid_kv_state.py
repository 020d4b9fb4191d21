"""Fixed per-sequence state of hybrid models in the KV ceiling, worked by hand (ModelSpec.sequence_state_bytes,
pdplan.perf.memory, the decode KV bounds, the simulator's admission)."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.benchmark.colocated_loop import LoopInputs, admitted
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.io.serving_defaults import serving_defaults
from pdplan.perf.memory import instance_memory
from pdplan.queueing import LinearStepTime, decode_workload, kv_footprint
from pdplan.queueing.linear_capacity import fast_decode_capacity
from pdplan.serving.resolve import resolve
from pdplan.serving.roles import decode_perf
from pdplan.sim import DecodePool, Disaggregated, PrefillPool, Requests, simulate
from pdplan.transfer.kv import kv_bytes_per_request
from pdplan.transfer.kv_inputs import kv_shape_from_model

GIB = 2**30
ROOT = Path(__file__).resolve().parents[2]

# Qwen3-Next-80B-A3B (HF config): 48 layers, full attention every 4th -> 36 Gated DeltaNet layers; n_k 16, n_v 32,
# d_k = d_v = 128, conv kernel 4; fp32 recurrent state, bf16 conv state.
QWEN_RECURRENT = 32 * 128 * 128 * 4  # 2,097,152 B per layer
QWEN_CONV_QK = 2 * 16 * 128 * 3 * 2  # 24,576 B per layer (q and k channels, kernel - 1 = 3 taps)
QWEN_CONV_V = 32 * 128 * 3 * 2  # 24,576 B per layer
QWEN_STATE = 36 * (QWEN_RECURRENT + QWEN_CONV_QK + QWEN_CONV_V)  # 77,266,944 B
QWEN_KV_PER_TOKEN = 12 * 2 * (256 + 256) * 2  # 12 full layers x 2 KV heads x (d_k + d_v) x bf16 = 24,576 B

# MiMo-V2-Flash (HF config): 39 sliding-window layers of 8 KV heads, d_k 192, d_v 128, window 128; 9 global layers
# of 4 KV heads.
MIMO_WINDOW_PER_TOKEN = 39 * 8 * (192 + 128) * 2  # 199,680 B
MIMO_WINDOW = 128 * MIMO_WINDOW_PER_TOKEN  # 25,559,040 B
MIMO_KV_PER_TOKEN = 9 * 4 * (192 + 128) * 2  # 23,040 B


def test_qwen3_next_state_bytes_by_hand() -> None:
    model = open_catalog().model("qwen3-next-80b-a3b")
    assert QWEN_STATE == 77_266_944
    assert model.kv_bytes_per_token(2.0) == QWEN_KV_PER_TOKEN
    assert model.sequence_state_bytes(2.0) == QWEN_STATE
    assert model.sequence_state_bytes(2.0, tp=4) == QWEN_STATE / 4  # 32 value and 16 key heads split 4 ways
    # tp 32: value heads one per rank, the 16 key heads' conv channels held twice
    per_layer_tp32 = (QWEN_RECURRENT + QWEN_CONV_V) / 32 + QWEN_CONV_QK / 16
    assert model.sequence_state_bytes(2.0, tp=32) == pytest.approx(36 * per_layer_tp32)
    # a 1,000-token sequence on one GPU: state + 1,000 x 24,576
    assert model.sequence_cache_bytes(1000, 2.0) == QWEN_STATE + 24_576_000


def test_qwen3_next_capacity_in_sequences_by_hand() -> None:
    # TP 4 on 80 GiB: 2 KV heads -> each held twice (k = 2 x 24,576 per token per instance); the state is split
    # (S = 4 x 19,316,736 = 77,266,944 per instance), so a sequence costs s = S / k = 1,572 extra token slots.
    mem = instance_memory(open_catalog().model("qwen3-next-80b-a3b"), 80 * GIB, defaults=serving_defaults(), tp=4)
    assert float(mem.kv_bytes_per_token_instance[()]) == 2 * QWEN_KV_PER_TOKEN
    assert float(np.ravel(mem.state_bytes_per_seq_instance)[0]) == QWEN_STATE
    assert float(mem.state_tokens_per_seq) == 1572.0
    free = float(mem.kv_free_bytes[()]) * 4
    assert float(mem.max_sequences(4096)) == (free // (4096 * 2 * QWEN_KV_PER_TOKEN + QWEN_STATE))
    assert float(mem.max_sequences(4096)) == pytest.approx(float(mem.kv_capacity_tokens) // (4096 + 1572), abs=1)


def test_decode_perf_carries_the_state_slots() -> None:
    # the PrfaaS example's decode instance (Qwen3-Next, 4x H100 TP4, bf16 KV): s = 1,572 as above
    res = resolve(load_scenario(ROOT / "examples" / "prfaas-h200-h100.yaml"), open_catalog())
    assert res.hardware.decode is not None
    perf = decode_perf(res.hardware.decode, 30_000.0, 1024)
    # plus the mean empty slots of the last KV block, (b − 1)/2 at the engine's block (pdplan.perf.kv_blocks)
    assert perf.state_tokens_per_seq == 1572.0 + (res.hardware.decode.kv_block_tokens - 1) / 2
    assert decode_perf(res.hardware.decode, 30_000.0, 1024, 0.0).state_tokens_per_seq == 1572.0
    assert perf.kv_capacity_tokens / (30_000 + 1572) < perf.kv_capacity_tokens / 30_000


def test_mimo_window_kv_by_hand() -> None:
    model = open_catalog().model("mimo-v2-flash")
    assert model.window_kv_bytes_per_token(2.0) == MIMO_WINDOW_PER_TOKEN
    assert model.window_kv_bytes_per_sequence(2.0) == MIMO_WINDOW == 25_559_040
    assert model.kv_bytes_per_token(2.0) == MIMO_KV_PER_TOKEN
    assert model.sequence_cache_bytes(1000, 2.0) == MIMO_WINDOW + 1000 * MIMO_KV_PER_TOKEN
    # TP 8: window layers' 8 KV heads one per rank; the global layers' 4 KV heads held twice
    mem = instance_memory(model, 141e9, defaults=serving_defaults(), tp=8, weight_dtype_bytes=1.0)
    assert float(np.ravel(mem.state_bytes_per_seq_instance)[0]) == MIMO_WINDOW
    assert float(mem.state_tokens_per_seq) == pytest.approx(MIMO_WINDOW / (2 * MIMO_KV_PER_TOKEN))  # 554.67


def test_dense_and_mla_hold_no_state() -> None:
    cat = open_catalog()
    llama = cat.model("llama-3.1-70b")
    assert llama.sequence_state_bytes(2.0, tp=8) == 0.0
    assert llama.sequence_cache_bytes(1000, 2.0, tp=8) == 1000 * 327_680 / 8
    for name in ("llama-3.1-70b", "deepseek-v3"):
        mem = instance_memory(cat.model(name), 141e9, defaults=serving_defaults(), tp=8)
        assert mem.state_bytes_per_seq_instance == 0.0
        assert float(mem.state_tokens_per_seq) == 0.0


def test_transfer_sends_the_state_once() -> None:
    cat = open_catalog()
    qwen = kv_shape_from_model(cat.model("qwen3-next-80b-a3b"), 2.0)
    assert qwen.state_bytes_per_sequence == QWEN_STATE
    assert float(kv_bytes_per_request(1000, qwen)) == 1000 * QWEN_KV_PER_TOKEN + QWEN_STATE
    assert kv_shape_from_model(cat.model("mimo-v2-flash"), 2.0).state_bytes_per_sequence == MIMO_WINDOW


_WL = decode_workload([800.0, 2000.0], [50.0, 200.0], [0.6, 0.4])
_STEP = LinearStepTime(0.01, 2e-4, 3e-8)


def test_kv_bound_counts_state_as_shifted_context() -> None:
    # s = 500 slots per sequence: the KV bound equals the one of the workload with every context 500 longer,
    # while the step time (and so u) still sees the plain contexts.
    held = kv_footprint(_WL, 500.0)
    assert held.mean_work == pytest.approx(_WL.mean_work + 500.0 * _WL.mean_steps)
    with_state = fast_decode_capacity(
        _WL, _STEP, kv_capacity_tokens=2e5, max_num_seqs=1e9, utilisation_max=0.85, state_tokens_per_seq=500.0
    )
    plain = fast_decode_capacity(_WL, _STEP, kv_capacity_tokens=2e5, max_num_seqs=1e9, utilisation_max=0.85)
    assert with_state.utilisation_rate_per_s == plain.utilisation_rate_per_s
    assert with_state.kv_rate_per_s < plain.kv_rate_per_s
    # one request of 2,000 + 200 tokens + 500 state slots does not fit 2,600 tokens
    tiny = fast_decode_capacity(
        _WL, _STEP, kv_capacity_tokens=2600.0, max_num_seqs=1e9, utilisation_max=0.85, state_tokens_per_seq=500.0
    )
    assert tiny.max_rate_per_s == 0.0
    assert tiny.binding == "kv"


@settings(max_examples=25, deadline=None)
@given(
    st.floats(0.5, 16.0),
    st.floats(0.0, 8.0),
    st.floats(0.0, 3000.0),
    st.floats(0.0, 3000.0),
)
def test_capacity_never_rises_with_the_state(b_lo: float, extra: float, s_lo: float, ds: float) -> None:
    # sequences that fit (memory) and the KV-bound rate (queueing) are non-increasing in the fixed state
    model = open_catalog().model("qwen3-next-80b-a3b")
    seqs = []
    for b in (b_lo, b_lo + extra):
        la = model.linear_attention
        assert la is not None
        bigger = model.model_copy(update={"linear_attention": la.model_copy(update={"state_dtype_bytes": b})})
        seqs.append(float(instance_memory(bigger, 80 * GIB, defaults=serving_defaults(), tp=4).max_sequences(4096)))
    assert seqs[1] <= seqs[0]
    rates = [
        fast_decode_capacity(
            _WL, _STEP, kv_capacity_tokens=2e5, max_num_seqs=1e9, utilisation_max=0.85, state_tokens_per_seq=s
        ).max_rate_per_s
        for s in (s_lo, s_lo + ds)
    ]
    assert rates[1] <= rates[0] * (1 + 1e-9)
    loops = [
        admitted(LoopInputs(_STEP, 0.05, 1000.0, 101.0, 4000, 256, 2e5, True, 0.0, 0.0, state_tokens_per_seq=s), 512)
        for s in (s_lo, s_lo + ds)
    ]
    assert loops[1] <= loops[0]


def test_simulator_admission_reserves_the_state() -> None:
    # footprints l + n = 13 and 12, plus 10 state slots each: 40 tokens hold both only without the state
    req = Requests.of([10, 10], [3, 2])
    admits = []
    for state in (0.0, 10.0):
        dep = Disaggregated(
            PrefillPool(2, routing="round-robin", service_s=[1.0, 1.0]),
            DecodePool(
                1,
                step_time_s=lambda b, k: np.full(np.shape(b), 0.1),
                max_batch=4,
                kv_capacity_tokens=40.0,
                state_tokens_per_seq=state,
            ),
        )
        res = simulate([0.0, 0.0], req, dep, np.random.default_rng(0), warmup_fraction=0.0)
        admits.append(res.decode_admit_s.tolist())
    assert admits[0] == pytest.approx([1.0, 1.0])
    assert admits[1] == pytest.approx([1.0, 1.3])  # r1 waits for r0 (3 steps of 0.1 s)
