"""The ``model_type`` → builder table of :func:`pdplan.io.hf_config.load_hf_config`, and the builders of the
dense, MoE and MLA families (the hybrids are in :mod:`pdplan.io.hf_hybrid`).

Each builder maps HF keys to ModelSpec fields following the module layout of the matching ``transformers`` model
(see the :mod:`pdplan.io.hf_config` docstring for the rules on absent keys and unmodelled features).
"""

from __future__ import annotations

from collections.abc import Callable

from pdplan.io.hf_hybrid import deepseek_mla, kimi_linear, mimo_v2_flash
from pdplan.io.hf_reader import Fields, HfConfig, rope_decoder


def _llama(c: HfConfig) -> Fields:
    bias = c.get_bool("attention_bias", False)
    return {
        **rope_decoder(c, qkv_bias=bias, o_bias=bias, head_dim=c.head_dim()),
        "mlp_bias": c.get_bool("mlp_bias", False),
    }


def _mistral(c: HfConfig) -> Fields:
    """Mistral: a Llama-style decoder whose layers attend to the last ``sliding_window`` keys (Mistral-7B v0.1: 4,096
    of 32,768; every layer unless ``layer_types`` says otherwise; :meth:`HfConfig.window_fields`)."""
    fields = rope_decoder(c, qkv_bias=False, o_bias=False, head_dim=c.head_dim())
    return {**fields, "sliding_window": c.window_fields(flag=None)}


def _mixtral(c: HfConfig) -> Fields:
    moe = {
        "num_experts": c.get_int("num_local_experts"),
        "experts_per_token": c.get_int("num_experts_per_tok"),
        "expert_intermediate_size": c.get_int("intermediate_size"),
    }  # Mixtral: FFN = expert
    return {**_mistral(c), "moe": moe}


def _qwen2(c: HfConfig) -> Fields:
    """Qwen2: q/k/v biases; with ``use_sliding_window`` the layers from ``max_window_layers`` on are windowed."""
    window = c.window_fields(flag="use_sliding_window", split="max_window_layers")
    fields = rope_decoder(c, qkv_bias=True, o_bias=False, head_dim=c.head_dim())
    return {**fields, "sliding_window": window}


def _qwen3(c: HfConfig) -> Fields:
    window = c.window_fields(flag="use_sliding_window", split="max_window_layers")
    bias = c.get_bool("attention_bias", False)
    fields = rope_decoder(c, qkv_bias=bias, o_bias=bias, head_dim=c.get_int("head_dim"))
    return {**fields, "qk_norm": True, "sliding_window": window}


def _qwen_moe_block(c: HfConfig) -> Fields | None:
    """Qwen rule: layer i is MoE unless i ∈ mlp_only_layers or (i+1) % decoder_sparse_step."""
    experts = c.get_int("num_experts")
    if experts == 0:
        return None
    layers, step = c.get_int("num_hidden_layers"), c.get_int("decoder_sparse_step", 1)
    only = set(c.int_list("mlp_only_layers"))
    dense = sorted(only | {i for i in range(layers) if (i + 1) % step})
    return {
        "num_experts": experts,
        "experts_per_token": c.get_int("num_experts_per_tok"),
        "expert_intermediate_size": c.get_int("moe_intermediate_size"),
        "dense_layers": dense,
    }


def _qwen3_moe(c: HfConfig) -> Fields:
    return {**_qwen3(c), "moe": _qwen_moe_block(c)}


def _qwen3_next(c: HfConfig) -> Fields:
    fields = {**_qwen3_moe(c), "attention_output_gate": True}
    shared = c.get_int("shared_expert_intermediate_size")
    if fields["moe"] is not None and shared > 0:
        fields["moe"] |= {
            "num_shared_experts": 1,
            "shared_expert_intermediate_size": shared,
            "shared_expert_gate": True,
        }
    la: Fields = {
        "kind": "gated_deltanet",
        "num_key_heads": c.get_int("linear_num_key_heads"),
        "num_value_heads": c.get_int("linear_num_value_heads"),
        "key_head_dim": c.get_int("linear_key_head_dim"),
        "value_head_dim": c.get_int("linear_value_head_dim"),
        "conv_kernel_size": c.get_int("linear_conv_kernel_dim"),
        "state_dtype_bytes": 4,
        "conv_state_dtype_bytes": 2,
    }
    c.defaults.append("linear-attention state fp32, conv state bf16 (pdplan assumption)")
    types = c.data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or not set(types) <= {"full_attention", "linear_attention"}:
            raise c.error("layer_types", "must list 'full_attention' or 'linear_attention' for each layer")
        la["full_attention_layers"] = [i for i, t in enumerate(types) if t == "full_attention"]
    else:
        la["full_attention_interval"] = c.get_int("full_attention_interval")
    return {**fields, "linear_attention": la}


def _qwen3_5_moe(c: HfConfig) -> Fields:
    """Qwen3.5 MoE: the Qwen3-Next layout (Gated DeltaNet + gated full attention), its decoder keys under
    ``text_config`` in the multimodal checkpoints. ``intermediate_size`` is absent when every layer is MoE."""
    text = c.data.get("text_config")
    inner = HfConfig(text if isinstance(text, dict) else c.data, c.source)
    if not inner.has("intermediate_size"):
        if inner.int_list("mlp_only_layers"):
            raise inner.error("intermediate_size", "missing required key (mlp_only_layers lists dense layers)")
        inner.data = {**inner.data, "intermediate_size": inner.get_int("moe_intermediate_size")}
        inner.defaults.append("intermediate_size=moe_intermediate_size (unused: every layer is MoE)")
    fields = _qwen3_next(inner)
    c.defaults.extend(inner.defaults)
    return fields


def _minimax_m2(c: HfConfig) -> Fields:
    """MiniMax-M2: full GQA attention in every layer (the PrfaaS paper's dense baseline), Mixtral-style MoE
    (``intermediate_size`` is the expert width), q/k RMSNorm. ``qk_norm_type: per_layer`` (the HF modelling
    MiniMax-M2's config.json sets; taken when absent, recorded as a default) normalises the whole q/k projection
    rather than each head (``qk_norm_span: layer``); ``per_head`` is the Qwen3 form."""
    if c.get_int("shared_intermediate_size", 0):
        raise c.error("shared_intermediate_size", "shared experts of MiniMax-M2 are not modelled")
    qk_norm = c.get_bool("use_qk_norm", True)
    if not c.has("qk_norm_type"):
        c.defaults.append("qk_norm_type=per_layer")
    span = c.data.get("qk_norm_type", "per_layer")
    if span not in ("per_layer", "per_head"):
        raise c.error("qk_norm_type", f"must be per_layer or per_head, got {span!r:.40}")
    return {**_mixtral(c), "qk_norm": qk_norm, "qk_norm_span": "layer" if qk_norm and span == "per_layer" else "head"}


def _deepseek_v3(c: HfConfig) -> Fields:
    if c.get_bool("attention_bias", False):
        raise c.error("attention_bias", "MLA attention biases are not modelled")
    rope, nope = c.get_int("qk_rope_head_dim"), c.get_int("qk_nope_head_dim")
    fields = rope_decoder(c, qkv_bias=False, o_bias=False, head_dim=nope + rope)
    layers, first = c.get_int("num_hidden_layers"), c.get_int("first_k_dense_replace")
    freq, shared = c.get_int("moe_layer_freq", 1), c.get_int("n_shared_experts", 0)
    fields["moe"] = {
        "num_experts": c.get_int("n_routed_experts"),
        "experts_per_token": c.get_int("num_experts_per_tok"),
        "expert_intermediate_size": c.get_int("moe_intermediate_size"),
        # DeepSeek builds its n shared experts as one MLP of width n·moe_intermediate_size
        "num_shared_experts": min(shared, 1),
        "shared_expert_intermediate_size": c.get_int("moe_intermediate_size") * shared,
        "first_dense_layers": first,
        "dense_layers": [i for i in range(first, layers) if i % freq],
    }
    fields["mla"] = deepseek_mla(c, rope=rope, nope=nope)
    return {**fields, "num_mtp_layers": c.get_int("num_nextn_predict_layers", 0)}


def _gpt_oss(c: HfConfig) -> Fields:
    """OpenAI gpt-oss: GQA with q/k/v/o biases, SwiGLU experts with biases, every layer MoE.

    Half its layers use a 128-token sliding window: ``sliding_window`` with ``layer_types`` naming each layer
    ``sliding_attention`` or ``full_attention`` (without ``layer_types``, every other layer, as the config's
    default). The learned attention sinks (one scalar per head) and the router bias are not counted (< 0.01 %
    of the parameters).
    """
    bias = c.get_bool("attention_bias", True)
    fields = rope_decoder(c, qkv_bias=bias, o_bias=bias, head_dim=c.get_int("head_dim"))
    fields["moe"] = {
        "num_experts": c.get_int("num_local_experts"),
        "experts_per_token": c.get_int("num_experts_per_tok"),
        "expert_intermediate_size": c.get_int("intermediate_size"),
    }
    fields["mlp_bias"] = True  # GptOssExperts: gate_up_proj_bias, down_proj_bias
    if c.has("sliding_window"):
        layers = fields["num_layers"]
        types = c.data.get("layer_types") or [
            "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)
        ]
        if len(types) != layers or not set(types) <= {"sliding_attention", "full_attention"}:
            raise c.error("layer_types", "must list 'sliding_attention' or 'full_attention' for each layer")
        if "sliding_attention" in types and "full_attention" in types:
            fields["sliding_window"] = {
                "window": c.get_int("sliding_window"),
                "layers": [i for i, t in enumerate(types) if t == "sliding_attention"],
            }
    return fields


def _layernorm_decoder(c: HfConfig, *, hidden: int, heads: int, layers: int, bias: bool) -> Fields:
    """Fields shared by OPT / BLOOM / GPT-NeoX: MHA, LayerNorm, 2-matrix GELU/ReLU FFN."""
    if hidden % heads:
        raise c.error("num_attention_heads", f"{heads} does not divide hidden_size {hidden}")
    return {
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": heads,
        "head_dim": hidden // heads,
        "gated_mlp": False,
        "vocab_size": c.get_int("vocab_size"),
        "norm": "layernorm",
        "qkv_bias": bias,
        "o_bias": bias,
    }


def _opt(c: HfConfig) -> Fields:
    hidden = c.get_int("hidden_size")
    proj = c.get_int("word_embed_proj_dim", hidden)
    if proj != hidden:
        raise c.error(
            "word_embed_proj_dim",
            f"{proj} != hidden_size {hidden}: OPT embedding projections (opt-350m) are not modelled",
        )
    bias = c.get_bool("enable_bias", True)
    base = _layernorm_decoder(
        c, hidden=hidden, heads=c.get_int("num_attention_heads"), layers=c.get_int("num_hidden_layers"), bias=bias
    )
    return {
        **base,
        "intermediate_size": c.get_int("ffn_dim"),
        "mlp_bias": bias,
        "tie_word_embeddings": c.get_bool("tie_word_embeddings", True),
        "max_position_embeddings": c.get_int("max_position_embeddings"),
        "position_embedding": "learned",
        "position_embedding_offset": 2,
    }


def _bloom(c: HfConfig) -> Fields:
    hidden = c.first_int("hidden_size", "n_embed")
    base = _layernorm_decoder(
        c,
        hidden=hidden,
        heads=c.first_int("n_head", "num_attention_heads"),
        layers=c.first_int("n_layer", "num_hidden_layers"),
        bias=True,
    )
    if not c.has("seq_length"):
        c.defaults.append("context 2048 (BLOOM training length, arXiv:2211.05100; ALiBi itself has no position limit)")
    return {
        **base,
        "intermediate_size": 4 * hidden,
        "mlp_bias": True,
        "embedding_norm": True,
        "tie_word_embeddings": c.get_bool("tie_word_embeddings", True),
        "max_position_embeddings": c.get_int("seq_length") if c.has("seq_length") else 2048,
        "position_embedding": "alibi",
    }


def _gpt_neox(c: HfConfig) -> Fields:
    base = _layernorm_decoder(
        c,
        hidden=c.get_int("hidden_size"),
        heads=c.get_int("num_attention_heads"),
        layers=c.get_int("num_hidden_layers"),
        bias=c.get_bool("attention_bias", True),
    )
    return {
        **base,
        "intermediate_size": c.get_int("intermediate_size"),
        "mlp_bias": True,
        "tie_word_embeddings": c.get_bool("tie_word_embeddings", False),
        "max_position_embeddings": c.get_int("max_position_embeddings"),
        "position_embedding": "rope",
    }


BUILDERS: dict[str, Callable[[HfConfig], Fields]] = {
    "bloom": _bloom,
    "deepseek_v3": _deepseek_v3,
    "gpt_neox": _gpt_neox,
    "gpt_oss": _gpt_oss,
    "kimi_k2": _deepseek_v3,  # Kimi K2: the DeepSeek-V3 architecture (DeepseekV3ForCausalLM)
    "kimi_linear": kimi_linear,  # KDA + MLA hybrid (pdplan.io.hf_hybrid)
    "llama": _llama,
    "mimo_v2_flash": mimo_v2_flash,  # sliding-window + global GQA hybrid (pdplan.io.hf_hybrid)
    "minimax_m2": _minimax_m2,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "opt": _opt,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "qwen3_next": _qwen3_next,
    "qwen3_5_moe": _qwen3_5_moe,
    "qwen3_5_moe_text": _qwen3_5_moe,
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(BUILDERS))
