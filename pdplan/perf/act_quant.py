"""FP8 activation quantisation that runs as its own kernel outside every measured table pdplan prices by.

A block-scaled FP8 GEMM (DeepSeek-V3's ``weight_block_size [128, 128]`` checkpoint) reads FP8 activations with one
fp32 scale per 128 elements of each token, so the engine quantises its BF16 input first (SGLang
``sglang_per_token_group_quant_fp8``, vLLM ``per_token_group_quant_fp8``, group 128). Where that pass is already
inside the measured call pdplan prices by, it is priced there; this module adds it only where no table holds it.
Which tables hold it (AIConfigurator 0.12.0 collectors, ai-dynamo/aiconfigurator ``collector/``):

* dense FP8 GEMMs (``gemm.csv`` ``fp8``, vLLM 0.24 ``CutlassFP8ScaledMMLinearKernel``): ``collector/vllm/
  collect_gemm.py`` times ``op.forward(x)`` on a BF16 ``x`` (``activation_scheme="dynamic"``), and vLLM's
  ``FP8ScaledMMLinearKernel.apply_weights`` quantises it inside (``if x.dtype != fp8_dtype: x_2d_q, x_s =
  self.quant_fp8(...)``, per-token dynamic scales on CUTLASS GPUs): the kernel table's fitted ``quant_*`` term of
  the ``fp8`` GEMM entry (:class:`pdplan.specs.kernel_table.GemmParams`) prices it for every FP8 projection, shared
  expert and dense MLP;
* the MLA module (``mla_*_module_vllm.csv``): ``collect_mla_module.py`` times ``attn_module.forward(positions,
  hidden_states, None)`` on BF16 ``hidden_states`` with ``Fp8Config(weight_block_size=[128, 128])`` linears: inside;
* vLLM's fused MoE (``moe_vllm.csv``, and the CUTLASS rows of :mod:`pdplan.perf.moe_cutlass`): ``collect_moe.py``
  times ``moe_module(hidden_states, router_logits)`` on a BF16 ``hidden_states``: inside;
* SGLang's wide-EP MoE (``wideep_*_moe_sglang.csv``, :mod:`pdplan.perf.moe_wideep`):
  ``collector/wideep/sglang/collect_deepep_moe.py`` casts the input to FP8 (``hidden_states_per_token_iter.to(
  torch.float8_e4m3fn)``) *before* ``start_event.record()`` and times ``moe_layer.experts.run_moe_core(
  dispatch_output)``, which holds the down projection's input quantisation (DeepGEMM runner
  ``_run_contiguous_gemm``) but not the layer's input quantisation; and the DeepEP normal-mode table
  (``deepep_normal_sglang.csv``, ``collector/wideep/sglang/deepep/test_internode.py``) times ``buffer.dispatch`` on
  an ``x_e4m3 = per_token_cast_to_fp8(x)`` made before the timing. In serving, SGLang's normal-mode dispatcher runs
  that quantisation on the compute stream before the transfer (``_DeepEPDispatcherImplNormal.dispatch_a``:
  ``hidden_states = sglang_per_token_group_quant_fp8(hidden_states, 128, ...)`` when DeepGEMM is on and the
  dispatch is not BF16; sgl-project/sglang ``python/sglang/srt/layers/moe/token_dispatcher/deepep.py``). Low-latency
  mode (decode) casts inside DeepEP's ``low_latency_dispatch(..., use_fp8=True)`` kernel, which the
  ``deepep_ll_sglang.csv`` rows time with ``use_fp8=True``: no separate kernel.

So the one unpriced quantisation is the prefill dispatch input of the ``deepgemm_wideep`` kernel:
:func:`dispatch_quant_ops` adds it, once per MoE layer on the GPU's own tokens. It is memory-bound; one run moves

    bytes = T · h · (a + 1 + 4/128)

(read the ``a``-byte activations, write one FP8 byte per element and one fp32 scale per 128,
:data:`pdplan.perf.moe_a2a.FP8_DISPATCH_BYTES`), priced as every other elementwise kernel of the table
(:func:`pdplan.perf.kernels.elementwise_time_s`: overhead + bytes / (HBM · the ``elementwise`` memory fraction)).
Example: 16,384 tokens of hidden 7,168 in BF16: 16,384 · 7,168 · 3.03125 = 356.0 MB per MoE layer.
"""

from __future__ import annotations

import numpy as np

from pdplan.perf.moe_a2a import FP8_DISPATCH_BYTES
from pdplan.perf.moe_wideep import MoeKernel
from pdplan.perf.op_types import AllToAllOp, ElementwiseOp, Op
from pdplan.types import ArrayLike, FloatArray

DISPATCH_QUANT_OP = "moe.dispatch_quant"
"""The op name of the prefill dispatch input's FP8 group quantisation (one per MoE layer)."""


def group_quant_bytes(tokens: ArrayLike, hidden: ArrayLike, act_bytes: float) -> FloatArray:
    """HBM bytes of one per-token-group FP8 quantisation of ``tokens`` × ``hidden`` activations of ``act_bytes``
    bytes: T·h·(a + 1 + 4/128) (module docstring). Example: (1, 128, 2.0) -> 128 · 3.03125 = 388.0."""
    t, h = np.asarray(tokens, dtype=np.float64), np.asarray(hidden, dtype=np.float64)
    result: FloatArray = t * h * (act_bytes + FP8_DISPATCH_BYTES)
    return result


def dispatch_quant_ops(ops: list[Op], act_bytes: float, kernel: MoeKernel) -> list[ElementwiseOp]:
    """The separate FP8 quantisation of a pass's normal-mode dispatch input, or none (module docstring).

    Only the ``deepgemm_wideep`` expert kernel (whose table and DeepEP's take FP8 inputs quantised outside the
    timing) with the pass's all-to-all in normal mode (prefill: not ``low_latency``); its tokens per GPU, hidden size
    and MoE layer count are the all-to-all op's. Every other kernel's table times a BF16 input, quantisation
    included."""
    if kernel != "deepgemm_wideep":
        return []
    return [
        ElementwiseOp(DISPATCH_QUANT_OP, op.count, group_quant_bytes(op.tokens, op.hidden, act_bytes))
        for op in ops
        if isinstance(op, AllToAllOp) and not op.low_latency
    ]
