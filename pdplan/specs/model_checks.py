"""Cross-field rules of a model spec (:class:`pdplan.specs.model.ModelSpec`'s validator), each failure a
:class:`~pdplan.specs.model_parts.FieldError` naming its field."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdplan.specs.model_parts import FieldError, MlaSpec, SlidingWindowSpec

if TYPE_CHECKING:
    from pdplan.specs.model import ModelSpec


def check_model(m: ModelSpec) -> None:
    """The cross-field rules of a :class:`~pdplan.specs.model.ModelSpec` (its ``model_validator``); FieldError names
    the field."""
    if m.num_attention_heads % m.num_kv_heads:
        raise FieldError(
            "num_kv_heads", f"{m.num_kv_heads} does not divide num_attention_heads {m.num_attention_heads}"
        )
    _check_qk_norm(m)
    if m.weight_block_size is not None and m.weight_dtype != "fp8":
        raise FieldError("weight_block_size", "only FP8 checkpoints (weight_dtype: fp8) have weight scale blocks")
    if m.position_embedding_offset and m.position_embedding != "learned":
        raise FieldError("position_embedding_offset", "only applies to learned positions")
    if m.moe is not None:
        dense = set(m.moe.dense_layers) | set(range(m.moe.first_dense_layers))
        if max(m.moe.dense_layers, default=0) >= m.num_layers:
            raise FieldError("moe.dense_layers", f"index out of range 0..{m.num_layers - 1}")
        if len(dense) >= m.num_layers:
            raise FieldError("moe.first_dense_layers", "leaves no MoE layer")
    if m.mla is not None:
        _check_mla(m, m.mla)
    if m.sliding_window is not None:
        _check_sliding_window(m, m.sliding_window)
    if m.linear_attention is not None:
        full = m.full_attention_layer_indices
        if any(i >= m.num_layers for i in full):
            raise FieldError("linear_attention.full_attention_layers", f"index out of range 0..{m.num_layers - 1}")
        if not 0 < len(full) < m.num_layers:
            raise FieldError(
                "linear_attention",
                f"{len(full)} full-attention layers of {m.num_layers}; a hybrid needs at least one of each kind",
            )


def _check_qk_norm(m: ModelSpec) -> None:
    if m.qk_norm_span == "layer" and not m.qk_norm:
        raise FieldError("qk_norm_span", "'layer' needs qk_norm: true")


def _check_sliding_window(m: ModelSpec, sw: SlidingWindowSpec) -> None:
    if m.mla is not None or m.linear_attention is not None:
        raise FieldError("sliding_window", "sliding-window layers beside MLA or linear attention are not modelled")
    if any(i >= m.num_layers for i in sw.layers) or len(set(sw.layers)) != len(sw.layers):
        raise FieldError("sliding_window.layers", f"distinct indices in 0..{m.num_layers - 1}")
    if not 0 < len(sw.layers) < m.num_layers:
        raise FieldError("sliding_window.layers", "needs at least one sliding-window and one global layer")
    if m.num_attention_heads % m.swa_kv_heads:
        raise FieldError("sliding_window.num_kv_heads", f"does not divide {m.num_attention_heads} heads")


def _check_mla(m: ModelSpec, mla: MlaSpec) -> None:
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if m.head_dim != qk:
        raise FieldError("head_dim", f"{m.head_dim} must equal mla.qk_nope_head_dim + mla.qk_rope_head_dim = {qk}")
    if m.num_kv_heads != m.num_attention_heads:
        raise FieldError(
            "num_kv_heads",
            f"MLA has one K/V head per query head: must equal num_attention_heads {m.num_attention_heads}",
        )
    if m.qkv_bias or m.o_bias or m.qk_norm or m.attention_output_gate or m.v_head_dim:
        raise FieldError("mla", "attention biases, qk_norm, output gates and v_head_dim are not modelled with MLA")
