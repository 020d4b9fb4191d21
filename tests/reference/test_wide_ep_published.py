"""SGLang's DeepSeek-V3 large-scale EP run on H100 (LMSYS blog 2025-05-05, ``blog/2025-05-05-large-scale-ep.md``;
docs/mission_features.md §5.2), phase by phase, within 20 %:

* prefill on 4 nodes (DP32 attention, EP32): 57,674 / 54,543 / 50,302 input tok/s per node at 1K / 2K / 4K prompts,
  16,384 tokens per device per forward pass (the blog's profile batch);
* decode on 9 nodes (DP72 attention, EP72): 22,282 output tok/s per node at 2K input, 256 sequences per device.

Both with FP8 weights (DeepSeek-V3's block-FP8 checkpoint), FP8 KV, 32 redundant EPLB experts (288 slots), DeepEP
normal mode for prefill and low-latency mode for decode, DeepGEMM experts and two-batch overlap: pdplan prices them
as that run used them, the experts with the SGLang profile's kernel rule (DeepGEMM wide-EP fit,
:mod:`pdplan.perf.moe_wideep`) and the pass as two overlapped micro-batches (:mod:`pdplan.perf.two_batch_overlap`).
EPLB's leftover imbalance: in prefill the SGLang profile's ``eplb_prefill_routing`` law (``sglang-eplb-prefill``,
what ``evaluate`` / ``optimize`` price for a scenario with redundant experts), in decode uniform routing (each GPU the
mean load T·k/ep). The published figures are
checks, never fit targets: nothing in pdplan was tuned to them.

Measured 2026-12-02 (before: fused-MoE fit, no overlap: 19.0k / 18.7k / 18.3k and 9.0k, -64...-67 % and -59 %):
decode 25.2k (+13 %; 25.1k, +12.5 %, since the MoE router and LM head are priced in BF16). Before the MLA kernel fit
the decode step was 92 ms (22.1k, -1 %), half of it MLA attention
priced as 128-head attention over the latent; the fitted MLA module (vLLM's FlashMLA rows) brought the kernels to
67.3 ms, and with the whole 60 ms low-latency all-to-all hidden by an ideal two-resource overlap the step was 67.9 ms
(30.2k, +35 %, a strict xfail). SGLang's decode TBO hides each transfer only behind the stages its one-stream
schedule puts between send and receive (``pdplan/data/two_batch_overlap.yaml``, from SGLang's
``operations_strategy.py``): per MoE layer and half batch the 128-token dispatch (184 us) has 126 us of cover (own
shared experts, the other half's attention projections) and the combine (346 us) 283 us (the other half's MLA core,
o_proj, router), so 14.1 ms of the all-to-all stays on the stream: 81.4 ms per step. The same model gives TBO -27 %
at 32 sequences per GPU (published -27 %) and +33 % at 256 (published +25.5 %).

**Prefill** (16,384 tokens per GPU per forward: the blog's profile batch, and ``--chunked-prefill-size 524288`` =
32 x 16,384 in the prefill commands of the reproduction thread, sglang issue #6017; 16 / 8 / 4 prompts per GPU at
1K / 2K / 4K). Until 2026-12-02 pdplan gave 48.9k / 48.9k / 48.8k (-15 / -10 / -3 %) only through a compensating
error: it put one network copy per remote GPU on the NIC (5.38 per token at EP32), where DeepEP's normal kernels send
one per remote *node* and forward over NVLink inside it (2.70; ``pdplan/perf/moe_a2a.py``), so the all-to-all was
2x high and bound the pass. Priced as DeepEP moves the bytes, with the SMs its kernels hold, that gave 74.5k / 72.8k /
69.5k (+29 / +33 / +38 %): EPLB's leftover imbalance (AIConfigurator's SGLang rule, ``sglang-eplb-prefill``: power
law 0.6 at 0.8 of the tokens) then left the busiest GPU only 1.04x the mean load, because pdplan's power-law routing
took the busiest of 32 ranks as the rank holding the largest expert plus 7 average others (1.30x the mean at 0.8 T),
where the benchmark that measured the law keeps the rank of most tokens, the largest of 32 sums of 8 draws (1.81x;
the closed form priced the ``power_law_0.6`` rows of ``wideep_context_moe_sglang.csv`` at EP32 / 524,288 tokens at
17.4 ms against 24.0 measured). The routing now takes the expected maximum of the ep sums (Blom's normal order
statistic with the Cornish-Fisher skewness term from the law's closed-form moments, ``pdplan/perf/moe_routing.py``:
1.80x; those rows 22.6 ms, the power-law rows' closed-form cell 5.5 / 14.3 % median / P90 on H100 prefill,
``docs/kernel_accuracy.md``; nothing fitted). The pass (ms per forward, two micro-batches of 8,192 tokens per GPU;
per layer and half in brackets) at 1K / 2K / 4K, before -> now:

* attention / MLA (projections, core, RoPE) 648 / 688 / 774 (5.3 / 5.6 / 6.3 ms), unchanged; routed experts
  (DeepGEMM fit, the busiest GPU 1.04 -> 1.44x the mean load) 704 -> 966 (6.07 -> 8.33 ms); shared experts 99;
  router 24; the 3 dense FFN layers 34; norms, embedding, LM head 41: compute 1,550 / 1,590 / 1,676 -> 1,812 /
  1,852 / 1,937 (c = 14.9 / 15.2 / 15.9 ms per layer and half);
* dispatch 447 + combine 865 (3.85 + 7.46 ms per MoE layer and half: the NIC binds at 0.855 of 50 GB/s, NVLink
  forwarding 1.7 + 2.9 ms): 11.3 ms < c, so TBO hides all but the pipeline fill, 11 ms exposed;
* SM split: DeepEP's normal kernels hold 20 of 132 SMs while a transfer runs, +199 ms;
* SGLang host time: 0 (the launch order the blog describes hides the CPU-blocking dispatch; the fitted SGLang step
  overhead is 0 ms).

Total 1,760 / 1,800 / 1,886 -> 2,022 / 2,062 / 2,147 ms: 64.8k / 63.6k / 61.0k tok/s per node, +12.4 / +16.5 /
+21.3 % over the published 57,674 / 54,543 / 50,302: 1K and 2K within 20 %, 4K still a strict xfail. (With the MoE
router and the LM head priced in BF16, as the engines run them, and the day's kernel refits: 65.3k /
64.0k / 61.5k, +13.2 / +17.4 / +22.3 %; perfect-EPLB 71.1k, +19.8 %; decode 25.1k, +12.5 %. With the FP8
quantisation of the dispatch input, the one activation quantisation no measured table holds (SGLang's normal-mode
dispatcher runs it before DeepEP; 0.12 ms per MoE layer, ``pdplan/perf/act_quant.py``): 65.1k / 63.8k / 61.3k,
+12.8 / +17.0 / +21.8 %; perfect-EPLB 70.8k, +19.4 %; decode unchanged.) The blog's own
simulated perfect-EPLB run at 4K (random expert choice, 59,337) against pdplan's uniform routing: 70.5k, +18.8 %
(passing, with little margin). A check of the imbalance law, not a fit: pdplan's perfect / EPLB ratio at 4K is now
70.5k / 61.0k = 1.155, the blog's 59,337 / 50,302 = 1.180 (before: 1.014). What is left is the compute chain, too
fast by about the same ~19 % with and without the imbalance: a 16K-token forward at 4K takes pdplan 2.15 s with
EPLB's imbalance (SGLang: 2.61 s) and 1.86 s with uniform routing (SGLang's perfect-EPLB run: 2.21 s; DeepSeek's own
H800 profile: 2.09 s). Not modelled, each with a
source but no number to price it by: the all-to-all running slower under TBO than alone (the blog: "Both DeepSeek
and SGLang have a communication time slower than unit test results, while the latter is achievable when disabling
TBO"), HBM contention between the transfers and the GEMMs ("noisy neighbor effects during overlap"), SGLang's MLA
prefill kernel (priced with vLLM's FLASH_ATTN module fit: AIConfigurator 0.12.0's MoE data holds no SGLang MLA rows,
only vLLM 0.24's FLASH_ATTN / FLASH_ATTN_MLA / FLASHMLA modules), EPLB's imbalance on the all-to-all (the busiest GPU
receives 1.44x the mean pairs, but its NIC traffic is spread over the node's 8 NICs by DeepEP's node-level copies,
so only the NVLink forwarding, 4.6 ms of the 11.3 per layer and half, would carry it), group-limited routing
(DeepSeek-V3 picks 4 of 8 expert groups: fewer nodes per token, only a smaller, already hidden all-to-all), and
SGLang running the 3 dense layers on the whole batch outside TBO (``DeepseekV2Model.forward``:
``normal_num_layers = first_k_dense_replace``; no change at 16K tokens).

Where the 4K gap sits (2026-12-02, the blog's own kernel breakdown, ``BLOG_4K_MS_PER_LAYER`` below): per layer at
4K pdplan prices the attention core 9.4 ms, the dense GEMMs 5.2, the routed experts 15.8 (the busiest GPU; 11.1
uniform), the elementwise kernels 1.2 (1.1 + the dispatch quantisation 0.12) and the all-to-all's exposed part with
DeepEP's SM share 3.4: 35.0 ms, where
SGLang measured 42.8 (attention core 5.6, GEMM 8.8, MoE 10.4 as a mean over GPUs, other kernels 6.1, compute-stream
bubble 11.2). Attention plus GEMMs agree (14.6 against 14.4 ms; perfect EPLB 15.9), and so do the experts under
uniform routing (11.1 against 12.2 ms); the unpriced part is SGLang's "Other Kernels", 6.1 ms per layer against
pdplan's 1.2 (DeepSeek's own H800 profile: 5.1): 0.30 of the 0.47 s by which pdplan's 4K forward is short (with
perfect EPLB 0.33 of 0.36 s; the rest of the default run's gap is its imbalance bubble, 21.6 ms per layer of
experts and bubble against pdplan's 19.3 of busiest-GPU experts and exposed all-to-all). The FP8 activation
quantisation before each block-FP8 GEMM, one of SGLang's other kernels, is not what is missing: the tables that
price those GEMMs time a BF16 input with the quantisation inside (``pdplan/perf/act_quant.py`` quotes the
collectors), so pdplan's dense-GEMM 5.2 ms already holds 0.97 ms of it per layer (the ``fp8`` GEMM entry's fitted
quantisation term, MLA projections at the module fit's ``gemm_scale``), booked under GEMM where SGLang's chart books
it under "Other Kernels"; the one quantisation no table holds, the dispatch input's, is 0.12 ms. By bytes alone all
seven of SGLang's per-layer quantisations (inputs of q_a/kv_a 7,168, q_b 1,536, kv_b 512, o_proj 16,384, shared
gate_up 7,168 and down 2,048, dispatch 7,168: 41,984 elements x 3.03 B per token) move 2.09 GB per layer at 16,384
tokens, 0.71 ms at the elementwise rate: the rest of the 6.1 ms is other kernels. The
prompt-length growth (1/50,302 - 1/57,674 = 2.54 us per token and node from 1K to 4K, pdplan 0.95 us) is not an
under-priced attention alone: SGLang's attention core is 5.6 ms per layer at 4K, 0.34 s of the forward (the MHA
form; ``test_prefill_4k_attention_and_gemms_per_layer``). At FlashAttention-3's measured rates
(``context_attention.csv``, head dim 128: 224 TFLOP/s at 1K, 468 at 4K) its growth from 1K is ~0.16 s per forward
(pdplan's: 0.12 s), and even a 1K attention at the BF16 peak would leave no more than 0.30 s; the rest of the
measured 0.33 s comes from kernels that the blog's only breakdown, at 4K, cannot separate.
"""

from __future__ import annotations

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.perf_data import perf_data, routing_law
from pdplan.perf.moe_wideep import moe_kernel_for
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import PhaseTime, phase_time

TOLERANCE = 0.20
FP8 = Precision(weight_bytes=1.0, act_bytes=2.0, kv_bytes=1.0)
TOKENS_PER_DEVICE = 16_384
GPUS_PER_NODE = 8


def _sglang_moe(ep: int) -> dict[str, object]:
    """The expert kernel the SGLang profile's rule picks on H100 at this EP, with two-batch overlap as the run had."""
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    data = perf_data(model, gpu, table, tp=1, dp=ep, ep=ep, two_batch_overlap=True)
    kernel = moe_kernel_for(c.engine("sglang").moe, ep, FP8.weight_bytes, table, data)
    assert kernel == "deepgemm_wideep"
    return {"moe_kernel": kernel, "two_batch_overlap": True, "data": data}


def _prefill_pass(isl: int, routing: str | None = None, *, detail: bool = False) -> PhaseTime:
    """The forward of 16,384 tokens per GPU of ``isl``-token prompts, experts routed by the named law
    (``pdplan/data/moe_routing.yaml``; None: the SGLang profile's EPLB prefill law, as serving prices a scenario with
    redundant experts)."""
    c = open_catalog()
    if routing is None:
        moe = c.engine("sglang").moe
        assert moe is not None
        assert moe.eplb_prefill_routing == "sglang-eplb-prefill"
        routing = moe.eplb_prefill_routing
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    prompts = 32 * (TOKENS_PER_DEVICE // isl)
    return phase_time(
        model,
        gpu,
        table,
        phase="prefill",
        batch=prompts,
        tokens=isl,
        tp=1,
        dp=32,
        ep=32,
        precision=FP8,
        detail=detail,
        routing=routing_law(routing),
        **_sglang_moe(32),  # type: ignore[arg-type]
    )


def _prefill_tok_s_per_node(isl: int, routing: str | None = None) -> float:
    """Input tokens per second per node at 16,384 tokens per GPU (:func:`_prefill_pass`)."""
    return TOKENS_PER_DEVICE * GPUS_PER_NODE / float(_prefill_pass(isl, routing).time_s)


def _decode_tok_s_per_node() -> float:
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    pt = phase_time(
        model,
        gpu,
        table,
        phase="decode",
        batch=72 * 256,
        tokens=2000,
        tp=1,
        dp=72,
        ep=72,
        precision=FP8,
        detail=False,
        **_sglang_moe(72),  # type: ignore[arg-type]
    )
    return 256 * GPUS_PER_NODE / float(pt.time_s)


_PREFILL_FAST_4K = (
    "pdplan's prefill compute chain is too fast (module docstring): measured 2026-12-02 61.3k tok/s per node at 4K, "
    "+21.8 % (1K / 2K: 65.1k / 63.8k, +12.8 / +17.0 %, passing); the perfect-EPLB run is +19.4 % the same way. The "
    "blog's 4K kernel breakdown puts the gap in SGLang's 'Other Kernels' (6.1 ms per layer, pdplan 1.1: "
    "test_prefill_4k_other_kernels_per_layer); attention + GEMMs and the experts agree within 10 %"
)


@pytest.mark.parametrize(
    ("isl", "published"),
    [
        pytest.param(1024, 57_674),
        pytest.param(2048, 54_543),
        pytest.param(4096, 50_302, marks=pytest.mark.xfail(strict=True, reason=_PREFILL_FAST_4K)),
    ],
)
def test_prefill_ep32_per_node(isl: int, published: float) -> None:
    """Published 57,674 / 54,543 / 50,302; pdplan 65.1k / 63.8k / 61.3k (+12.8 / +17.0 / +21.8 %, module docstring:
    routed experts 966 ms of a 2.02-2.15 s forward at the busiest GPU's 1.44x the mean load)."""
    assert _prefill_tok_s_per_node(isl) == pytest.approx(published, rel=TOLERANCE)


def test_prefill_ep32_perfect_eplb_4k() -> None:
    """The blog's profile run with simulated perfect EPLB (random expert selection): 59,337 tok/s per node at 16,384
    tokens per GPU of 4,096-token prompts; pdplan with uniform routing: 70.8k (+19.4 %), inside 20 % by a small
    margin (module docstring: the compute chain is too fast)."""
    assert _prefill_tok_s_per_node(4096, "uniform") == pytest.approx(59_337, rel=TOLERANCE)


# The blog's "Prefill Time Breakdown" (``public/images/blog/large_scale_ep/profile-prefill.png`` in
# lm-sys/lm-sys.github.io, the figure under "Detail Breakdown"): scaled mean ms per layer of the 4K profile run,
# 16,384 tokens per GPU; "Overall" x 61 layers is the forward (SGLang 42.8 ms x 61 = 2.61 s = 16,384 x 8 / 50,302).
# Read off the chart at its pixels (0 ms at x = 197 px, 10 ms per 154.2 px; +-0.1 ms). "compute" is the attention
# core plus the GEMM bar (the dense GEMMs: MLA projections, shared experts, router, dense layers); "other" the
# "Other Kernels" bar; "experts" the "MoE" bar.
BLOG_4K_MS_PER_LAYER = {
    "sglang": {"attention_core": 5.6, "gemm": 8.8, "experts": 10.4, "other": 6.1, "overall": 42.8},
    "sglang_perfect_eplb": {"attention_core": 6.4, "gemm": 9.5, "experts": 12.2, "other": 6.6, "overall": 36.3},
}
_GEMM_OPS = (
    "attn.qkv_a_proj",
    "attn.q_b_proj",
    "attn.kv_b_proj",
    "attn.o_proj",
    "mlp.gate_up",
    "mlp.down",
    "moe.shared_gate_up",
    "moe.shared_down",
    "moe.router",
    "lm_head",
)
_OTHER_OPS = ("norm", "activation", "moe.shared_activation", "rotary", "embedding", "moe.dispatch_quant")
_RUNS = {"sglang": None, "sglang_perfect_eplb": "uniform"}


def _ms_per_layer(run: str, names: tuple[str, ...]) -> float:
    """pdplan's ms per layer (the forward's ops summed over ``names``, / 61 layers as the blog's bars) at 4K."""
    pt = _prefill_pass(4096, _RUNS[run], detail=True)
    layers = open_catalog().model("deepseek-v3").num_layers
    return sum(float(op.time_s) for op in pt.ops if op.name in names) * 1e3 / layers


@pytest.mark.parametrize("run", ["sglang", "sglang_perfect_eplb"])
def test_prefill_4k_attention_and_gemms_per_layer(run: str) -> None:
    """The attention core and the dense GEMMs, per layer at 4K, against the blog's kernel breakdown (5.6 + 8.8 =
    14.4 ms; perfect EPLB 6.4 + 9.5 = 15.9 ms). pdplan: 9.4 + 5.2 = 14.6 ms (+1 / -8 %). The two are compared
    together: pdplan's attention core is the vLLM module fit's (``pdplan/perf/mla.py``), which holds part of the
    projections' time (its ``gemm_scale`` 0.49 on H100 FP8), so the split between them is not identified.
    The attention is MHA over the decompressed heads, as SGLang runs a new prompt: 5.6 ms is 2.75 TFLOP per layer
    (16,384 x 128 heads x 4,096 x (192 + 128)) at 490 TFLOP/s, FlashAttention-3's measured class
    (``context_attention.csv``: 470 TFLOP/s at head dim 128, 4K); the absorbed form over the 512 + 64 latent
    (3.4x the FLOPs) would need 1.67 PFLOP/s, above the BF16 peak, so it is not what ran."""
    blog = BLOG_4K_MS_PER_LAYER[run]
    priced = _ms_per_layer(run, ("attn.core", *_GEMM_OPS))
    assert priced == pytest.approx(blog["attention_core"] + blog["gemm"], rel=TOLERANCE)


def test_prefill_4k_experts_per_layer_perfect_eplb() -> None:
    """The routed experts per layer at 4K under uniform routing (the blog's simulated perfect EPLB): "MoE" 12.2 ms;
    pdplan's DeepGEMM wide-EP fit 11.1 ms (-9 %). (The default run's 10.4 ms is a mean over GPUs whose imbalance
    shows as its 11.2 ms compute-stream bubble; pdplan prices the busiest GPU instead, so it is not compared.)"""
    priced = _ms_per_layer("sglang_perfect_eplb", ("moe.experts",))
    assert priced == pytest.approx(BLOG_4K_MS_PER_LAYER["sglang_perfect_eplb"]["experts"], rel=TOLERANCE)


_OTHER_KERNELS = (
    "pdplan prices the elementwise kernels of a DeepSeek-V3 prefill layer (RMSNorms, RoPE, SiLU, embedding, the "
    "dispatch input's FP8 quantisation) at 1.2 ms per layer at 16,384 tokens per GPU; the blog's breakdown shows "
    "6.1 ms of 'Other Kernels' in SGLang (6.6 with perfect EPLB; DeepSeek's own H800 profile 5.1). The FP8 "
    "quantisation before each block-FP8 GEMM is priced inside the GEMM prices (0.97 ms per layer: their tables time "
    "a BF16 input, pdplan/perf/act_quant.py); the other kernels SGLang runs there (the copies that assemble q and k "
    "for the MHA kernel, residual adds, top-k, the two-batch split) have no rows in AIConfigurator's data, so they "
    "stay unpriced: the chart's 4.9 ms per layer more (3.9 once the quantisation in pdplan's GEMMs is moved over; "
    "0.30 s of the 0.47 s by which the 4K forward is short) is most of the prefill gap of test_prefill_ep32_per_node"
)


@pytest.mark.xfail(strict=True, reason=_OTHER_KERNELS)
@pytest.mark.parametrize("run", ["sglang", "sglang_perfect_eplb"])
def test_prefill_4k_other_kernels_per_layer(run: str) -> None:
    """The blog's "Other Kernels" bar at 4K (6.1 / 6.6 ms per layer) against pdplan's elementwise ops (1.2 ms)."""
    assert _ms_per_layer(run, _OTHER_OPS) == pytest.approx(BLOG_4K_MS_PER_LAYER[run]["other"], rel=TOLERANCE)


def test_decode_ep72_per_node() -> None:
    """Decode 22,282 tok/s per node (LMSYS blog 2025-05-05, docs/mission_features.md §5.2): 256 sequences per GPU at
    2,000
    tokens of context, EP72 / DP72 over 9 nodes. pdplan: 25.1k (+12.5 %). Left out, each would lower the figure: EPLB's
    residual imbalance (pdplan assumes each GPU carries the mean load), the GPU time of DeepEP's send/receive kernels
    and SGLang's per-step host work (fitted 0 on the colocated H100 runs)."""
    assert _decode_tok_s_per_node() == pytest.approx(22_282, rel=TOLERANCE)


def test_wide_ep_beats_tp8_per_gpu() -> None:
    """The blog's direction, which pdplan must keep: wide EP decodes more tokens per GPU than TP (published up to 5x
    vs TP16); here DP72/EP72 at 256 sequences per GPU against one TP8 instance at 256 (the TP8 instance with the
    fused-MoE kernel, as the SGLang rule picks at EP 1; measured 2026-12-02: 5.9x)."""
    c = open_catalog()
    model, gpu, table = c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm")
    tp8 = phase_time(model, gpu, table, phase="decode", batch=256, tokens=2000, tp=8, precision=FP8, detail=False)
    tp8_per_gpu = 256 / float(tp8.time_s) / 8
    assert _decode_tok_s_per_node() / GPUS_PER_NODE > tp8_per_gpu
