"""ModelSpec: the architecture facts of one LLM, and the sizes derived from them.

One frozen pydantic model covers dense MHA/GQA decoders (Llama, Qwen, Mistral), the non-gated
LayerNorm families with learned or ALiBi positions (OPT, BLOOM, GPT-NeoX), MoE with shared experts
(Mixtral, Qwen3-MoE, DeepSeek), DeepSeek MLA, and Qwen3-Next hybrids (Gated DeltaNet linear
attention + gated full attention). YAML keys equal field names (``pdplan/data/models/<id>.yaml``);
:func:`load_model_yaml` reads them through :mod:`pdplan.io.files`.

Derived sizes are pure functions of the fields: element counts and bytes. Parameter counts follow
the Hugging Face module layout, so ``total_params()`` matches the checkpoint's tensor count up to
tiny buffers (DeepSeek's router correction bias). MTP modules (``num_mtp_layers``) are not counted
in totals or weight bytes: engines run them only for speculative decoding.
"""

import difflib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from pdplan.errors import SpecError
from pdplan.specs.base import FrozenModel
from pdplan.specs.model_kv import ModelKvMixin
from pdplan.specs.model_parts import (
    AttentionKind,
    FieldError,
    Flag,
    GemmShape,
    LayerParamCounts,
    LinearAttentionSpec,
    MlaSpec,
    ModelId,
    MoeSpec,
    NonEmpty,
    NonNegInt,
    PosInt,
    SlidingWindowSpec,
    unquantized_bytes,
)

MAX_LAYERS = 4_096
MAX_WIDTH = 1_048_576
MAX_HEADS = 65_536
MAX_VOCAB = 16_777_216
MAX_CONTEXT = 134_217_728
"""Plausibility ceilings on a model's shape (issue #26: a config with 10^100 layers is bad input, not a plan). Each is
at least 10x the largest published value in the presets and Hugging Face configs pdplan reads (layers: 126 for
Llama-3.1-405B; widths: 53,248 intermediate for Llama-3.1-405B; heads: 128; vocabulary: 262,144 for Gemma 3; context:
10M for Llama 4 Scout)."""


class ModelSpec(FrozenModel, ModelKvMixin):
    """Architecture of one decoder-only LLM (see the module docstring); the KV/state byte accounting
    (``kv_bytes_per_token``, ``sequence_cache_bytes``, ...) comes from :class:`~pdplan.specs.model_kv.ModelKvMixin`."""

    schema_version: Literal[1] = 1
    name: ModelId
    display_name: str | None = None
    family: NonEmpty
    num_layers: Annotated[int, Field(strict=True, gt=0, le=MAX_LAYERS)]
    hidden_size: Annotated[int, Field(strict=True, gt=0, le=MAX_WIDTH)]
    num_attention_heads: Annotated[int, Field(strict=True, gt=0, le=MAX_HEADS)]
    num_kv_heads: Annotated[int, Field(strict=True, gt=0, le=MAX_HEADS)]
    head_dim: Annotated[int, Field(strict=True, gt=0, le=MAX_WIDTH)]  # MLA: qk_nope_head_dim + qk_rope_head_dim
    v_head_dim: PosInt | None = None  # value head size when it differs from head_dim (MiMo-V2-Flash: 128 vs 192)
    # dense FFN width (used by dense layers only in MoE models)
    intermediate_size: Annotated[int, Field(strict=True, gt=0, le=MAX_WIDTH)]
    gated_mlp: Flag  # True: SwiGLU gate/up/down (3 matrices); False: fc1/fc2 (2 matrices)
    vocab_size: Annotated[int, Field(strict=True, gt=0, le=MAX_VOCAB)]
    tie_word_embeddings: Flag
    max_position_embeddings: Annotated[int, Field(strict=True, gt=0, le=MAX_CONTEXT)]
    position_embedding: Literal["rope", "learned", "alibi"]
    position_embedding_offset: NonNegInt = 0  # OPT stores max_pos + 2 learned positions
    norm: Literal["rmsnorm", "layernorm"]
    embedding_norm: Flag = False  # BLOOM word_embeddings_layernorm
    qkv_bias: Flag = False
    o_bias: Flag = False
    mlp_bias: Flag = False
    qk_norm: Flag = False  # Qwen3: per-head RMSNorm on q and k (head_dim weights each)
    # "layer": the q/k RMSNorm spans the whole projection (MiniMax-M2 ``qk_norm_type: per_layer``): heads·head_dim
    # and kv_heads·head_dim weights, and under TP its variance is all-reduced across the group (pdplan.perf.ops)
    qk_norm_span: Literal["head", "layer"] = "head"
    attention_output_gate: Flag = False  # Qwen3-Next: q_proj also emits a sigmoid output gate
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
    linear_attention: LinearAttentionSpec | None = None
    sliding_window: SlidingWindowSpec | None = None
    num_mtp_layers: NonNegInt = 0  # multi-token-prediction modules; informational only
    source: NonEmpty
    notes: str = ""
    hf_id: str | None = None  # Hugging Face repo id of the checkpoint `source` cites; what `pdplan export` serves
    # how the checkpoint stores its weights (HF quantization_config): "fp8" for FP8 checkpoints (block scales
    # included, DeepSeek-V3/R1, Kimi K2), which engines serve in FP8; and the bytes per routed-expert weight
    # when only the experts are narrower (gpt-oss MXFP4: 4-bit values + one 8-bit scale per 32 = 0.53125 B)
    weight_dtype: Literal["bf16", "fp8"] = "bf16"
    expert_weight_bytes: Annotated[float, Field(gt=0.0, le=2.0)] | None = None
    # FP8 block-scaled checkpoints: the side of the square scale block (HF quantization_config weight_block_size
    # [128, 128] -> 128), None for per-tensor FP8 and BF16; an expert's TP shard must hold whole blocks
    # (pdplan.perf.block_quant)
    weight_block_size: PosInt | None = None

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        check_model(self)  # the cross-field rules (below)
        return self

    # ---- structure ----------------------------------------------------------------------------

    @property
    def label(self) -> str:
        return self.display_name or self.name

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def is_hybrid(self) -> bool:
        return self.linear_attention is not None

    @property
    def attention_kind(self) -> AttentionKind:
        if self.mla is not None:
            return "mla"
        if self.linear_attention is not None:
            return "hybrid"
        return "mha" if self.num_kv_heads == self.num_attention_heads else "gqa"

    @property
    def full_attention_layer_indices(self) -> tuple[int, ...]:
        """0-based layers that hold a full-context KV cache (all layers unless hybrid or sliding-window)."""
        la, sw = self.linear_attention, self.sliding_window
        if sw is not None:
            return tuple(i for i in range(self.num_layers) if i not in set(sw.layers))
        if la is None:
            return tuple(range(self.num_layers))
        if la.full_attention_layers is not None:
            return tuple(sorted(set(la.full_attention_layers)))
        step = la.full_attention_interval or 1
        return tuple(i for i in range(self.num_layers) if (i + 1) % step == 0)

    @property
    def num_kv_layers(self) -> int:
        return len(self.full_attention_layer_indices)

    @property
    def num_swa_layers(self) -> int:
        """Sliding-window attention layers (0 without ``sliding_window``)."""
        return 0 if self.sliding_window is None else len(self.sliding_window.layers)

    @property
    def all_layers_windowed(self) -> bool:
        """Every layer is sliding-window attention (Mistral-7B v0.1): no layer holds a full-context KV cache."""
        return self.num_swa_layers == self.num_layers

    @property
    def kv_window_tokens(self) -> float | None:
        """The window that caps a sequence's KV-token count when every layer is windowed (Mistral-7B v0.1: 4,096):
        a sequence of L tokens then holds min(L, window) tokens in every layer (vLLM's ``SlidingWindowManager``
        frees the blocks that left the window; :class:`~pdplan.specs.model_parts.SlidingWindowSpec`). None otherwise:
        beside global layers the window layers are a fixed state per sequence and the token count is not capped."""
        sw = self.sliding_window
        return float(sw.window) if sw is not None and self.all_layers_windowed else None

    @property
    def num_linear_layers(self) -> int:
        """Linear-attention layers: the layers that are neither full nor sliding-window attention."""
        return 0 if self.linear_attention is None else self.num_layers - self.num_kv_layers

    @property
    def swa_kv_heads(self) -> int:
        """K/V heads of the sliding-window layers."""
        sw = self.sliding_window
        return self.num_kv_heads if sw is None or sw.num_kv_heads is None else sw.num_kv_heads

    @property
    def value_head_dim(self) -> int:
        """V head size (``v_head_dim``, else ``head_dim``)."""
        return self.v_head_dim or self.head_dim

    @property
    def moe_layer_indices(self) -> tuple[int, ...]:
        """0-based layers whose FFN is the routed-expert block (empty for dense models)."""
        if self.moe is None:
            return ()
        dense = set(self.moe.dense_layers) | set(range(self.moe.first_dense_layers))
        return tuple(i for i in range(self.num_layers) if i not in dense)

    # ---- GEMM shapes (per layer) --------------------------------------------------------------

    def attention_gemms(self, kv_heads: int | None = None) -> tuple[GemmShape, ...]:
        """Weights of one full-attention layer: q, k, v, o (MLA: q_a, q_b or q, kv_a, kv_b, o); ``kv_heads``: K/V
        heads of this layer kind (sliding-window layers may have their own)."""
        h, heads = self.hidden_size, self.num_attention_heads
        if self.mla is not None:
            m, qk = self.mla, heads * self.head_dim
            q = (
                (GemmShape("q_a", h, m.q_lora_rank), GemmShape("q_b", m.q_lora_rank, qk))
                if m.q_lora_rank is not None
                else (GemmShape("q", h, qk),)
            )
            return (
                *q,
                GemmShape("kv_a", h, m.kv_lora_rank + m.qk_rope_head_dim),
                GemmShape("kv_b", m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim)),
                GemmShape("o", heads * m.v_head_dim, h),
            )
        q_out = heads * self.head_dim * (2 if self.attention_output_gate else 1)
        n_kv = self.num_kv_heads if kv_heads is None else kv_heads
        return (
            GemmShape("q", h, q_out),
            GemmShape("k", h, n_kv * self.head_dim),
            GemmShape("v", h, n_kv * self.value_head_dim),
            GemmShape("o", heads * self.value_head_dim, h),
        )

    def linear_attention_gemms(self) -> tuple[GemmShape, ...]:
        """Gated DeltaNet: in_proj_qkvz (q, k, v, z), in_proj_ba (β, α), out_proj. KDA (Kimi Linear, HF
        modeling_kimi.py): q/k/v (fused here), f_a/f_b (decay gate, rank d_k), b (β), g_a/g_b (output gate,
        rank d_k), o_proj. () if none."""
        la = self.linear_attention
        if la is None:
            return ()
        h, key_dim = self.hidden_size, la.num_key_heads * la.key_head_dim
        value_dim = la.num_value_heads * la.value_head_dim
        if la.kind == "kda":
            rank = la.key_head_dim
            return (
                GemmShape("qkv_proj", h, 2 * key_dim + value_dim),
                GemmShape("f_a_proj", h, rank),
                GemmShape("f_b_proj", rank, key_dim),
                GemmShape("b_proj", h, la.num_value_heads),
                GemmShape("g_a_proj", h, rank),
                GemmShape("g_b_proj", rank, value_dim),
                GemmShape("o_proj", value_dim, h),
            )
        return (
            GemmShape("in_proj_qkvz", h, 2 * key_dim + 2 * value_dim),
            GemmShape("in_proj_ba", h, 2 * la.num_value_heads),
            GemmShape("out_proj", value_dim, h),
        )

    def mlp_gemms(self, intermediate_size: int) -> tuple[GemmShape, ...]:
        """One FFN of the given width: gate/up/down when gated, else up (fc1) and down (fc2)."""
        h = self.hidden_size
        gate = (GemmShape("gate", h, intermediate_size),) if self.gated_mlp else ()
        up = GemmShape("up", h, intermediate_size)
        return (*gate, up, GemmShape("down", intermediate_size, h))

    # ---- parameter counts ---------------------------------------------------------------------

    def _norm_params(self, width: int) -> int:
        return width * (2 if self.norm == "layernorm" else 1)

    def _attention_extra(self, kv_heads: int | None = None) -> int:
        """Biases and norms of one full-attention layer (MLA: q_a / kv_a RMSNorm weights)."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + (self.mla.q_lora_rank or 0)
        q, k, v, _ = self.attention_gemms(kv_heads)
        bias = q.out_features + k.out_features + v.out_features if self.qkv_bias else 0
        bias += self.hidden_size if self.o_bias else 0
        if not self.qk_norm:
            return bias
        if self.qk_norm_span == "layer":  # one weight per q and k channel of the whole projection
            return bias + (self.num_attention_heads + (kv_heads or self.num_kv_heads)) * self.head_dim
        return bias + 2 * self.head_dim

    def _linear_attention_params(self) -> int:
        """GEMMs + depthwise conv over q, k, v (no bias) + dt_bias + A_log + gated RMSNorm of one linear layer
        (GDN: dt_bias and A_log per value head; KDA: dt_bias per channel, A_log per head)."""
        la = self.linear_attention
        if la is None:
            return 0
        conv_dim = 2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim
        dt_bias = la.num_value_heads * la.key_head_dim if la.kind == "kda" else la.num_value_heads
        extra = conv_dim * la.conv_kernel_size + dt_bias + la.num_value_heads + la.value_head_dim
        return sum(g.params for g in self.linear_attention_gemms()) + extra

    def _mlp_params(self, intermediate_size: int) -> int:
        weights = sum(g.params for g in self.mlp_gemms(intermediate_size))
        bias = intermediate_size * (2 if self.gated_mlp else 1) + self.hidden_size
        return weights + (bias if self.mlp_bias else 0)

    def layer_param_counts(self) -> LayerParamCounts:
        """Per-layer parameter breakdown (see :class:`LayerParamCounts`)."""
        moe, h = self.moe, self.hidden_size
        n_moe, n_full = len(self.moe_layer_indices), self.num_kv_layers
        shared = 0
        if moe is not None and moe.num_shared_experts:
            shared = moe.num_shared_experts * self._mlp_params(moe.shared_expert_intermediate_size)
            shared += h if moe.shared_expert_gate else 0
        return LayerParamCounts(
            full_attention=sum(g.params for g in self.attention_gemms()) + self._attention_extra(),
            linear_attention=self._linear_attention_params(),
            dense_mlp=self._mlp_params(self.intermediate_size),
            expert=self._mlp_params(moe.expert_intermediate_size) if moe else 0,
            shared_experts=shared,
            router=h * moe.num_experts if moe else 0,
            layer_norms=2 * self._norm_params(h),
            final_norm=self._norm_params(h),
            num_full_attention_layers=n_full,
            num_linear_attention_layers=self.num_linear_layers,
            num_dense_mlp_layers=self.num_layers - n_moe,
            num_moe_layers=n_moe,
            sliding_attention=sum(g.params for g in self.attention_gemms(self.swa_kv_heads))
            + self._attention_extra(self.swa_kv_heads),
            num_sliding_attention_layers=self.num_swa_layers,
        )

    def embedding_params(self) -> int:
        """Token embedding vocab·h + learned positions (max_pos + offset)·h + BLOOM's LayerNorm."""
        h = self.hidden_size
        positions = 0
        if self.position_embedding == "learned":
            positions = (self.max_position_embeddings + self.position_embedding_offset) * h
        norm = self._norm_params(h) if self.embedding_norm else 0
        return self.vocab_size * h + positions + norm

    def lm_head_params(self) -> int:
        """Stored LM-head parameters: vocab·h, or 0 when tied to the embedding (GEMM still runs)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def non_embedding_params(self) -> int:
        """Σ over layers of attention + FFN + norms, plus the final norm (all experts counted)."""
        c = self.layer_param_counts()
        experts = self.moe.num_experts * c.expert if self.moe else 0
        moe_layer = experts + c.shared_experts + c.router
        return (
            c.num_full_attention_layers * c.full_attention
            + c.num_linear_attention_layers * c.linear_attention
            + c.num_sliding_attention_layers * c.sliding_attention
            + c.num_dense_mlp_layers * c.dense_mlp
            + c.num_moe_layers * moe_layer
            + self.num_layers * c.layer_norms
            + c.final_norm
        )

    def total_params(self) -> int:
        """embedding + lm_head + non-embedding (MTP excluded). Llama-3.1-8B: 8,030,261,248."""
        return self.embedding_params() + self.lm_head_params() + self.non_embedding_params()

    def inactive_expert_params(self) -> int:
        """Routed-expert parameters one token does not touch: L_moe·(E − k)·P_expert."""
        if self.moe is None:
            return 0
        c = self.layer_param_counts()
        return c.num_moe_layers * (self.moe.num_experts - self.moe.experts_per_token) * c.expert

    def active_params(self) -> int:
        """Parameters one token uses: total − inactive routed experts. Embeddings are counted, as in
        Mixtral's published 12.9B; dense models: equal to total_params()."""
        return self.total_params() - self.inactive_expert_params()

    def active_non_embedding_params(self) -> int:
        """active_params() without token embedding and LM head (≈ layer FLOPs per token / 2)."""
        return self.non_embedding_params() - self.inactive_expert_params()

    # ---- bytes --------------------------------------------------------------------------------

    def weight_bytes(self, dtype_bytes: float) -> float:
        """Bytes of all stored weights at ``dtype_bytes`` per parameter: total_params()·b, the routed experts at
        min(b, ``expert_weight_bytes``) when the checkpoint stores them narrower, and the token embedding and LM head
        at :func:`unquantized_bytes` (FP8 and 4-bit checkpoints and engines keep them BF16)."""
        expert_b = self.expert_bytes(dtype_bytes)
        routed = 0
        if expert_b != dtype_bytes and self.moe is not None:
            c = self.layer_param_counts()
            routed = c.num_moe_layers * self.moe.num_experts * c.expert
        vocab = self.embedding_params() + self.lm_head_params()
        rest = self.total_params() - routed - vocab
        return rest * dtype_bytes + routed * expert_b + vocab * unquantized_bytes(dtype_bytes)

    def expert_bytes(self, dtype_bytes: float) -> float:
        """Bytes per routed-expert weight when served at ``dtype_bytes``: never wider than stored."""
        return dtype_bytes if self.expert_weight_bytes is None else min(dtype_bytes, self.expert_weight_bytes)

    @property
    def checkpoint_weight_bytes(self) -> float:
        """Bytes per weight as stored: 1 for FP8 checkpoints, else 2 (BF16/FP16)."""
        return 1.0 if self.weight_dtype == "fp8" else 2.0

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str | None = None) -> "ModelSpec":
        """Validate a mapping; a failure becomes one :class:`SpecError` naming source and field."""
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise spec_error_from(err, source, cls) from None


# --- cross-field rules (the model validator's) ----------------------------------------------------------


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
    if not sw.layers:
        raise FieldError("sliding_window.layers", "needs at least one sliding-window layer")
    if m.all_layers_windowed and sw.num_kv_heads not in (None, m.num_kv_heads):
        raise FieldError(
            "sliding_window.num_kv_heads",
            f"every layer is windowed: the window layers' K/V heads are the model's {m.num_kv_heads} (no global layer)",
        )
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


# --- one-line errors from pydantic's ----------------------------------------------------------------------


def spec_error_from(err: ValidationError, source: str | None, model: type[BaseModel]) -> SpecError:
    """First pydantic error → one-line SpecError (field path, message, a hint for typos)."""
    errors = err.errors()
    # an unknown key usually explains a "missing" one (a typo), so report it first
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(p) for p in first["loc"]]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):  # a nested block's validator names its own field
        return SpecError(cause.message, source=source, field=".".join([*loc, cause.field]))
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        blocks: dict[str, type[BaseModel]] = {
            "moe": MoeSpec,
            "mla": MlaSpec,
            "linear_attention": LinearAttentionSpec,
            "sliding_window": SlidingWindowSpec,
        }
        owner = blocks.get(loc[0], model) if len(loc) > 1 else model
        close = difflib.get_close_matches(loc[-1], list(owner.model_fields), n=1, cutoff=0.6)
        message = "unknown field" + (f"; did you mean {close[0]!r}?" if close else "")
    elif first["type"] == "missing":
        message = "required field is missing"
    else:
        message = f"{message} (got {first['input']!r:.60})"
    return SpecError(message, source=source, field=".".join(loc) or None)
