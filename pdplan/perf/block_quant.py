"""The expert layout an engine can load an FP8 block-scaled checkpoint in.

A block-scaled FP8 checkpoint (HF ``quantization_config.weight_block_size [128, 128]``: DeepSeek-V3/R1, Kimi K2,
MiniMax-M2.5, MiMo-V2-Flash) stores one scale per 128 × 128 weight block, so a GPU can only hold whole blocks.
Splitting each routed expert ``moe_tp`` ways leaves every GPU ``I/moe_tp`` rows of gate/up and columns of down;
SGLang refuses to load the experts unless ``I/moe_tp`` is a multiple of the block (``Fp8MoEMethod``:
"The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128",
sgl-project/sglang python/sglang/srt/layers/quantization/fp8.py, ``create_fp8_moe_weight_`` [P]; vLLM has the same
check in its ``fp8.py``). The engines' documented way out is expert parallelism over the same GPUs, experts whole:
SGLang's MiniMax-M2 8-GPU command is ``--tp-size 8 --ep-size 8`` (docs.sglang.io basic_usage/minimax_m2 [P]) and
the vLLM recipe says "TP8 is not supported ... use DP+EP" (vllm-project/recipes MiniMax/MiniMax-M2.md [P]): at TP 8
MiniMax-M2.5's 1536-wide experts would be 192 per GPU, 1.5 blocks.
"""

from __future__ import annotations

from pdplan.errors import SpecError
from pdplan.specs.model import ModelSpec


def block_split_error(model: ModelSpec, moe_tp: int, weight_bytes: float) -> str | None:
    """Why the routed experts of ``model`` served at ``weight_bytes`` cannot be split ``moe_tp`` ways (None when
    they can): only FP8 block-scaled weights constrain the split, to shards of whole blocks."""
    block = model.weight_block_size
    if model.moe is None or block is None or weight_bytes > 1.0:
        return None
    width = model.moe.expert_intermediate_size
    if width % moe_tp or (width // moe_tp) % block:
        return (
            f"{model.name}'s {width}-wide experts split {moe_tp} ways leave {width / moe_tp:g} per GPU, not a multiple "
            f"of the FP8 weight block {block} (engines refuse to load them; use expert parallelism)"
        )
    return None


def expert_parallel_for_blocks(model: ModelSpec, tp: int, weight_bytes: float) -> int:
    """EP of a ``tp``-GPU instance without attention DP, as the engines load the checkpoint: 1 (experts split ``tp``
    ways) when the blocks allow it, else ``tp`` (each GPU whole experts, SGLang ``--ep-size tp``, vLLM
    ``--enable-expert-parallel``). SpecError when neither layout loads.

    Example: MiniMax-M2.5 (256 experts of width 1536, FP8 blocks of 128) at TP 8: 1536/8 = 192 → EP 8 (32 whole
    experts per GPU); MiMo-V2-Flash (width 2048) at TP 8: 256 = 2 blocks → EP 1.
    """
    if block_split_error(model, tp, weight_bytes) is None:
        return 1
    assert model.moe is not None  # block_split_error is None for dense models
    whole = block_split_error(model, 1, weight_bytes)
    if whole is not None or model.moe.num_experts % tp:
        raise SpecError(
            f"{model.name} at TP {tp}: neither a {tp}-way expert split nor {tp}-way expert parallelism "
            f"({model.moe.num_experts} experts) loads its FP8 block-scaled experts",
            field="tp",
        )
    return tp
