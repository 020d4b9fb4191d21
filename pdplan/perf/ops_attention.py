"""Attention operators of a forward pass: projections (MHA/GQA, MLA, sliding-window, linear attention) and the
attention cores (full, sliding-window, linear-attention scan), per GPU under tensor parallelism.

Split out of :mod:`pdplan.perf.ops` (sharding rules in its docstring), which assembles the whole pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pdplan.perf.mla import mla_gemms
from pdplan.perf.op_types import (
    DecodeAttentionOp,
    GemmOp,
    LinearAttentionOp,
    Op,
    PassShape,
    PrefillAttentionOp,
    fused_gemms,
    gemm_op,
    kv_heads_per_gpu,
)
from pdplan.specs.model import ModelSpec
from pdplan.types import FloatArray


def _mla_projection_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[GemmOp]:
    """MLA's projections as vLLM runs them (absorbed in decode, decompressed in prefill; :mod:`pdplan.perf.mla`)."""
    assert model.mla is not None
    heads = np.ceil(model.num_attention_heads / s.tp)
    count = float(model.num_kv_layers)
    return [
        GemmOp(name, count, d["m"], d["n"], d["k"], bf16=bf16, mla_phase=s.phase)
        for name, d, bf16 in mla_gemms(model.mla, model.hidden_size, heads, s.phase, m)
    ]


def _projections(model: ModelSpec, s: PassShape, m: FloatArray, prefix: str, count: float, kv: int) -> list[GemmOp]:
    ops: list[GemmOp] = []
    for g in model.attention_gemms(kv):
        n = None
        if g.name in ("k", "v"):  # replicated heads when tp > n_kv
            n = kv_heads_per_gpu(model, s.tp, kv) * (model.head_dim if g.name == "k" else model.value_head_dim)
        ops.append(gemm_op(f"{prefix}.{g.name}_proj", count, g, m, s.tp, n=n))
    return fused_gemms(ops, ("q", "k", "v"), f"{prefix}.qkv_proj")


def attention_projection_ops(model: ModelSpec, s: PassShape, m: FloatArray) -> list[Op]:
    ops: list[Op] = []
    if model.mla is not None:
        ops += _mla_projection_ops(model, s, m)
    elif model.num_kv_layers:  # none when every layer is windowed (Mistral-7B v0.1)
        ops += _projections(model, s, m, "attn", float(model.num_kv_layers), model.num_kv_heads)
    if model.num_swa_layers:
        ops += _projections(model, s, m, "swa", float(model.num_swa_layers), model.swa_kv_heads)
    for g in model.linear_attention_gemms():
        ops.append(gemm_op(f"linear_attn.{g.name}", float(model.num_linear_layers), g, m, s.tp))
    return ops


def _window_dims(s: PassShape, window: float) -> tuple[FloatArray, FloatArray]:
    """(batch, context) that give a sliding-window pass the FLOPs the attention kernels price.

    Prefill of c tokens with window w: query i sees min(i, w) keys, c·w − w²/2 pairs for c > w (c²/2 otherwise,
    the full causal count the kernels assume); priced as c/w blocks of w queries at a context whose causal pair
    count matches: batch·max(c/w, 1) sequences of sqrt(2·pairs/blocks) tokens (c itself when c ≤ w). Decode: the
    context is capped at w."""
    c = s.tokens + 0.0 * s.tp
    if s.phase != "prefill":
        return s.batch / s.dp + 0.0 * s.tp, np.minimum(c, window)
    blocks = np.maximum(c / window, 1.0)
    pairs = np.where(c > window, c * window - window * window / 2.0, c * c / 2.0)
    return s.batch / s.dp * blocks + 0.0 * s.tp, np.sqrt(2.0 * pairs / blocks)


def attention_core_ops(model: ModelSpec, s: PassShape) -> list[Op]:
    """The attention cores: full attention over the KV layers (none when every layer is windowed), then the
    sliding-window and linear-attention ones."""
    core = _full_core(model, s)
    ops: list[Op] = [core] if model.num_kv_layers else []
    if model.sliding_window is not None:
        ops.append(_swa_core_op(model, s, core))
    if model.linear_attention is not None:
        ops.append(_linear_scan_op(model, s))
    return ops


def _full_core(model: ModelSpec, s: PassShape) -> PrefillAttentionOp | DecodeAttentionOp:
    """One full-attention layer's core per GPU (MLA: with the latent's sizes, for its fitted entry)."""
    heads = np.ceil(model.num_attention_heads / s.tp)
    kv_full_layer = model.kv_bytes_per_token_per_layer(s.kv_bytes)
    # per-GPU share of a token's KV in one layer: its local heads (MLA's latent is not sharded)
    kv_share = 1.0 if model.mla is not None else kv_heads_per_gpu(model, s.tp) / model.num_kv_heads
    kv_per_token_layer = kv_full_layer * kv_share
    # QK^T runs at the q/k head size, PV at the v head size: their mean prices both products
    head_dim = (model.head_dim + model.value_head_dim) / 2.0 if model.mla is None else model.head_dim
    core = PrefillAttentionOp if s.phase == "prefill" else DecodeAttentionOp
    return core(
        "attn.core",
        float(model.num_kv_layers),
        batch=s.batch / s.dp + 0.0 * s.tp,
        context=s.tokens + 0.0 * s.tp,
        heads=heads,
        kv_heads=kv_heads_per_gpu(model, s.tp),
        head_dim=np.full_like(s.tp, head_dim),
        kv_bytes_per_token=kv_per_token_layer + 0.0 * s.tp,
        mla=model.mla,
    )


def _swa_core_op(
    model: ModelSpec, s: PassShape, core: PrefillAttentionOp | DecodeAttentionOp
) -> PrefillAttentionOp | DecodeAttentionOp:
    """The sliding-window layers' core: the full core's shape at the window's batch, context and K/V heads."""
    assert model.sliding_window is not None
    kv = model.swa_kv_heads
    batch, context = _window_dims(s, float(model.sliding_window.window))
    per_layer = model.window_kv_bytes_per_token(s.kv_bytes) / model.num_swa_layers
    return dataclasses.replace(
        core,
        name="swa.core",
        count=float(model.num_swa_layers),
        batch=batch,
        context=context,
        kv_heads=kv_heads_per_gpu(model, s.tp, kv),
        kv_bytes_per_token=per_layer * kv_heads_per_gpu(model, s.tp, kv) / kv + 0.0 * s.tp,
    )


def _linear_scan_op(model: ModelSpec, s: PassShape) -> LinearAttentionOp:
    """The linear-attention layers' recurrent scan: state, FLOPs and q/k/v/o traffic per token, per GPU."""
    la = model.linear_attention
    assert la is not None
    state = la.num_value_heads * la.key_head_dim * la.value_head_dim * la.state_dtype_bytes
    return LinearAttentionOp(
        "linear_attn.scan",
        float(model.num_linear_layers),
        tokens=s.new_tokens / s.dp + 0.0 * s.tp,
        batch=s.batch / s.dp + 0.0 * s.tp,
        state_bytes=state / s.tp,
        flops_per_token=4.0 * la.num_value_heads * la.key_head_dim * la.value_head_dim / s.tp,
        # per-GPU q, k, v and o elements per token (what the fitted kernel family reads and writes)
        io_elems_per_token=(2.0 * la.num_key_heads * la.key_head_dim + 2.0 * la.num_value_heads * la.value_head_dim)
        / s.tp,
        value_heads=la.num_value_heads / s.tp,
        phase=s.phase,
    )
