"""Two-batch overlap (pdplan.perf.two_batch_overlap): hand-worked step times, bounds, and the roofline hook."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import perf_data, two_batch_overlap_schedule
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.perf.two_batch_overlap import exposed_comm_s, staged_exposed_comm_s, tbo_time_s, window_s

FP8 = Precision(weight_bytes=1.0, act_bytes=2.0, kv_bytes=1.0)


def test_comm_bound_hand_worked() -> None:
    # L = 4, n = 2, C_half = 4 ms -> c = 1 ms, A_half = 4 ms -> a = 2 ms:
    # T = 2·[(4 − 2)·1 + 2·max(1, 2)] + min(1, 2) = 2·(2 + 4) + 1 = 13 ms; exposed 13 − 2·4 = 5 ms
    assert float(tbo_time_s(4e-3, 4e-3, 4, 2)) == pytest.approx(13e-3)
    assert float(exposed_comm_s(4e-3, 4e-3, 4, 2)) == pytest.approx(5e-3)


def test_compute_bound_hand_worked() -> None:
    # L = n = 4, C_half = 8 ms -> c = 2, A_half = 4 ms -> a = 1: T = 2·4·2 + 1 = 17 ms; only the fill (1 ms) shows
    assert float(tbo_time_s(8e-3, 4e-3, 4, 4)) == pytest.approx(17e-3)
    assert float(exposed_comm_s(8e-3, 4e-3, 4, 4)) == pytest.approx(1e-3)


def test_docstring_example() -> None:
    # L = 61, n = 58, C_half = 30.5 ms, A_half = 29 ms: c = a = 0.5 ms -> 2·(3·0.5 + 58·0.5) + 0.5 = 61.5 ms
    assert float(tbo_time_s(30.5e-3, 29e-3, 61, 58)) == pytest.approx(61.5e-3)


def test_sm_split_hand_worked() -> None:
    # docstring example with σ = 20/132: each MoE slot max(0.5, 0.5 + 0.5·20/132) = 0.57576 ms
    # T = 2·(3·0.5 + 58·0.57576) + 0.5 = 70.29 ms; exposed (a2a + slowed compute) 70.29 − 61 = 9.29 ms
    slot = 0.5 + 0.5 * 20 / 132
    want = 2 * (3 * 0.5 + 58 * slot) + 0.5
    assert float(tbo_time_s(30.5e-3, 29e-3, 61, 58, 20 / 132)) == pytest.approx(want * 1e-3)
    assert float(exposed_comm_s(30.5e-3, 29e-3, 61, 58, 20 / 132)) == pytest.approx((want - 61) * 1e-3)


def test_sm_split_hidden_when_comm_bound() -> None:
    # c = 1 ms <= (1 − σ)·a = 0.75·2 ms: the compute finishes inside the transfer, the slot stays a = 2 ms
    assert float(tbo_time_s(4e-3, 4e-3, 4, 2, 0.25)) == pytest.approx(float(tbo_time_s(4e-3, 4e-3, 4, 2)))


def test_prefill_comm_sms_is_deepep_default() -> None:
    assert two_batch_overlap_schedule().prefill_comm_sms == 20


@given(st.floats(1e-4, 1.0), st.floats(1e-4, 1.0), st.floats(0.0, 0.5), st.floats(0.0, 0.5))
def test_sm_split_never_helps(compute: float, comm: float, s1: float, s2: float) -> None:
    """Holding more SMs for the transfers never shortens the pass; σ = 0 is the two-resource form."""
    lo, hi = sorted((s1, s2))
    assert float(tbo_time_s(compute, comm, 61, 58, hi)) >= float(tbo_time_s(compute, comm, 61, 58, lo)) * (1 - 1e-12)


def test_no_comm_is_two_halves() -> None:
    assert float(tbo_time_s(3e-3, 0.0, 10, 8)) == pytest.approx(6e-3)


@given(
    st.floats(1e-4, 1.0),
    st.floats(1e-4, 1.0),
    st.integers(1, 100),
    st.integers(0, 100),
)
def test_bounds(compute: float, comm: float, layers: int, moe: int) -> None:
    """Never faster than either resource's own work (2·C_half, 2·A_half), never slower than both in series."""
    moe = max(1, min(moe, layers))
    t = float(tbo_time_s(compute, comm, layers, moe))
    assert t >= 2.0 * max(compute, comm) * (1 - 1e-12)
    assert t <= 2.0 * (compute + comm) * (1 + 1e-12)


def _decode(tbo: bool, batch: float, ep: int = 72) -> float:
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    pt = phase_time(
        model,
        gpu,
        table,
        phase="decode",
        batch=batch,
        tokens=2000,
        tp=1,
        dp=ep,
        ep=ep,
        precision=FP8,
        moe_kernel="deepgemm_wideep",
        two_batch_overlap=tbo,
        data=perf_data(model, gpu, table, dp=ep, ep=ep, two_batch_overlap=tbo),
    )
    assert float(pt.time_s) == pytest.approx(float(sum(op.time_s for op in pt.ops)) + pt.framework_overhead_s)
    return float(pt.time_s)


def test_roofline_overlap_helps_big_batches_only() -> None:
    """The blog's direction: TBO speeds decode at 256 sequences per GPU; at 2 per GPU the weights are read twice and
    the all-to-all is small, so it is slower (published −27 % at 32 tokens per GPU, +25.5 % at 256)."""
    assert _decode(True, 72 * 256) < _decode(False, 72 * 256)
    assert _decode(True, 72 * 2) > _decode(False, 72 * 2)


def test_no_ep_no_overlap() -> None:
    c = open_catalog()
    args = (c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm"))
    on = phase_time(*args, phase="decode", batch=64, tokens=2000, tp=8, precision=FP8, two_batch_overlap=True)
    off = phase_time(*args, phase="decode", batch=64, tokens=2000, tp=8, precision=FP8)
    np.testing.assert_allclose(on.time_s, off.time_s)


def test_staged_hand_worked() -> None:
    # the docstring example: n = 58, d = 184 µs vs W_d = 126 µs (58 µs stall), k = 346 µs vs W_k = 283 µs (63 µs):
    # 2·58·121 µs = 14.036 ms; fully covered transfers leave nothing
    assert float(staged_exposed_comm_s(184e-6, 346e-6, 126e-6, 283e-6, 58)) == pytest.approx(14.036e-3)
    assert float(staged_exposed_comm_s(90e-6, 150e-6, 126e-6, 283e-6, 58)) == 0.0


def test_window_sums_shares() -> None:
    per_layer = {"attn.core": np.asarray(160e-6), "attn.o_proj": np.asarray(90e-6), "norm": np.asarray(10e-6)}
    shares = {"attn.core": 1.0, "attn.o_proj": 1.0, "norm": 0.5, "attn.qkv_proj": 1.0}  # qkv_proj: absent, nothing
    assert float(window_s(per_layer, shares)) == pytest.approx(255e-6)


def test_decode_windows_split_the_layer() -> None:
    """SGLang's decode stages: each op sits in at most one window (norms and all-reduces split between the two)."""
    w = two_batch_overlap_schedule().decode_windows
    for name in set(w["dispatch_window"]) | set(w["combine_window"]):
        total = w["dispatch_window"].get(name, 0.0) + w["combine_window"].get(name, 0.0)
        assert 0.0 < total <= 1.0, name
    assert "moe.experts" not in w["dispatch_window"]
    assert "moe.experts" not in w["combine_window"]


@given(
    st.floats(0.0, 1e-3),
    st.floats(0.0, 1e-3),
    st.floats(0.0, 1e-3),
    st.floats(0.0, 1e-3),
)
def test_staged_bounds(d: float, k: float, wd: float, wk: float) -> None:
    """Never negative, never more than the transfers themselves, and more cover never exposes more."""
    exposed = float(staged_exposed_comm_s(d, k, wd, wk, 10))
    assert 0.0 <= exposed <= 2.0 * 10 * (d + k) * (1 + 1e-12)
    assert float(staged_exposed_comm_s(d, k, wd * 2.0, wk * 2.0, 10)) <= exposed


def test_decode_staged_between_ideal_and_serial() -> None:
    """The staged decode step lies between the ideal two-resource overlap and the half batches run back to back with
    their whole all-to-all (EP72 at 256 sequences per GPU)."""
    c = open_catalog()
    args = (c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm"))
    data = perf_data(*args, dp=72, ep=72, two_batch_overlap=True)
    kw = {"tokens": 2000, "tp": 1, "dp": 72, "ep": 72, "precision": FP8, "moe_kernel": "deepgemm_wideep", "data": data}
    staged = phase_time(*args, phase="decode", batch=72 * 256, two_batch_overlap=True, **kw)  # type: ignore[arg-type]
    comm = next(op for op in staged.ops if op.kind == "alltoall")
    compute = float(staged.time_s) - float(comm.time_s)
    assert float(comm.time_s) > 0.0  # the windows do not cover the 128-token transfers
    half = phase_time(*args, phase="decode", batch=72 * 128, **kw)  # type: ignore[arg-type]
    half_comm = float(next(op for op in half.ops if op.kind == "alltoall").time_s)
    assert float(staged.time_s) < compute + 2.0 * half_comm
