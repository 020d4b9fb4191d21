"""Hugging Face config.json → ModelSpec, and the error paths of both model loaders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdplan.errors import SpecError
from pdplan.io.hf_config import SUPPORTED_MODEL_TYPES, load_hf_config
from pdplan.io.models import list_preset_paths, load_model_yaml
from pdplan.specs.model import ModelSpec

HF = Path(__file__).parent / "data" / "hf"
BAD = Path(__file__).parents[1] / "bad_inputs" / "models"

# config.json fixtures (copies of the real checkpoints' configs) that have a preset of the same id
WITH_PRESET = sorted(p.stem for p in HF.glob("*.json") if p.stem in list_preset_paths())


def derived(spec: ModelSpec) -> dict[str, object]:
    return {
        "total": spec.total_params(),
        "active": spec.active_params(),
        "embedding": spec.embedding_params(),
        "lm_head": spec.lm_head_params(),
        "layers": spec.layer_param_counts(),
        "kv_bf16": spec.kv_bytes_per_token(2),
        "state": spec.linear_state_bytes_per_sequence(),
        "kind": spec.attention_kind,
        "max_pos": spec.max_position_embeddings,
        "gemms": spec.attention_gemms(),
        "weight_dtype": spec.weight_dtype,
        "expert_bytes": spec.expert_weight_bytes,
        "block": spec.weight_block_size,
        "moe": spec.moe,
    }


def test_kimi_linear_kda_and_mla() -> None:
    """Kimi-Linear-48B-A3B (fixture transcribed from its public config.json): 7 MLA layers of 512 + 64 latent values
    (8,064 B/token in bf16); 20 KDA layers, each 32 x 128 x 128 fp32 state (2,097,152 B) + q/k/v conv tails
    3 x 4096 x 3 x 2 B (73,728 B): 43,417,600 B per sequence. KDA projections per layer: q/k/v 3 x 2304 x 4096,
    f_a/g_a 2 x 2304 x 128, f_b/g_b 2 x 128 x 4096, b 2304 x 32, o 4096 x 2304 = 39,460,864 + convs 49,152 + A_log 32 +
    dt_bias 4,096 + o_norm 128 = 39,514,272."""
    spec = load_hf_config(HF / "kimi-linear-48b-a3b.json")
    assert spec.attention_kind == "mla"
    assert spec.full_attention_layer_indices == (3, 7, 11, 15, 19, 23, 26)
    assert spec.kv_bytes_per_token(2) == 7 * 576 * 2 == 8064
    assert spec.linear_state_bytes_per_sequence() == 20 * (32 * 128 * 128 * 4 + 3 * 4096 * 3 * 2) == 43_417_600
    assert spec.layer_param_counts().linear_attention == 39_514_272


def test_kimi_linear_layer_lists_must_partition(tmp_path: Path) -> None:
    data = json.loads((HF / "kimi-linear-48b-a3b.json").read_text())
    data["linear_attn_config"]["kda_layers"] = [1, 2]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="partition") as info:
        load_hf_config(path)
    assert info.value.field == "linear_attn_config.kda_layers"


def test_mimo_v2_flash_sliding_window_kv() -> None:
    """MiMo-V2-Flash (fixture: its config.json as AIConfigurator ships it): 9 global layers of 4 KV heads x (192 + 128)
    x 2 B = 23,040 B/token; 39 sliding-window layers of 8 KV heads, 5,120 B/token each, at most 128 tokens:
    39 x 5,120 x 128 = 25,559,040 B per sequence, whatever the prompt length."""
    from pdplan.transfer.kv import kv_bytes_per_request
    from pdplan.transfer.kv_inputs import kv_shape_from_model

    spec = load_hf_config(HF / "mimo-v2-flash.json")
    assert (spec.num_kv_layers, spec.num_swa_layers, spec.swa_kv_heads) == (9, 39, 8)
    assert spec.kv_bytes_per_token(2) == 9 * 4 * 320 * 2 == 23_040
    assert spec.window_kv_bytes_per_token(2) == 39 * 8 * 320 * 2
    shape = kv_shape_from_model(spec, 2.0)
    assert shape.state_bytes_per_sequence == 39 * 5120 * 128 == 25_559_040
    kv = kv_bytes_per_request([8192, 32768], shape)
    assert kv[1] - kv[0] == (32768 - 8192) * 23_040  # the window part does not grow with the prompt


def test_every_layer_windowed_needs_the_models_kv_heads(tmp_path: Path) -> None:
    """MiMo-V2-Flash with every layer windowed: its window layers' 8 K/V heads would leave the model's 4 unused."""
    data = json.loads((HF / "mimo-v2-flash.json").read_text())
    data["hybrid_layer_pattern"] = [1] * 48
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="every layer is windowed") as info:
        load_hf_config(path)
    assert info.value.field == "sliding_window.num_kv_heads"


def test_fixtures_cover_the_main_families() -> None:
    assert {"llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "qwen3-next-80b-a3b", "opt-66b"} <= set(WITH_PRESET)


@pytest.mark.parametrize("name", WITH_PRESET)
def test_converted_config_equals_preset(name: str) -> None:
    spec = load_hf_config(HF / f"{name}.json")
    preset = load_model_yaml(list_preset_paths()[name])
    assert spec.name == name
    assert derived(spec) == derived(preset)


def test_llama_3_1_8b_exact() -> None:
    spec = load_hf_config(HF / "llama-3.1-8b.json")
    assert spec.total_params() == 8_030_261_248
    assert spec.kv_bytes_per_token(2) == 131_072
    assert spec.family == "llama"
    assert "Defaults applied" not in spec.notes  # every key present


def test_bloom_and_gpt_neox_exact_counts() -> None:
    # bigscience/bloom-560m: 559,214,592 parameters; EleutherAI/gpt-neox-20b: 20,554,567,680.
    bloom = load_hf_config(HF / "bloom-560m.json")
    assert bloom.total_params() == 559_214_592
    assert bloom.position_embedding == "alibi"
    assert "2048" in bloom.notes  # the applied context length is stated, not silent
    neox = load_hf_config(HF / "gpt-neox-20b.json")
    assert neox.total_params() == 20_554_567_680


def test_config_json_takes_folder_name(tmp_path: Path) -> None:
    folder = tmp_path / "Llama-3.1-8B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "llama-3.1-8b.json").read_text())
    spec = load_hf_config(folder / "config.json")
    assert (spec.name, spec.display_name) == ("llama-3.1-8b-instruct", "Llama-3.1-8B-Instruct")
    assert load_hf_config(folder / "config.json", name="my-model").name == "my-model"


def test_qwen3_next_layer_types_list(tmp_path: Path) -> None:
    data = json.loads((HF / "qwen3-next-80b-a3b.json").read_text())
    del data["full_attention_interval"]
    data["layer_types"] = ["linear_attention"] * 3 + ["full_attention"]
    data["num_hidden_layers"] = 4
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data))
    spec = load_hf_config(path)
    assert spec.full_attention_layer_indices == (3,)
    assert spec.kv_bytes_per_token(2) == 2 * 2 * 256 * 2


@pytest.mark.parametrize(
    ("fixture", "field", "words"),
    [
        ("unsupported_model_type.json", "model_type", "unsupported model_type 'gpt2'; supported:"),
        ("missing_hidden_size.json", "hidden_size", "missing required key 'hidden_size'"),
        ("no_model_type.json", "model_type", "missing required key 'model_type'"),
        ("truncated.json", None, "invalid JSON"),
        ("empty.json", None, "empty file"),
        ("junk.json", None, "binary data"),
        ("string_int.json", "hidden_size", "must be an integer"),
        ("sliding_window_layer_types.json", "layer_types", "must list 'sliding_attention' or 'full_attention'"),
        ("list_toplevel.json", None, "expected a JSON object"),
        ("does_not_exist.json", None, "file not found"),
    ],
)
def test_bad_hf_configs(fixture: str, field: str | None, words: str) -> None:
    with pytest.raises(SpecError) as info:
        load_hf_config(BAD / fixture)
    err = info.value
    assert err.field == field
    assert words in str(err)
    assert fixture in str(err)
    assert "\n" not in str(err)


def test_unsupported_lists_every_supported_type() -> None:
    with pytest.raises(SpecError) as info:
        load_hf_config(BAD / "unsupported_model_type.json")
    assert all(t in str(info.value) for t in SUPPORTED_MODEL_TYPES)
    assert len(SUPPORTED_MODEL_TYPES) == 18


@pytest.mark.parametrize(
    ("fixture", "field", "words"),
    [
        ("typo_field.yaml", "hidden_sise", "did you mean 'hidden_size'"),
        ("bad_kv_heads.yaml", "num_kv_heads", "does not divide"),
        ("bad_moe_topk.yaml", "moe.experts_per_token", "> num_experts"),
        ("negative_layers.yaml", "num_layers", "greater than 0"),
        ("list_toplevel.yaml", None, "expected a YAML mapping"),
        ("bad_syntax.yaml", None, "line 3:"),
        ("empty.yaml", None, "file is empty"),
        ("junk.json", None, "binary data"),
        ("missing.yaml", None, "file not found"),
    ],
)
def test_bad_model_yaml(fixture: str, field: str | None, words: str) -> None:
    with pytest.raises(SpecError) as info:
        load_model_yaml(BAD / fixture)
    err = info.value
    assert err.field == field
    assert words in str(err)
    assert fixture in str(err)
    assert "\n" not in str(err)
    assert err.exit_code == 2


def test_missing_required_field_named(tmp_path: Path) -> None:
    text = list_preset_paths()["llama-3.1-8b"].read_text().replace("head_dim: 128\n", "")
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match="head_dim: required field is missing"):
        load_model_yaml(path)


def test_quantization_config_sets_the_stored_weight_dtype() -> None:
    # DeepSeek-V3/R1 and Kimi K2 ship FP8 with 128x128 block scales; gpt-oss MXFP4 experts; Qwen3-30B-A3B BF16
    assert load_hf_config(HF / "deepseek-v3.json").weight_dtype == "fp8"
    assert load_hf_config(HF / "kimi-k2.json").checkpoint_weight_bytes == 1.0
    oss = load_hf_config(HF / "gpt-oss-120b.json")
    assert (oss.weight_dtype, oss.expert_weight_bytes) == ("bf16", 0.53125)
    assert oss.sliding_window is not None
    assert (oss.sliding_window.window, oss.sliding_window.layers) == (128, tuple(range(0, 36, 2)))  # every even layer
    assert load_hf_config(HF / "qwen3-30b-a3b.json").weight_dtype == "bf16"


def test_block_scaled_fp8_keeps_its_block_side(tmp_path: Path) -> None:
    # MiniMax-M2.5 and MiMo-V2-Flash: quantization_config weight_block_size [128, 128]; a non-square block is refused
    assert load_hf_config(HF / "minimax-m2.5.json").weight_block_size == 128
    assert load_hf_config(HF / "mimo-v2-flash.json").weight_block_size == 128
    assert load_hf_config(HF / "qwen3-30b-a3b.json").weight_block_size is None
    data = json.loads((HF / "minimax-m2.5.json").read_text())
    data["quantization_config"]["weight_block_size"] = [128, 64]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="only square"):
        load_hf_config(path)


def test_mxfp4_experts_shrink_the_weight_bytes() -> None:
    # 36 layers x 128 experts x (3 x 2880 x 2880 + biases) routed weights at 0.53125 B instead of 2 B
    oss = load_hf_config(HF / "gpt-oss-120b.json")
    c = oss.layer_param_counts()
    routed = 36 * 128 * c.expert
    assert oss.weight_bytes(2.0) == pytest.approx((oss.total_params() - routed) * 2.0 + routed * 0.53125)
    assert 60e9 < oss.weight_bytes(2.0) < 66e9  # the published ~63 GB checkpoint (MXFP4 experts)


def test_unmodelled_quantization_is_an_error(tmp_path: Path) -> None:
    data = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    data["quantization_config"] = {"quant_method": "awq", "bits": 4}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="quant_method 'awq' is not modelled"):
        load_hf_config(path)
