"""HF ``quantization_config`` → how a checkpoint stores its weights (ModelSpec ``weight_dtype``,
``expert_weight_bytes``); used by :mod:`pdplan.io.hf_config`."""

from __future__ import annotations

from typing import Any

from pdplan.errors import SpecError

_MXFP4_BYTES = (32 * 4 + 8) / 32 / 8
"""OCP MX FP4: blocks of 32 4-bit values sharing one 8-bit (E8M0) scale, 0.53125 bytes per weight."""


def quantization_fields(q: object, source: str, notes: list[str]) -> dict[str, Any]:
    """``quantization_config`` → how the checkpoint stores weights (``weight_dtype``, ``expert_weight_bytes``).

    FP8 (``quant_method`` fp8, block-scaled or per-tensor; compressed-tensors / modelopt with 8-bit float
    weights) counts as FP8 weights, with the block side of a block-scaled one (``weight_block_size``);
    gpt-oss ``mxfp4`` quantises the routed experts only (its ``modules_to_not_convert`` keeps attention, router,
    embeddings and head in BF16). Other methods
    (int4/AWQ/GPTQ/NVFP4) are not modelled and raise.
    """
    if q is None:
        return {}
    if not isinstance(q, dict) or not isinstance(q.get("quant_method"), str):
        raise SpecError("must be an object with a string 'quant_method'", source=source, field="quantization_config")
    method = q["quant_method"].lower()
    if method == "fp8" or (method in ("compressed-tensors", "modelopt") and _is_fp8_weights(q)):
        notes.append(f"quantization_config {method}: FP8 weights")
        return {"weight_dtype": "fp8", **_block_fields(q, source)}
    if method == "mxfp4":
        notes.append("quantization_config mxfp4: routed experts at 0.53125 B/weight, the rest BF16")
        return {"expert_weight_bytes": _MXFP4_BYTES}
    raise SpecError(
        f"quant_method {method!r} is not modelled; supported: fp8 (block or per-tensor), mxfp4 (experts)",
        source=source,
        field="quantization_config",
    )


def _block_fields(q: dict[str, Any], source: str) -> dict[str, Any]:
    """``weight_block_size [128, 128]`` → ``{"weight_block_size": 128}`` (square blocks only); none when absent."""
    block = q.get("weight_block_size")
    if block is None:
        return {}
    if not (isinstance(block, list) and len(block) == 2 and block[0] == block[1] and isinstance(block[0], int)):
        raise SpecError(
            f"weight_block_size {block!r}: only square [n, n] blocks are modelled",
            source=source,
            field="quantization_config.weight_block_size",
        )
    return {"weight_block_size": block[0]}


def _is_fp8_weights(q: dict[str, Any]) -> bool:
    """compressed-tensors / modelopt configs whose weights are 8-bit floats."""
    if str(q.get("quant_algo", "")).upper() in ("FP8", "FP8_BLOCK_SCALES"):
        return True
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return False
    weights = [g.get("weights") or {} for g in groups.values() if isinstance(g, dict)]
    return bool(weights) and all(w.get("num_bits") == 8 and w.get("type") == "float" for w in weights)
