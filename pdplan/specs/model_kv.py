"""KV-cache and fixed per-sequence state bytes of a :class:`~pdplan.specs.model.ModelSpec` (a mixin).

Split out of :mod:`pdplan.specs.model` to keep that module short; every method stays a method of ``ModelSpec``.
The methods read the spec through :class:`_KvFields`, the structural view of the fields and properties they need.
"""

from __future__ import annotations

from typing import Protocol

from pdplan.specs.model_parts import LinearAttentionSpec, MlaSpec, SlidingWindowSpec


class _KvFields(Protocol):
    """What the byte accounting reads from a ModelSpec (fields, derived layer counts, and these methods)."""

    @property
    def mla(self) -> MlaSpec | None: ...
    @property
    def linear_attention(self) -> LinearAttentionSpec | None: ...
    @property
    def sliding_window(self) -> SlidingWindowSpec | None: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def value_head_dim(self) -> int: ...
    @property
    def num_kv_layers(self) -> int: ...
    @property
    def num_swa_layers(self) -> int: ...
    @property
    def num_linear_layers(self) -> int: ...
    @property
    def swa_kv_heads(self) -> int: ...
    @property
    def all_layers_windowed(self) -> bool: ...
    @property
    def kv_window_tokens(self) -> float | None: ...
    def kv_bytes_per_token_per_layer(self, kv_dtype_bytes: float) -> float: ...
    def window_kv_bytes_per_token(self, kv_dtype_bytes: float) -> float: ...
    def kv_bytes_per_token(self, kv_dtype_bytes: float) -> float: ...
    def window_kv_bytes_per_sequence(self, kv_dtype_bytes: float) -> float: ...
    def sequence_state_bytes(self, kv_dtype_bytes: float, tp: float = 1.0) -> float: ...


class ModelKvMixin:
    """KV bytes per token, fixed state bytes per sequence, and a sequence's cache bytes per GPU."""

    def kv_bytes_per_token_per_layer(self: _KvFields, kv_dtype_bytes: float) -> float:
        """MHA/GQA/hybrid full layer: n_kv·(d_k + d_v)·b (2·n_kv·d_h·b when they are equal); MLA:
        (kv_lora_rank + qk_rope_head_dim)·b."""
        if self.mla is not None:
            return (self.mla.kv_lora_rank + self.mla.qk_rope_head_dim) * kv_dtype_bytes
        return self.num_kv_heads * (self.head_dim + self.value_head_dim) * kv_dtype_bytes

    def window_kv_bytes_per_token(self: _KvFields, kv_dtype_bytes: float) -> float:
        """K/V bytes one token adds over all sliding-window layers, n_swa·n_kv,swa·(d_k + d_v)·b, while it is within
        the window (a sequence holds at most ``window`` such tokens). 0 without sliding-window layers."""
        return self.num_swa_layers * self.swa_kv_heads * (self.head_dim + self.value_head_dim) * kv_dtype_bytes

    def kv_bytes_per_token(self: _KvFields, kv_dtype_bytes: float) -> float:
        """KV-cache bytes per token over all KV layers (docs/architecture.md §2); Llama-3.1-70B: 327,680.

        A model whose every layer is windowed (:attr:`~pdplan.specs.model.ModelSpec.all_layers_windowed`, Mistral-7B
        v0.1) has no full-context layer; its window layers are counted here, per token held, and hold no window
        state (:meth:`window_kv_bytes_per_sequence` is 0); a sequence holds min(L, window) tokens
        (:attr:`~pdplan.specs.model.ModelSpec.kv_window_tokens`, :meth:`sequence_cache_bytes`). Mistral-7B v0.1,
        bf16: 32 layers · 8 K/V heads · (128 + 128) · 2 B = 131,072 B."""
        if self.all_layers_windowed:
            return self.window_kv_bytes_per_token(kv_dtype_bytes)
        return self.num_kv_layers * self.kv_bytes_per_token_per_layer(kv_dtype_bytes)

    def linear_state_bytes_per_sequence(
        self: _KvFields, state_dtype_bytes: float | None = None, conv_dtype_bytes: float | None = None
    ) -> float:
        """Fixed per-sequence state of the linear layers (0 for non-hybrids):
        L_lin·(n_v·d_k·d_v·b_state + (2·n_k·d_k + n_v·d_v)·(kernel − 1)·b_conv).
        Qwen3-Next, fp32 state + bf16 conv: 75,497,472 + 1,769,472 = 77,266,944 B."""
        la = self.linear_attention
        if la is None:
            return 0.0
        b_state = la.state_dtype_bytes if state_dtype_bytes is None else state_dtype_bytes
        b_conv = la.conv_state_dtype_bytes if conv_dtype_bytes is None else conv_dtype_bytes
        recurrent = la.num_value_heads * la.key_head_dim * la.value_head_dim * b_state
        conv_dim = 2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim
        conv = conv_dim * (la.conv_kernel_size - 1) * b_conv
        return self.num_linear_layers * (recurrent + conv)

    def window_kv_bytes_per_sequence(self: _KvFields, kv_dtype_bytes: float) -> float:
        """K/V a sequence holds in its sliding-window layers once it has ``window`` tokens, window·
        :meth:`window_kv_bytes_per_token` (an upper bound for shorter sequences, by at most that much; vLLM's
        per-request KV estimate counts the full window too). MiMo-V2-Flash, bf16: 128·199,680 = 25,559,040 B. 0 when
        every layer is windowed (counted per token instead: :meth:`kv_bytes_per_token`)."""
        sw = self.sliding_window
        if sw is None or self.all_layers_windowed:
            return 0.0
        return sw.window * self.window_kv_bytes_per_token(kv_dtype_bytes)

    def sequence_state_bytes(self: _KvFields, kv_dtype_bytes: float, tp: float = 1.0) -> float:
        """Fixed bytes one sequence holds on each GPU of a TP group of ``tp``, whatever its length (0 unless hybrid or
        sliding-window): the linear layers' recurrent and conv state (:meth:`linear_state_bytes_per_sequence`) plus
        the sliding-window K/V (:meth:`window_kv_bytes_per_sequence`). Each part is split over the ranks like its
        heads, a share of max(1, tp/n)/tp for n heads (copies beyond n heads, as :func:`pdplan.perf.memory.
        kv_replication`): recurrent state and the v part of the conv state by value heads, the q/k conv parts by
        key heads, window K/V by the window layers' K/V heads. Qwen3-Next, tp 1: 77,266,944 B; tp 4: 19,316,736 B."""
        la, t = self.linear_attention, float(tp)

        def share(heads: int) -> float:
            return max(1.0, t / heads) / t

        out = self.window_kv_bytes_per_sequence(kv_dtype_bytes) * share(self.swa_kv_heads)
        if la is not None:
            recurrent = la.num_value_heads * la.key_head_dim * la.value_head_dim * la.state_dtype_bytes
            conv_qk = 2 * la.num_key_heads * la.key_head_dim * (la.conv_kernel_size - 1) * la.conv_state_dtype_bytes
            conv_v = la.num_value_heads * la.value_head_dim * (la.conv_kernel_size - 1) * la.conv_state_dtype_bytes
            per_layer = (recurrent + conv_v) * share(la.num_value_heads) + conv_qk * share(la.num_key_heads)
            out += self.num_linear_layers * per_layer
        return out

    def sequence_cache_bytes(self: _KvFields, tokens: float, kv_dtype_bytes: float, tp: float = 1.0) -> float:
        """Bytes a sequence of ``tokens`` holds on each GPU of a TP group of ``tp`` (all layers on it): the fixed
        :meth:`sequence_state_bytes` + held·kv_bytes_per_token·r/tp, r = max(1, tp/n_kv) copies of each K/V head
        (MLA: r = tp, the latent on every rank), held = the tokens, capped at the window when every layer is
        windowed (:attr:`~pdplan.specs.model.ModelSpec.kv_window_tokens`: a layer keeps the last ``window`` tokens).
        Llama-3.1-70B, 1,000 tokens, tp 8: 40,960,000 B; Qwen3-Next, 1,000 tokens, tp 1: 77,266,944 + 24,576,000 B;
        Mistral-7B v0.1, 32,768 tokens, tp 1: 4,096·131,072 = 536,870,912 B."""
        window = self.kv_window_tokens
        if window is not None:
            tokens = min(tokens, window)
        t = float(tp)
        rep = t if self.mla is not None else max(1.0, t / self.num_kv_heads)
        return self.sequence_state_bytes(kv_dtype_bytes, t) + tokens * self.kv_bytes_per_token(kv_dtype_bytes) * rep / t
