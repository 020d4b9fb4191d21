"""The typed reader of one Hugging Face ``config.json`` (:class:`HfConfig`) that every family builder uses.

Every failed read names the file and the key; every class default applied for an absent key is recorded in
``defaults`` (listed in the spec's ``notes``). Split out of :mod:`pdplan.io.hf_config`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError
from pdplan.io.files import DEEP_MESSAGE, read_text_file

Fields = dict[str, Any]


class HfConfig:
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
        others = f" (or {', '.join(keys[1:])})" if len(keys) > 1 else ""
        raise self.error(keys[0], f"missing required key '{keys[0]}'{others}")

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

    def window_fields(self, *, flag: str | None, split: str | None = None) -> Fields | None:
        """The ``sliding_window`` block of a dense decoder whose layers may attend to the last ``sliding_window``
        keys only (Mistral; Qwen2/Qwen3 with ``flag`` = ``use_sliding_window``), or None for full attention.

        As ``transformers`` builds them: ``flag`` false (the class default, recorded) disables the window; else the
        windowed layers are those ``layer_types`` names ``sliding_attention`` where the file lists them, the layers
        ``i >= max_window_layers`` where ``split`` names that key (Qwen2Config/Qwen3Config), and every layer otherwise
        (MistralAttention). A window no shorter than ``max_position_embeddings`` never slides: full attention."""
        window = self.data.get("sliding_window")
        enabled = self.get_bool(flag, False) if flag else True
        if not enabled or window is None:
            return None
        window = self.get_int("sliding_window")
        if window >= self.get_int("max_position_embeddings"):
            return None
        layers = self.get_int("num_hidden_layers")
        types = self.data.get("layer_types")
        if types is not None:
            if not isinstance(types, list) or len(types) != layers or not all(t in _WINDOW_LAYER_TYPES for t in types):
                raise self.error(
                    "layer_types", f"must list 'sliding_attention' or 'full_attention' for {layers} layers"
                )
            windowed = [i for i, t in enumerate(types) if t == "sliding_attention"]
        else:
            first = self.get_int(split) if split else 0
            windowed = list(range(min(first, layers), layers))
        return {"window": window, "layers": windowed} if windowed else None


_WINDOW_LAYER_TYPES = ("sliding_attention", "full_attention")


def read_json(path: Path, source: str) -> dict[str, Any]:
    text = read_text_file(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        what = "empty file" if not text.strip() else f"invalid JSON at line {err.lineno}: {err.msg}"
        raise SpecError(f"{what} (expected a Hugging Face config.json)", source=source) from None
    except RecursionError:
        raise SpecError(DEEP_MESSAGE, source=source) from None
    if not isinstance(data, dict):
        raise SpecError(f"expected a JSON object, got {type(data).__name__}", source=source)
    return data


def rope_decoder(
    c: HfConfig,
    *,
    qkv_bias: bool,
    o_bias: bool,
    head_dim: int,
    max_position_keys: tuple[str, ...] = ("max_position_embeddings",),
) -> Fields:
    """Fields shared by Llama-style decoders: RoPE, RMSNorm, SwiGLU, GQA. ``max_position_keys``: the keys tried in
    order for the context length (Kimi Linear's config may give only ``model_max_length``)."""
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
        "max_position_embeddings": c.first_int(*max_position_keys),
        "position_embedding": "rope",
        "norm": "rmsnorm",
        "qkv_bias": qkv_bias,
        "o_bias": o_bias,
    }
