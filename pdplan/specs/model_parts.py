"""The parts of a :class:`pdplan.specs.model.ModelSpec`: MoE, MLA and linear-attention sub-specs, field types,
and the plain shapes/counts derived from a model (weight matrices, per-layer parameter counts).
"""

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from pdplan.specs.base import FrozenModel

PosInt = Annotated[int, Field(strict=True, gt=0)]
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
Flag = Annotated[bool, Field(strict=True)]
ElemBytes = Annotated[float, Field(gt=0, le=16)]
ModelId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=100)]
NonEmpty = Annotated[str, Field(min_length=1)]

AttentionKind = Literal["mha", "gqa", "mla", "hybrid"]


class FieldError(ValueError):
    """A validator failure naming its field (turned into SpecError by :func:`spec_error_from`)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class MoeSpec(FrozenModel):
    """Routed experts plus optional always-on shared experts."""

    num_experts: PosInt
    experts_per_token: PosInt  # top-k
    expert_intermediate_size: PosInt
    num_shared_experts: NonNegInt = 0
    shared_expert_intermediate_size: NonNegInt = 0
    shared_expert_gate: Flag = False  # Qwen3-Next: Linear(hidden, 1) gate on the shared expert
    first_dense_layers: NonNegInt = 0  # DeepSeek first_k_dense_replace
    dense_layers: tuple[NonNegInt, ...] = ()  # more dense-FFN layers (HF mlp_only_layers), 0-based

    @model_validator(mode="after")
    def _check(self) -> "MoeSpec":
        if self.experts_per_token > self.num_experts:
            raise FieldError("experts_per_token", f"{self.experts_per_token} > num_experts {self.num_experts}")
        if (self.num_shared_experts > 0) != (self.shared_expert_intermediate_size > 0):
            raise FieldError("shared_expert_intermediate_size", "must be > 0 exactly when num_shared_experts > 0")
        if self.shared_expert_gate and self.num_shared_experts == 0:
            raise FieldError("shared_expert_gate", "needs num_shared_experts > 0")
        return self


class MlaSpec(FrozenModel):
    """DeepSeek multi-head latent attention; cache = kv_lora_rank + qk_rope_head_dim per token."""

    kv_lora_rank: PosInt
    q_lora_rank: PosInt | None  # None: plain q_proj (DeepSeek-V2-Lite)
    qk_rope_head_dim: PosInt
    qk_nope_head_dim: PosInt
    v_head_dim: PosInt


class LinearAttentionSpec(FrozenModel):
    """Linear-attention layers beside a few full-attention ones. 0-based layer i has full attention when
    (i+1) % full_attention_interval == 0, or when listed in ``full_attention_layers``.

    ``kind``: ``gated_deltanet`` (Qwen3-Next, Qwen3.5: in_proj_qkvz + in_proj_ba, out_proj) or ``kda`` (Kimi Delta
    Attention, Kimi Linear: separate q/k/v projections of n_k = n_v heads of d_k = d_v, a per-channel decay gate
    through a rank-d_k bottleneck f_a/f_b, a β projection, a low-rank output gate g_a/g_b, out_proj). Both keep an
    n_v·d_k·d_v recurrent state and a short causal conv over q, k and v per sequence."""

    kind: Literal["gated_deltanet", "kda"]
    full_attention_interval: PosInt | None = None
    full_attention_layers: tuple[NonNegInt, ...] | None = None
    num_key_heads: PosInt
    num_value_heads: PosInt
    key_head_dim: PosInt
    value_head_dim: PosInt
    conv_kernel_size: PosInt
    state_dtype_bytes: ElemBytes  # recurrent state element size (implementation-specific)
    conv_state_dtype_bytes: ElemBytes

    @model_validator(mode="after")
    def _check(self) -> "LinearAttentionSpec":
        if (self.full_attention_interval is None) == (self.full_attention_layers is None):
            raise FieldError(
                "full_attention_interval", "give exactly one of full_attention_interval and full_attention_layers"
            )
        if self.kind == "kda" and (
            self.num_key_heads != self.num_value_heads or self.key_head_dim != self.value_head_dim
        ):
            raise FieldError("kind", "kda has one head count and one head size for q/k and v (n_k = n_v, d_k = d_v)")
        if self.num_value_heads % self.num_key_heads:
            raise FieldError(
                "num_value_heads", f"{self.num_value_heads} is not a multiple of num_key_heads {self.num_key_heads}"
            )
        return self


class SlidingWindowSpec(FrozenModel):
    """Sliding-window attention layers (MiMo-V2-Flash, gpt-oss, Mistral-7B v0.1): each query attends to the last
    ``window`` keys, so such a layer's KV cache holds at most ``window`` tokens per sequence. ``layers``: the 0-based
    SWA layers (the others are global full attention, or linear attention in a hybrid; all of them in Mistral-7B
    v0.1); ``num_kv_heads``: their K/V heads (None: the model's; the model's when every layer is windowed). Query
    heads and head sizes are the model's.

    How pdplan prices the KV (:mod:`pdplan.specs.model_kv`): beside global layers, each window layer holds a full
    window per sequence (fixed state, an upper bound for shorter sequences); when every layer is windowed there is
    no full-context layer for the token-slot KV pool to count, and the window layers are counted per token held, a
    sequence of L tokens holding min(L, window) (:attr:`~pdplan.specs.model.ModelSpec.kv_window_tokens`: the pool,
    the queueing model, the simulator, the benchmark loops and a request-wise or layer-wise KV transfer cap the
    count at the window; the decode step law's context is the same windowed sum). Attention FLOPs and bytes run
    over min(context, window) either way (:mod:`pdplan.perf.ops_attention`).

    Engines: vLLM frees a window layer's blocks outside the window as a sequence advances (``SlidingWindowManager``,
    whose skipped blocks ``remove_skipped_blocks`` releases; vllm/v1/core/single_type_kv_cache_manager.py) while the
    layer keeps its ``SlidingWindowSpec``. A model that mixes
    window and global layers keeps it only under the hybrid KV-cache manager: with that disabled
    (``--disable-hybrid-kv-cache-manager``, or by vllm/config/vllm.py when ``--kv-transfer-config`` names a
    connector without hybrid support) ``unify_hybrid_kv_cache_specs`` (vllm/v1/core/kv_cache_utils.py) makes every
    window layer full attention and only the compute saving stays; a model whose layers are all windowed has one
    uniform spec, which that function leaves as it is. pdplan assumes the window is honoured (the hybrid manager on
    for mixed models)."""

    window: PosInt
    layers: tuple[NonNegInt, ...]
    num_kv_heads: PosInt | None = None


@dataclass(frozen=True, slots=True)
class GemmShape:
    """One weight matrix: y = x·W with W of shape (in_features, out_features)."""

    name: str
    in_features: int
    out_features: int

    @property
    def params(self) -> int:
        return self.in_features * self.out_features


@dataclass(frozen=True, slots=True)
class LayerParamCounts:
    """Parameters of one layer of each kind (weights + biases + norms) and the layer counts.

    ``shared_experts``: all shared experts of one MoE layer plus their gate; ``layer_norms``: the
    two per-layer norms. Non-embedding total = Σ count·params + num_layers·layer_norms + final_norm.
    """

    full_attention: int
    linear_attention: int
    dense_mlp: int
    expert: int
    shared_experts: int
    router: int
    layer_norms: int
    final_norm: int
    num_full_attention_layers: int
    num_linear_attention_layers: int
    num_dense_mlp_layers: int
    num_moe_layers: int
    sliding_attention: int = 0
    num_sliding_attention_layers: int = 0


def unquantized_bytes(dtype_bytes: float) -> float:
    """Bytes per parameter of the layers quantized checkpoints and engines leave in BF16 (the token embedding, the
    LM head and the MoE router) when the rest is served at ``dtype_bytes``: ``max(b, 2)``.

    Sources: vLLM's ``Fp8Config`` quantizes ``LinearBase`` layers only (the LM head is a ``ParallelLMHead``, an
    embedding, served by ``UnquantizedEmbeddingMethod``) and builds every MoE gate with ``quant_config=None``
    (vllm/model_executor/models/deepseek_v2.py, qwen3_moe.py, minimax_m2.py [P]); FP8 checkpoints list them as
    unquantized (DeepSeek-V3's ``quantization_config`` stores ``lm_head`` and the ``gate`` weights in BF16;
    NVIDIA ModelOpt's default FP8 config excludes ``*lm_head*`` and ``*router*``/``*gate``) [P].
    """
    return max(float(dtype_bytes), 2.0)
