"""FP8 activation quantisation outside the measured tables (pdplan.perf.act_quant): hand-worked bytes and times,
and which passes carry it."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import perf_data
from pdplan.perf import roofline
from pdplan.perf.act_quant import DISPATCH_QUANT_OP, dispatch_quant_ops, group_quant_bytes
from pdplan.perf.op_types import Op, PassShape, Phase
from pdplan.perf.ops import forward_ops
from pdplan.perf.ops_moe import parallel_fields
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time

FP8 = Precision(weight_bytes=1.0, act_bytes=2.0, kv_bytes=1.0)


def test_group_quant_bytes_hand_worked() -> None:
    # one token of 128 BF16 elements: read 256 B, write 128 FP8 B + one fp32 scale (4 B) = 388 B
    assert float(group_quant_bytes(1, 128, 2.0)) == pytest.approx(388.0)
    # DeepSeek-V3 dispatch input, 16,384 tokens of hidden 7,168: 117,440,512 elements x 3.03125 B = 355,991,552 B
    assert float(group_quant_bytes(16_384, 7_168, 2.0)) == pytest.approx(355_991_552.0)


def _ops(phase: Phase, dp: int, ep: float) -> list[Op]:
    model = open_catalog().model("deepseek-v3")
    tp = np.asarray(1.0)
    b, n = (np.asarray(32.0 * 4), np.asarray(4096.0)) if phase == "prefill" else (np.asarray(72.0 * 256), 2000.0)
    par = parallel_fields(tp, dp, ep)
    shape = PassShape(phase, b, np.asarray(n), tp, 2.0, 1.0, 1.0, **par)  # type: ignore[arg-type]
    return forward_ops(model, shape)


def test_only_the_wideep_prefill_dispatch_is_quantised_apart() -> None:
    prefill = _ops("prefill", 32, 32.0)
    (op,) = dispatch_quant_ops(prefill, 2.0, "deepgemm_wideep")
    # 4 prompts x 4,096 tokens per GPU = 16,384 tokens, once per MoE layer (58 of DeepSeek-V3's 61)
    assert op.name == DISPATCH_QUANT_OP
    assert op.kind == "elementwise"
    assert op.count == 58.0
    assert float(op.bytes) == pytest.approx(355_991_552.0)
    # the fused and CUTLASS tables time a BF16 input (quantisation inside); decode's low-latency dispatch casts in
    # its own kernel; no all-to-all (EP 1, or EP without attention DP), nothing to quantise before it
    assert dispatch_quant_ops(prefill, 2.0, "fused") == []
    assert dispatch_quant_ops(prefill, 2.0, "cutlass") == []
    assert dispatch_quant_ops(_ops("decode", 72, 72.0), 2.0, "deepgemm_wideep") == []
    assert dispatch_quant_ops(_ops("prefill", 1, 1.0), 2.0, "deepgemm_wideep") == []
    assert dispatch_quant_ops(_ops("prefill", 1, 8.0), 2.0, "deepgemm_wideep") == []


def _wide_prefill(kernel: str) -> tuple[float, float]:
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    pt = phase_time(
        model,
        gpu,
        table,
        phase="prefill",
        batch=32 * 4,
        tokens=4096,
        dp=32,
        ep=32,
        precision=FP8,
        moe_kernel=kernel,  # type: ignore[arg-type]
        data=perf_data(model, gpu, table, dp=32, ep=32),
    )
    quant = sum(float(op.time_s) for op in pt.ops if op.name == DISPATCH_QUANT_OP)
    return float(pt.time_s), quant


def test_priced_as_an_elementwise_kernel_hand_worked() -> None:
    # H100 SXM: 3.35 TB/s x elementwise memory fraction 0.8771, overhead 2.557 us (kernel table h100-sxm.yaml):
    # 355,991,552 B / 2.938285e12 B/s = 121.16 us + 2.557 us = 123.72 us per MoE layer, x 58 = 7.175 ms
    _, quant = _wide_prefill("deepgemm_wideep")
    assert quant == pytest.approx(58 * (355_991_552.0 / (3.35e12 * 0.8771) + 2.557e-6), rel=1e-9)


def test_the_pass_grows_by_exactly_the_quantisation(monkeypatch: pytest.MonkeyPatch) -> None:
    # without two-batch overlap the pass is a sum of ops: adding the kernel adds its time, nothing else moves
    with_s, quant = _wide_prefill("deepgemm_wideep")
    monkeypatch.setattr(roofline, "dispatch_quant_ops", lambda ops, act_bytes, kernel: [])
    without_s, none = _wide_prefill("deepgemm_wideep")
    assert none == 0.0
    assert with_s - without_s == pytest.approx(quant, rel=1e-9)
    assert _wide_prefill("fused")[1] == 0.0
