"""Hugging Face config.json builders of the hybrid-attention families the PrfaaS paper uses (arXiv 2604.15039
Table 3): Kimi Linear (``kimi_linear``: KDA linear attention + MLA, 3:1) and MiMo-V2-Flash (``mimo_v2_flash``:
sliding-window + global GQA, 5:1). Registered in :data:`pdplan.io.hf_families.BUILDERS`; ``c`` is its typed reader.
"""

from __future__ import annotations

from typing import Any

from pdplan.io.hf_reader import Fields, HfConfig, rope_decoder


def _one_based(c: HfConfig, block: dict[str, Any], key: str, layers: int) -> list[int]:
    """A 1-based layer list of ``linear_attn_config`` (as Kimi Linear publishes it) as 0-based indices."""
    value = block.get(key)
    if not isinstance(value, list) or not all(isinstance(v, int) and 1 <= v <= layers for v in value):
        raise c.error(f"linear_attn_config.{key}", f"must list 1-based layer numbers 1..{layers}")
    return sorted(v - 1 for v in value)


def _deepseek_moe(c: HfConfig, layers: int, *, experts: str, top_k: str) -> Fields:
    first, freq, shared = (
        c.get_int("first_k_dense_replace"),
        c.get_int("moe_layer_freq", 1),
        c.get_int("num_shared_experts", 0),
    )
    width = c.get_int("moe_intermediate_size")
    return {
        "num_experts": c.get_int(experts),
        "experts_per_token": c.get_int(top_k),
        "expert_intermediate_size": width,
        "num_shared_experts": min(shared, 1),  # n shared experts run as one MLP of width n·moe_intermediate_size
        "shared_expert_intermediate_size": width * shared,
        "first_dense_layers": first,
        "dense_layers": [i for i in range(first, layers) if i % freq],
    }


def kimi_linear(c: HfConfig) -> Fields:
    """Kimi Linear: MLA full-attention layers (``linear_attn_config.full_attn_layers``, 1-based) and KDA layers
    (``kda_layers``) of ``num_heads`` × ``head_dim``; DeepSeek-style MoE with shared experts. ``mla_use_nope``:
    the MLA layers carry no rotary embedding (KDA's decay encodes position); the rope fields still size the
    latent, and the rotary elementwise op pdplan prices for full-attention layers is negligible."""
    if c.get_bool("attention_bias", False):
        raise c.error("attention_bias", "MLA attention biases are not modelled")
    block = c.data.get("linear_attn_config")
    if not isinstance(block, dict):
        raise c.error("linear_attn_config", "missing required block 'linear_attn_config'")
    layers = c.get_int("num_hidden_layers")
    full = _one_based(c, block, "full_attn_layers", layers)
    if "kda_layers" in block and sorted(full + _one_based(c, block, "kda_layers", layers)) != list(range(layers)):
        raise c.error("linear_attn_config.kda_layers", "kda_layers and full_attn_layers must partition the layers")
    rope, nope = c.get_int("qk_rope_head_dim"), c.get_int("qk_nope_head_dim")
    lin = _Sub(c, block)
    c.defaults.append("KDA state fp32, conv state bf16 (pdplan assumption)")
    keys = ("max_position_embeddings", "model_max_length")
    return {
        **rope_decoder(c, qkv_bias=False, o_bias=False, head_dim=nope + rope, max_position_keys=keys),
        "moe": _deepseek_moe(c, layers, experts="num_experts", top_k="num_experts_per_token"),
        "mla": deepseek_mla(c, rope=rope, nope=nope),
        "linear_attention": _kda_fields(lin, full),
        "num_mtp_layers": c.get_int("num_nextn_predict_layers", 0),
    }


class _Sub:
    """Integer reads from a nested block, errors named ``<block>.<key>`` in the parent file."""

    def __init__(self, c: HfConfig, block: dict[str, Any]) -> None:
        self.c, self.block = c, block

    def get_int(self, key: str) -> int:
        value = self.block.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.c.error(f"linear_attn_config.{key}", f"must be an integer, got {value!r:.40}")
        return value


def deepseek_mla(c: HfConfig, *, rope: int, nope: int) -> Fields:
    """The MLA block of a DeepSeek-V3-style config (``q_lora_rank`` absent or null: no query compression)."""
    return {
        "kv_lora_rank": c.get_int("kv_lora_rank"),
        "q_lora_rank": c.opt_int("q_lora_rank"),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": c.get_int("v_head_dim"),
    }


def _kda_fields(lin: _Sub, full: list[int]) -> Fields:
    """Kimi Linear's KDA layers from ``linear_attn_config``: ``num_heads`` × ``head_dim`` for q/k and v alike;
    recurrent state fp32 and conv state bf16 (pdplan assumption, listed in the notes)."""
    return {
        "kind": "kda",
        "full_attention_layers": full,
        "num_key_heads": lin.get_int("num_heads"),
        "num_value_heads": lin.get_int("num_heads"),
        "key_head_dim": lin.get_int("head_dim"),
        "value_head_dim": lin.get_int("head_dim"),
        "conv_kernel_size": lin.get_int("short_conv_kernel_size"),
        "state_dtype_bytes": 4,
        "conv_state_dtype_bytes": 2,
    }


def _pattern(c: HfConfig, key: str, layers: int) -> list[int]:
    """A per-layer 0/1 list (``hybrid_layer_pattern``: 1 = sliding window; ``moe_layer_freq``: 1 = MoE)."""
    value = c.data.get(key)
    if not isinstance(value, list) or len(value) != layers or not set(value) <= {0, 1}:
        raise c.error(key, f"must list 0 or 1 for each of the {layers} layers")
    return [int(v) for v in value]


def mimo_v2_flash(c: HfConfig) -> Fields:
    """MiMo-V2-Flash: global GQA layers (``hybrid_layer_pattern`` 0) and sliding-window GQA layers (1) with their
    own K/V head count (``swa_num_key_value_heads``) and window (``sliding_window``); q/k heads of ``head_dim``, v
    heads of ``v_head_dim``; MoE per ``moe_layer_freq`` (0 = dense FFN of ``intermediate_size``). Not counted:
    the SWA layers' attention-sink biases (one scalar per head, ``add_swa_attention_sink_bias``) and the MTP
    layers (``num_nextn_predict_layers``, speculative decoding only)."""
    layers, heads = c.get_int("num_hidden_layers"), c.get_int("num_attention_heads")
    for key, base in (("swa_num_attention_heads", heads), ("swa_head_dim", c.get_int("head_dim"))):
        if c.has(key) and c.get_int(key) != base:
            raise c.error(key, f"sliding-window layers with {key} != the global layers' ({base}) are not modelled")
    if c.has("swa_v_head_dim") and c.get_int("swa_v_head_dim") != c.get_int("v_head_dim"):
        raise c.error("swa_v_head_dim", "must equal v_head_dim (one value head size is modelled)")
    swa = [i for i, v in enumerate(_pattern(c, "hybrid_layer_pattern", layers)) if v == 1]
    moe = _pattern(c, "moe_layer_freq", layers)
    if c.get_int("n_shared_experts", 0):
        raise c.error("n_shared_experts", "shared experts of MiMo-V2-Flash are not modelled")
    c.defaults.append("attention-sink biases of the sliding-window layers not counted")
    return {
        **rope_decoder(c, qkv_bias=False, o_bias=False, head_dim=c.get_int("head_dim")),
        "num_kv_heads": c.get_int("num_key_value_heads"),  # required here (no MHA default)
        "v_head_dim": c.get_int("v_head_dim"),
        "moe": {
            "num_experts": c.get_int("n_routed_experts"),
            "experts_per_token": c.get_int("num_experts_per_tok"),
            "expert_intermediate_size": c.get_int("moe_intermediate_size"),
            "dense_layers": [i for i, v in enumerate(moe) if v == 0],
        },
        "sliding_window": {
            "window": c.first_int("sliding_window", "sliding_window_size"),
            "layers": swa,
            "num_kv_heads": c.get_int("swa_num_key_value_heads", c.get_int("num_key_value_heads")),
        },
        "num_mtp_layers": c.get_int("num_nextn_predict_layers", 0),
    }
