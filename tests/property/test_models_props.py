"""Invariants of ModelSpec's derived sizes over generated dense / MoE / MLA / hybrid specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.io.models import load_model_yaml
from pdplan.specs.model import ModelSpec

SETTINGS = settings(deadline=None, max_examples=50)


@st.composite
def moe_blocks(draw: st.DrawFn, layers: int) -> dict[str, Any]:
    experts = draw(st.integers(1, 512))
    shared = draw(st.integers(0, 2))
    return {
        "num_experts": experts,
        "experts_per_token": draw(st.integers(1, experts)),
        "expert_intermediate_size": draw(st.integers(1, 8192)),
        "num_shared_experts": shared,
        "shared_expert_intermediate_size": draw(st.integers(1, 8192)) if shared else 0,
        "shared_expert_gate": draw(st.booleans()) if shared else False,
        "first_dense_layers": draw(st.integers(0, layers - 1)),
    }


@st.composite
def spec_dicts(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["dense", "moe", "mla", "hybrid"]))
    layers = draw(st.integers(2, 96))
    kv_heads = draw(st.integers(1, 16))
    heads = kv_heads * draw(st.integers(1, 8))
    learned = draw(st.booleans())
    d: dict[str, Any] = {
        "name": "gen",
        "family": "generated",
        "source": "hypothesis",
        "num_layers": layers,
        "hidden_size": draw(st.integers(64, 16384)),
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": draw(st.sampled_from([32, 64, 96, 128, 256])),
        "intermediate_size": draw(st.integers(1, 65536)),
        "gated_mlp": draw(st.booleans()),
        "vocab_size": draw(st.integers(1, 262144)),
        "tie_word_embeddings": draw(st.booleans()),
        "max_position_embeddings": draw(st.integers(1, 1 << 20)),
        "position_embedding": "learned" if learned else draw(st.sampled_from(["rope", "alibi"])),
        "position_embedding_offset": draw(st.integers(0, 2)) if learned else 0,
        "norm": draw(st.sampled_from(["rmsnorm", "layernorm"])),
        "mlp_bias": draw(st.booleans()),
    }
    if kind == "moe" or (kind in ("mla", "hybrid") and draw(st.booleans())):
        d["moe"] = draw(moe_blocks(layers))
    if kind == "mla":
        rope, nope = draw(st.sampled_from([32, 64])), draw(st.sampled_from([64, 128]))
        d |= {
            "num_kv_heads": heads,
            "head_dim": rope + nope,
            "mla": {
                "kv_lora_rank": draw(st.integers(16, 1024)),
                "qk_rope_head_dim": rope,
                "q_lora_rank": draw(st.one_of(st.none(), st.integers(16, 2048))),
                "qk_nope_head_dim": nope,
                "v_head_dim": draw(st.sampled_from([64, 128])),
            },
        }
    else:
        d |= {
            "qkv_bias": draw(st.booleans()),
            "o_bias": draw(st.booleans()),
            "qk_norm": draw(st.booleans()),
            "attention_output_gate": draw(st.booleans()),
        }
    if kind == "hybrid":
        k_heads = draw(st.integers(1, 16))
        d["linear_attention"] = {
            "kind": "gated_deltanet",
            "full_attention_interval": draw(st.integers(2, layers)),
            "num_key_heads": k_heads,
            "num_value_heads": k_heads * draw(st.integers(1, 4)),
            "key_head_dim": draw(st.sampled_from([64, 128])),
            "value_head_dim": draw(st.sampled_from([64, 128])),
            "conv_kernel_size": draw(st.integers(1, 8)),
            "state_dtype_bytes": draw(st.sampled_from([2, 4])),
            "conv_state_dtype_bytes": 2,
        }
    return d


specs = spec_dicts().map(ModelSpec.from_mapping)


@SETTINGS
@given(specs)
def test_fp8_kv_is_half_of_bf16(spec: ModelSpec) -> None:
    assert spec.kv_bytes_per_token(1) * 2 == spec.kv_bytes_per_token(2) > 0


@SETTINGS
@given(specs)
def test_fp8_weights_are_half_of_bf16_but_the_vocabulary_layers(spec: ModelSpec) -> None:
    """FP8 halves every weight but the token embedding and LM head, which stay BF16 (unquantized_bytes)."""
    vocab = spec.embedding_params() + spec.lm_head_params()
    assert spec.weight_bytes(2) == 2 * spec.total_params()
    assert spec.weight_bytes(1) * 2 == spec.weight_bytes(2) + 2 * vocab


@SETTINGS
@given(specs)
def test_active_at_most_total_and_parts_add_up(spec: ModelSpec) -> None:
    assert 0 < spec.active_params() <= spec.total_params()
    assert spec.active_non_embedding_params() <= spec.non_embedding_params()
    assert spec.total_params() == (spec.embedding_params() + spec.lm_head_params() + spec.non_embedding_params())
    all_experts_active = spec.moe is None or spec.moe.experts_per_token == spec.moe.num_experts
    assert (spec.active_params() == spec.total_params()) == all_experts_active


@SETTINGS
@given(specs)
def test_layer_kinds_partition_the_stack(spec: ModelSpec) -> None:
    c = spec.layer_param_counts()
    assert c.num_full_attention_layers + c.num_linear_attention_layers == spec.num_layers
    assert c.num_dense_mlp_layers + c.num_moe_layers == spec.num_layers
    assert (c.num_moe_layers > 0) == spec.is_moe
    assert (spec.linear_state_bytes_per_sequence() > 0) == spec.is_hybrid
    assert 0 < spec.num_kv_layers <= spec.num_layers


@SETTINGS
@given(spec_dicts())
def test_more_layers_more_params_and_kv(d: dict[str, Any]) -> None:
    spec = ModelSpec.from_mapping(d)
    bigger = ModelSpec.from_mapping(d | {"num_layers": d["num_layers"] + 4})
    assert bigger.total_params() > spec.total_params()
    assert bigger.kv_bytes_per_token(2) >= spec.kv_bytes_per_token(2)


@SETTINGS
@given(specs)
def test_yaml_round_trip(tmp_path_factory: Any, spec: ModelSpec) -> None:
    path = Path(tmp_path_factory.getbasetemp()) / "model_round_trip.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    assert load_model_yaml(path) == spec
