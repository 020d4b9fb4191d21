"""SGLang's DeepSeek-V3 large-scale EP run on H100 (LMSYS blog 2025-05-05, ``blog/2025-05-05-large-scale-ep.md``;
MISSION_FEATURES.md §5.2), phase by phase, within 20 %:

* prefill on 4 nodes (DP32 attention, EP32): 57,674 / 54,543 / 50,302 input tok/s per node at 1K / 2K / 4K prompts,
  16,384 tokens per device per forward pass (the blog's profile batch);
* decode on 9 nodes (DP72 attention, EP72): 22,282 output tok/s per node at 2K input, 256 sequences per device.

Both with FP8 weights (DeepSeek-V3's block-FP8 checkpoint), FP8 KV, 32 redundant EPLB experts (288 slots), DeepEP
normal mode for prefill and low-latency mode for decode. The published runs also used two-batch overlap and EPLB,
which pdplan does not model (its experts are balanced, its all-to-all not overlapped). Where pdplan misses, the gap is
recorded as a strict xfail with the measured figure, not tuned away: a strict xfail that starts to pass fails the
suite, so the record is updated when the MoE kernel and all-to-all fits move the numbers.
"""

from __future__ import annotations

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.perf.roofline import Precision, phase_time

TOLERANCE = 0.20
FP8 = Precision(weight_bytes=1.0, act_bytes=2.0, kv_bytes=1.0)
TOKENS_PER_DEVICE = 16_384
GPUS_PER_NODE = 8


def _prefill_tok_s_per_node(isl: int) -> float:
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    prompts = 32 * (TOKENS_PER_DEVICE // isl)
    pt = phase_time(
        model, gpu, table, phase="prefill", batch=prompts, tokens=isl, tp=1, dp=32, ep=32, precision=FP8, detail=False
    )
    return TOKENS_PER_DEVICE * GPUS_PER_NODE / float(pt.time_s)


def _decode_tok_s_per_node() -> float:
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    pt = phase_time(
        model, gpu, table, phase="decode", batch=72 * 256, tokens=2000, tp=1, dp=72, ep=72, precision=FP8, detail=False
    )
    return 256 * GPUS_PER_NODE / float(pt.time_s)


PREFILL_GAP = (
    "measured 2026-12-01: pdplan 19.0k / 18.7k / 18.3k tok/s per node (-67 % / -66 % / -64 %): the experts are priced "
    "with the fused-MoE fit to vLLM's Triton kernel (3.35 s of the 6.9 s pass; SGLang runs DeepGEMM) and the fitted "
    "DeepEP all-to-all (2.59 s) is not overlapped (SGLang runs two-batch overlap) nor EPLB-balanced"
)
DECODE_GAP = (
    "measured 2026-12-01: pdplan 9.0k tok/s per node (-59 %): experts 100 ms (vLLM Triton fused-MoE fit), the "
    "low-latency all-to-all 60 ms not overlapped (SGLang runs two-batch overlap), MLA decode attention 49 ms as "
    "128-head MHA until the MLA kernel fit lands"
)


@pytest.mark.xfail(strict=True, reason=PREFILL_GAP)
@pytest.mark.parametrize(("isl", "published"), [(1024, 57_674), (2048, 54_543), (4096, 50_302)])
def test_prefill_ep32_per_node(isl: int, published: float) -> None:
    assert _prefill_tok_s_per_node(isl) == pytest.approx(published, rel=TOLERANCE)


@pytest.mark.xfail(strict=True, reason=DECODE_GAP)
def test_decode_ep72_per_node() -> None:
    assert _decode_tok_s_per_node() == pytest.approx(22_282, rel=TOLERANCE)


def test_wide_ep_beats_tp8_per_gpu() -> None:
    """The blog's direction, which pdplan must keep: wide EP decodes more tokens per GPU than TP (published up to 5x
    vs TP16); here DP72/EP72 at 256 sequences per GPU against one TP8 instance at 256 (measured 2026-12-01: 2.1x)."""
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    tp8 = phase_time(model, gpu, table, phase="decode", batch=256, tokens=2000, tp=8, precision=FP8, detail=False)
    tp8_per_gpu = 256 / float(tp8.time_s) / 8
    assert _decode_tok_s_per_node() / GPUS_PER_NODE > tp8_per_gpu
