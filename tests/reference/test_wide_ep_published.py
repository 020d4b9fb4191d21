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
    "measured 2026-12-01: pdplan 27.5k / 27.0k / 26.2k tok/s per node (-52 % / -50 % / -48 %): the all-to-all "
    "is priced at AIConfigurator's speed of light per (token, expert) over 50 GB/s per GPU without DeepEP's "
    "node-limited dedup (a token crosses to at most 4 nodes) or two-batch overlap (3.3 s of the 4.8 s pass), and "
    "the grouped MoE GEMM still on dense-GEMM efficiencies until its fit lands"
)
DECODE_GAP = (
    "measured 2026-12-01: pdplan 15.6k tok/s per node (-30 %): the low-latency all-to-all (52 ms of 131 ms per step) "
    "is not overlapped (SGLang runs two-batch overlap) and MLA decode attention is priced as 128-head MHA (49 ms) "
    "until the MLA kernel fit lands"
)


@pytest.mark.xfail(strict=True, reason=PREFILL_GAP)
@pytest.mark.parametrize(("isl", "published"), [(1024, 57_674), (2048, 54_543), (4096, 50_302)])
def test_prefill_ep32_per_node(isl: int, published: float) -> None:
    assert _prefill_tok_s_per_node(isl) == pytest.approx(published, rel=TOLERANCE)


@pytest.mark.xfail(strict=True, reason=DECODE_GAP)
def test_decode_ep72_per_node() -> None:
    assert _decode_tok_s_per_node() == pytest.approx(22_282, rel=TOLERANCE)


def test_wide_ep_beats_tp8_per_gpu() -> None:
    """The blog's direction, which pdplan must keep: wide EP decodes several times more tokens per GPU than TP8
    (published up to 5x vs TP16); here DP72/EP72 at 256 sequences per GPU against one TP8 instance at 256."""
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    tp8 = phase_time(model, gpu, table, phase="decode", batch=256, tokens=2000, tp=8, precision=FP8, detail=False)
    tp8_per_gpu = 256 / float(tp8.time_s) / 8
    assert _decode_tok_s_per_node() / GPUS_PER_NODE > 3.0 * tp8_per_gpu
