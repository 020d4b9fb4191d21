"""TensorRT-LLM's CUTLASS fused MoE on Hopper: its own measured entry for block-FP8 experts under expert parallelism.

TensorRT-LLM's PyTorch backend runs its MoE layers with the ``CUTLASS`` backend by default on Hopper
(``CutlassFusedMoE``: TensorRT-LLM's grouped GEMMs of ``cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm`` with
DeepSeek-style 128x128 block scales for FP8 checkpoints; NVIDIA Dynamo's Qwen3-235B-A22B-FP8 recipe lists "MoE
backend CUTLASS (TRT-LLM default)" for H100/H200, DEEPGEMM only on SM100+), not vLLM's Triton ``fused_moe`` that
the kernel table's ``moe.fp8`` entry is fitted on (``MOE_KERNELS`` in ``tools/fitting/fit_moe.py``). FlashInfer
vendors those same TensorRT-LLM kernels (``flashinfer/csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/``,
``cutlass_fused_moe``), and vLLM's ``FLASHINFER_CUTLASS`` FP8 MoE backend calls them: AIConfigurator measured that
path in ``moe_vllm.csv`` as ``vllm_fp8moe_flashinfer_cutlass_flashinferexperts`` (``fp8_block``), at EP 2-256
(moe_tp 1), every model shape of the file. Those rows are the measured table of TensorRT-LLM's expert kernel;
at Qwen3-235B's shape (hidden 4096, 128 experts, top-8, intermediate 1536) they sit 8-14 % below the Triton
entry's price at EP 4 and 23 % at EP 8, a gap that grows with EP (the CUTLASS layer's fixed cost is ~30 µs, the
Triton layer's ~45 µs).

The cost formula is the fused-MoE one (:class:`pdplan.specs.kernel_table.MoeParams`,
:func:`pdplan.perf.moe.moe_time_s`), its numbers fitted to those rows (``benchmarks/fit_moe_cutlass.py``,
``tools/fitting/fit_moe.py``) and kept per GPU in ``pdplan/data/moe_cutlass/<gpu>.yaml`` with their
source (read by :func:`pdplan.io.perf_data.cutlass_params` into
:class:`~pdplan.specs.perf_data.MoeKernelEntries`; this module reads no file). An engine profile selects it with
``moe.ep_kernel: cutlass`` (:func:`pdplan.perf.moe_wideep.moe_kernel_for`): EP > 1, FP8 experts (not the 4-bit
W4A16 path) and a GPU with an entry (H100 SXM, H200 SXM); EP 1 (no measured CUTLASS rows) and every other case keep
the dtype's fused-MoE entry.
"""

from __future__ import annotations

CUTLASS_KERNEL = "vllm_fp8moe_flashinfer_cutlass_flashinferexperts"
"""The ``kernel_source`` of ``moe_vllm.csv`` that measures TensorRT-LLM's CUTLASS MoE (module docstring)."""
CUTLASS_DTYPE = "fp8_block"
"""The ``moe_dtype`` of those rows."""
