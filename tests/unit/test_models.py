"""Model presets: published sizes, KV bytes per token, per-layer breakdowns.

Published figures (model cards / papers) are matched within 2%; KV bytes exactly (docs/hardware_facts.md §4).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pdplan.io.models import list_preset_paths, load_model_yaml
from pdplan.specs.model import ModelSpec

PRESET_IDS = {
    "opt-13b",
    "opt-66b",
    "opt-175b",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "mixtral-8x7b",
    "deepseek-v3",
    "qwen3-next-80b-a3b",
    "qwen3.5-397b-a17b",
    "minimax-m2.5",
    "deepseek-r1",
    "kimi-k2",
    "gpt-oss-120b",
    "qwen3-30b-a3b",
    "kimi-linear-48b-a3b",
    "mimo-v2-flash",
}


def preset(name: str) -> ModelSpec:
    return load_model_yaml(list_preset_paths()[name])


def test_every_architecture_id_has_a_preset() -> None:
    assert set(list_preset_paths()) == PRESET_IDS


@pytest.mark.parametrize("name", sorted(PRESET_IDS))
def test_preset_loads_and_name_matches_file(name: str) -> None:
    path = list_preset_paths()[name]
    spec = load_model_yaml(path)
    assert spec.name == name == Path(path).stem
    assert spec.source.strip()
    assert spec.total_params() == (spec.embedding_params() + spec.lm_head_params() + spec.non_embedding_params())


# (name, published total params, published active params or None), sources in each preset's notes.
PUBLISHED_PARAMS = [
    ("llama-2-7b", 6.74e9, None),
    ("llama-2-13b", 13.0e9, None),
    ("llama-2-70b", 69.0e9, None),
    ("llama-3.1-8b", 8.03e9, None),
    ("llama-3.1-70b", 70.6e9, None),
    ("llama-3.1-405b", 405e9, None),
    ("opt-13b", 12.9e9, None),
    ("opt-66b", 66e9, None),
    ("opt-175b", 175e9, None),
    ("qwen2.5-32b", 32.5e9, None),
    ("qwen2.5-72b", 72.7e9, None),
    ("qwen3-32b", 32.8e9, None),
    ("mixtral-8x7b", 46.7e9, 12.9e9),
    ("qwen3-235b-a22b", 235e9, 22e9),
    ("deepseek-v3", 671e9, 37e9),
    ("qwen3-next-80b-a3b", 80e9, None),  # active: see the dedicated test
    ("qwen3.5-397b-a17b", 397e9, None),  # "A17B" is nominal: 17.35B active computed (embeddings included)
    ("minimax-m2.5", 229e9, None),  # published 10B active counts no embeddings
    ("deepseek-r1", 671e9, 37e9),  # DeepSeek-V3 architecture (arXiv:2501.12948)
    ("kimi-k2", 1.04e12, None),  # Kimi Team, arXiv:2507.20534; its "32B activated" is rounded (count: 32.86B)
    ("gpt-oss-120b", 116.8e9, None),  # OpenAI model card, arXiv:2508.10925 (5.1B active excludes embeddings)
    ("qwen3-30b-a3b", 30.5e9, 3.3e9),  # Qwen Team, arXiv:2505.09388 Table 2
    (
        "mimo-v2-flash",
        309e9,
        None,
    ),  # model card XiaomiMiMo/MiMo-V2-Flash; its 15B active: 15.4B counted with embeddings
]


@pytest.mark.parametrize(("name", "total", "active"), PUBLISHED_PARAMS)
def test_published_parameter_counts_within_2_percent(name: str, total: float, active: float | None) -> None:
    spec = preset(name)
    assert spec.total_params() == pytest.approx(total, rel=0.02)
    if active is not None or not spec.is_moe:
        assert spec.active_params() == pytest.approx(active or total, rel=0.02)


def test_exact_counts_match_checkpoints() -> None:
    # HF safetensors totals: Llama-3.1-8B 8,030,261,248; Llama-2-7B 6,738,415,616;
    # Mixtral-8x7B 46,702,792,704.
    assert preset("llama-3.1-8b").total_params() == 8_030_261_248
    assert preset("llama-2-7b").total_params() == 6_738_415_616
    assert preset("mixtral-8x7b").total_params() == 46_702_792_704


def test_qwen3_next_active_params_around_nominal_3b() -> None:
    # "A3B" is a rounded name: the layers use 3.25B per token, 3.87B with embedding and LM head.
    spec = preset("qwen3-next-80b-a3b")
    assert 3.0e9 < spec.active_non_embedding_params() < 3.5e9
    assert 3.0e9 < spec.active_params() < 4.0e9


KV_BF16 = {
    "llama-2-7b": 524_288,
    "llama-2-13b": 819_200,
    "llama-2-70b": 327_680,
    "llama-3.1-8b": 131_072,
    "llama-3.1-70b": 327_680,
    "llama-3.1-405b": 516_096,
    "opt-13b": 819_200,
    "opt-66b": 2_359_296,
    "opt-175b": 4_718_592,
    "qwen2.5-32b": 262_144,
    "qwen2.5-72b": 327_680,
    "qwen3-32b": 262_144,
    "qwen3-235b-a22b": 192_512,
    "mixtral-8x7b": 131_072,
    "deepseek-v3": 70_272,
    "qwen3-next-80b-a3b": 24_576,
}


@pytest.mark.parametrize(("name", "kv"), sorted(KV_BF16.items()))
def test_kv_bytes_per_token_bf16_and_fp8(name: str, kv: int) -> None:
    spec = preset(name)
    assert spec.kv_bytes_per_token(2) == kv
    assert spec.kv_bytes_per_token(1) == kv / 2


def test_opt_66b_kv_matches_distserve() -> None:
    # DistServe: 512 tokens of OPT-66B KV cache ≈ 1.13 GB (fp16); the figure is in GiB (2^30 B).
    assert preset("opt-66b").kv_bytes_per_token(2) * 512 == pytest.approx(1.13 * 2**30, rel=0.01)


def test_attention_kinds() -> None:
    kinds = {n: preset(n).attention_kind for n in ("llama-2-7b", "llama-3.1-8b", "deepseek-v3", "qwen3-next-80b-a3b")}
    assert kinds == {"llama-2-7b": "mha", "llama-3.1-8b": "gqa", "deepseek-v3": "mla", "qwen3-next-80b-a3b": "hybrid"}


def test_qwen3_next_hybrid_layout_and_state() -> None:
    spec = preset("qwen3-next-80b-a3b")
    assert spec.full_attention_layer_indices == tuple(range(3, 48, 4))
    assert spec.num_kv_layers == 12
    # docs/hardware_facts.md §4: recurrent 36·32·128·128 fp32 = 75,497,472 B; conv 36·8192·3 bf16 = 1,769,472.
    assert spec.linear_state_bytes_per_sequence() == 75_497_472 + 1_769_472
    assert spec.linear_state_bytes_per_sequence(state_dtype_bytes=2) == 37_748_736 + 1_769_472
    assert preset("llama-3.1-8b").linear_state_bytes_per_sequence() == 0


def test_deepseek_v3_layer_breakdown() -> None:
    spec = preset("deepseek-v3")
    c = spec.layer_param_counts()
    assert (c.num_dense_mlp_layers, c.num_moe_layers) == (3, 58)
    assert spec.moe_layer_indices[0] == 3
    assert c.expert == 3 * 7168 * 2048
    assert c.shared_experts == 3 * 7168 * 2048
    assert c.router == 7168 * 256
    names = [g.name for g in spec.attention_gemms()]
    assert names == ["q_a", "q_b", "kv_a", "kv_b", "o"]
    kv_a = spec.attention_gemms()[2]
    assert (kv_a.in_features, kv_a.out_features) == (7168, 512 + 64)


def test_gemm_shapes_dense_and_gated() -> None:
    llama = preset("llama-3.1-70b")
    shapes = {g.name: (g.in_features, g.out_features) for g in llama.attention_gemms()}
    assert shapes == {"q": (8192, 8192), "k": (8192, 1024), "v": (8192, 1024), "o": (8192, 8192)}
    assert [g.name for g in llama.mlp_gemms(llama.intermediate_size)] == ["gate", "up", "down"]
    opt = preset("opt-66b")
    assert [g.name for g in opt.mlp_gemms(opt.intermediate_size)] == ["up", "down"]
    nxt = preset("qwen3-next-80b-a3b")
    q = nxt.attention_gemms()[0]
    assert q.out_features == 2 * 16 * 256  # q plus output gate
    assert [g.out_features for g in nxt.linear_attention_gemms()] == [12288, 64, 2048]


def test_weight_bytes_scale_with_dtype() -> None:
    spec = preset("llama-3.1-70b")
    assert spec.weight_bytes(2) == 2 * spec.total_params()
    # FP8: everything at 1 B except the embedding and LM head, kept BF16 (2 x 128,256 x 8,192 = 2,101,346,304 params)
    vocab = 2 * 128_256 * 8_192
    assert spec.embedding_params() + spec.lm_head_params() == vocab
    assert spec.weight_bytes(1) == (spec.total_params() - vocab) * 1 + vocab * 2


def test_tied_embeddings_have_no_stored_lm_head() -> None:
    opt = preset("opt-13b")
    assert opt.lm_head_params() == 0
    assert opt.embedding_params() == 50272 * 5120 + (2048 + 2) * 5120
