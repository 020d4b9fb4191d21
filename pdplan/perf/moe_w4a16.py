"""MXFP4 experts on GPUs without FP4 tensor cores: the W4A16 grouped GEMM (read 4-bit weights, compute in BF16).

gpt-oss checkpoints store their routed experts as MXFP4 (4-bit values, one 8-bit scale per 32 values:
0.53125 bytes per weight). Hopper has no FP4 tensor cores, so vLLM runs them with a weight-only kernel that
dequantises each weight tile in registers and multiplies in BF16 (OpenAI's Triton ``matmul_ogs``,
vLLM ``Mxfp4MoEMethod`` with the OAI Triton experts on SM90; AIConfigurator's collector names it
``vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic``, dtype ``w4a16_mxfp4``). The cost formula is
the fused-MoE one (:class:`pdplan.specs.kernel_table.MoeParams`, :func:`pdplan.perf.moe.moe_time_s`) with the
BF16 tensor peak and the 0.53125-byte weights; its numbers are fitted to that kernel's measured layers
(``tools/fitting/fit_moe_w4a16.py``) and live in ``pdplan/data/moe_w4a16/<gpu>.yaml`` with their source (read by
:func:`pdplan.io.perf_data.w4a16_params` into :class:`~pdplan.specs.perf_data.MoeKernelEntries`; this module reads no
file).
The BF16 fused-MoE entry (fitted on 2-byte weights, where the weight read hides the tile padding the
W4A16 kernel exposes less) over-prices these layers 2-3x.

:func:`uses_w4a16` is the test :mod:`pdplan.perf.op_pricing` applies to an MoE op: expert weights narrower than one
byte, whatever the GEMM dtype, take the GPU's fitted W4A16 entry (priced at the BF16 peak) where it has one (the
roofline otherwise keeps the dtype's fused-MoE entry, as it did before this module). With
FP8 activations (TensorRT-LLM's W4A8 MXFP4 path on Hopper) no measured table exists; the same 4-bit weights are
read and FP8 compute could only be faster, so the W4A16 entry is its upper bound, and an FP8 plan of an MXFP4
model is never priced slower than its BF16 one.
"""

from __future__ import annotations

W4_WEIGHT_BYTES_MAX = 1.0
"""Expert weights narrower than this many bytes (MXFP4 0.53125, INT4 0.5 + scales) take the W4A16 path."""


def uses_w4a16(weight_bytes: float) -> bool:
    """True for 4-bit expert weights (the W4A16 kernel, also the bound for W4A8; module docstring)."""
    return weight_bytes < W4_WEIGHT_BYTES_MAX
