"""Read a Hugging Face ``config.json`` into a :class:`~pdplan.specs.model.ModelSpec`.

One builder per supported ``model_type`` maps HF keys to ModelSpec fields, following the module
layout of the matching ``transformers`` model. A key the builder needs and the file lacks is an
error naming the key. Some keys may be absent from real configs because ``transformers`` fills them
with a class default (``tie_word_embeddings``, bias flags, ``num_key_value_heads`` = heads,
``head_dim`` = hidden / heads); those defaults are applied explicitly and listed in the spec's
``notes``. Features pdplan does not model (sliding-window attention, OPT's embedding projection,
MLA attention biases) raise SpecError.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError
from pdplan.io.files import read_text_file
from pdplan.io.hf_hybrid import kimi_linear, mimo_v2_flash
from pdplan.io.hf_quant import quantization_fields
from pdplan.specs.model import ModelSpec

Fields = dict[str, Any]


class _Config:
    """Typed reads from one config.json; every failure names the file and the key."""

    def __init__(self, data: dict[str, Any], source: str):
        self.data = data
        self.source = source
        self.defaults: list[str] = []

    def error(self, key: str, message: str) -> SpecError:
        return SpecError(message, source=self.source, field=key)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def get_int(self, key: str, default: int | None = None) -> int:
        if not self.has(key):
            if default is None:
                raise self.error(key, f"missing required key '{key}'")
            self.defaults.append(f"{key}={default}")
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {value!r:.40}")
        return value

    def opt_int(self, key: str) -> int | None:
        return self.get_int(key) if self.has(key) else None

    def first_int(self, *keys: str) -> int:
        for key in keys:
            if self.has(key):
                return self.get_int(key)
        raise self.error(keys[0], f"missing required key '{keys[0]}' (or {', '.join(keys[1:])})")

    def get_bool(self, key: str, default: bool) -> bool:
        if not self.has(key):
            self.defaults.append(f"{key}={str(default).lower()}")
            return default
        value = self.data[key]
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r:.40}")
        return value

    def int_list(self, key: str) -> tuple[int, ...]:
        value = self.data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(key, f"must be a list of integers, got {value!r:.40}")
        return tuple(value)

    def head_dim(self) -> int:
        hidden, heads = self.get_int("hidden_size"), self.get_int("num_attention_heads")
        if self.has("head_dim"):
            return self.get_int("head_dim")
        if hidden % heads:
            raise self.error("num_attention_heads", f"{heads} does not divide hidden_size {hidden}")
        return hidden // heads

    def reject_sliding_window(self, *, flag: str | None) -> None:
        """Sliding-window attention bounds the KV cache; pdplan does not model it."""
        window = self.data.get("sliding_window")
        enabled = self.get_bool(flag, False) if flag else True
        if enabled and window is not None and window < self.get_int("max_position_embeddings"):
            raise self.error(
                "sliding_window",
                f"sliding-window attention ({window} tokens) is not modelled; only full-context attention is supported",
            )


def _rope_decoder(c: _Config, *, qkv_bias: bool, o_bias: bool, head_dim: int) -> Fields:
    """Fields shared by Llama-style decoders: RoPE, RMSNorm, SwiGLU, GQA."""
    heads = c.get_int("num_attention_heads")
    return {
        "num_layers": c.get_int("num_hidden_layers"),
        "hidden_size": c.get_int("hidden_size"),
        "num_attention_heads": heads,
        "num_kv_heads": c.get_int("num_key_value_heads", heads),
        "head_dim": head_dim,
        "intermediate_size": c.get_int("intermediate_size"),
        "gated_mlp": True,
        "vocab_size": c.get_int("vocab_size"),
        "tie_word_embeddings": c.get_bool("tie_word_embeddings", False),
        "max_position_embeddings": c.get_int("max_position_embeddings"),
        "position_embedding": "rope",
        "norm": "rmsnorm",
        "qkv_bias": qkv_bias,
        "o_bias": o_bias,
    }


def _llama(c: _Config) -> Fields:
    bias = c.get_bool("attention_bias", False)
    return {
        **_rope_decoder(c, qkv_bias=bias, o_bias=bias, head_dim=c.head_dim()),
        "mlp_bias": c.get_bool("mlp_bias", False),
    }


def _mistral(c: _Config) -> Fields:
    c.reject_sliding_window(flag=None)
    return _rope_decoder(c, qkv_bias=False, o_bias=False, head_dim=c.head_dim())


def _mixtral(c: _Config) -> Fields:
    moe = {
        "num_experts": c.get_int("num_local_experts"),
        "experts_per_token": c.get_int("num_experts_per_tok"),
        "expert_intermediate_size": c.get_int("intermediate_size"),
    }  # Mixtral: FFN = expert
    return {**_mistral(c), "moe": moe}


def _qwen2(c: _Config) -> Fields:
    c.reject_sliding_window(flag="use_sliding_window")
    return _rope_decoder(c, qkv_bias=True, o_bias=False, head_dim=c.head_dim())  # Qwen2: q/k/v bias


def _qwen3(c: _Config) -> Fields:
    c.reject_sliding_window(flag="use_sliding_window")
    bias = c.get_bool("attention_bias", False)
    fields = _rope_decoder(c, qkv_bias=bias, o_bias=bias, head_dim=c.get_int("head_dim"))
    return {**fields, "qk_norm": True}


def _qwen_moe_block(c: _Config) -> Fields | None:
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


def _qwen3_moe(c: _Config) -> Fields:
    return {**_qwen3(c), "moe": _qwen_moe_block(c)}


def _qwen3_next(c: _Config) -> Fields:
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


def _qwen3_5_moe(c: _Config) -> Fields:
    """Qwen3.5 MoE: the Qwen3-Next layout (Gated DeltaNet + gated full attention), its decoder keys under
    ``text_config`` in the multimodal checkpoints. ``intermediate_size`` is absent when every layer is MoE."""
    text = c.data.get("text_config")
    inner = _Config(text if isinstance(text, dict) else c.data, c.source)
    if not inner.has("intermediate_size"):
        if inner.int_list("mlp_only_layers"):
            raise inner.error("intermediate_size", "missing required key (mlp_only_layers lists dense layers)")
        inner.data = {**inner.data, "intermediate_size": inner.get_int("moe_intermediate_size")}
        inner.defaults.append("intermediate_size=moe_intermediate_size (unused: every layer is MoE)")
    fields = _qwen3_next(inner)
    c.defaults.extend(inner.defaults)
    return fields


def _minimax_m2(c: _Config) -> Fields:
    """MiniMax-M2: full GQA attention in every layer (the PrfaaS paper's dense baseline), Mixtral-style MoE
    (``intermediate_size`` is the expert width), q/k RMSNorm. ``qk_norm_type: per_layer`` normalises the
    whole q/k projection rather than each head: the spec's per-head norm undercounts its weights by
    (heads − 1)·head_dim per projection (≈ 0.01 % of the parameters)."""
    if c.get_int("shared_intermediate_size", 0):
        raise c.error("shared_intermediate_size", "shared experts of MiniMax-M2 are not modelled")
    return {**_mixtral(c), "qk_norm": c.get_bool("use_qk_norm", True)}


def _deepseek_v3(c: _Config) -> Fields:
    if c.get_bool("attention_bias", False):
        raise c.error("attention_bias", "MLA attention biases are not modelled")
    rope, nope = c.get_int("qk_rope_head_dim"), c.get_int("qk_nope_head_dim")
    fields = _rope_decoder(c, qkv_bias=False, o_bias=False, head_dim=nope + rope)
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
    fields["mla"] = {
        "kv_lora_rank": c.get_int("kv_lora_rank"),
        "q_lora_rank": c.opt_int("q_lora_rank"),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": c.get_int("v_head_dim"),
    }
    return {**fields, "num_mtp_layers": c.get_int("num_nextn_predict_layers", 0)}


def _gpt_oss(c: _Config) -> Fields:
    """OpenAI gpt-oss: GQA with q/k/v/o biases, SwiGLU experts with biases, every layer MoE.

    Half its layers use a 128-token sliding window: ``sliding_window`` with ``layer_types`` naming each layer
    ``sliding_attention`` or ``full_attention`` (without ``layer_types``, every other layer, as the config's
    default). The learned attention sinks (one scalar per head) and the router bias are not counted (< 0.01 %
    of the parameters).
    """
    bias = c.get_bool("attention_bias", True)
    fields = _rope_decoder(c, qkv_bias=bias, o_bias=bias, head_dim=c.get_int("head_dim"))
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


def _layernorm_decoder(c: _Config, *, hidden: int, heads: int, layers: int, bias: bool) -> Fields:
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


def _opt(c: _Config) -> Fields:
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


def _bloom(c: _Config) -> Fields:
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


def _gpt_neox(c: _Config) -> Fields:
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


_BUILDERS: dict[str, Callable[[_Config], Fields]] = {
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
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_BUILDERS))


def _read_json(path: Path, source: str) -> dict[str, Any]:
    text = read_text_file(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        what = "empty file" if not text.strip() else f"invalid JSON at line {err.lineno}: {err.msg}"
        raise SpecError(f"{what} (expected a Hugging Face config.json)", source=source) from None
    if not isinstance(data, dict):
        raise SpecError(f"expected a JSON object, got {type(data).__name__}", source=source)
    return data


def _default_name(path: Path) -> tuple[str, str]:
    """(id, display name) from the file stem, or the folder name for ``.../<model>/config.json``."""
    label = path.parent.name if path.stem == "config" and path.parent.name else path.stem
    ident = re.sub(r"[^a-z0-9._-]+", "-", label.lower()).strip("-._")
    return ident or "hf-model", label or "hf-model"


def load_hf_config(path: str | Path, *, name: str | None = None) -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config.json (model_type in SUPPORTED_MODEL_TYPES).

    The id is ``name`` if given, else the file name (its folder's for ``.../config.json``).
    Raises SpecError naming the file and the key on unreadable files, bad JSON, unsupported
    model_type, missing keys or values the spec rejects.
    """
    p, source = Path(path), str(path)
    data = _read_json(p, source)
    model_type = data.get("model_type")
    if not isinstance(model_type, str):
        raise SpecError("missing required key 'model_type'", source=source, field="model_type")
    builder = _BUILDERS.get(model_type)
    if builder is None:
        raise SpecError(
            f"unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}",
            source=source,
            field="model_type",
        )
    cfg = _Config(data, source)
    fields = builder(cfg) | quantization_fields(cfg.data.get("quantization_config"), cfg.source, cfg.defaults)
    ident, label = _default_name(p)
    notes = f"Converted from config.json (model_type {model_type})."
    if cfg.defaults:
        notes += " Defaults applied: " + "; ".join(cfg.defaults) + "."
    fields |= {
        "schema_version": 1,
        "name": name or ident,
        "display_name": label,
        "family": model_type,
        "source": f"Hugging Face config.json: {source}",
        "notes": notes,
    }
    return ModelSpec.from_mapping(fields, source=source)
