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
        "moe": spec.moe,
    }


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
        ("sliding_window.json", "sliding_window", "not modelled"),
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
    assert len(SUPPORTED_MODEL_TYPES) == 16


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
    assert (oss.sliding_window, oss.sliding_window_layers) == (128, 18)  # layer_types: every even layer
    assert load_hf_config(HF / "qwen3-30b-a3b.json").weight_dtype == "bf16"


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
