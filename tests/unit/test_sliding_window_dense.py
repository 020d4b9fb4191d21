"""Dense models with sliding-window attention from their Hugging Face config.json (issue #25 item 6): Mistral-7B v0.1
(every layer windowed, 4,096 of 32,768 tokens) and Qwen2 with ``use_sliding_window`` (the layers from
``max_window_layers`` on), hand-worked."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.hf_config import load_hf_config
from pdplan.perf.op_types import PassShape
from pdplan.perf.ops import forward_ops
from pdplan.specs.model import ModelSpec
from pdplan.transfer.kv_inputs import kv_shape_from_model

HF = Path(__file__).parent / "data" / "hf"
MISTRAL = HF / "mistral-7b-v0.1.json"  # mistralai/Mistral-7B-v0.1 config.json
MISTRAL_KV_PER_TOKEN = 32 * 8 * (128 + 128) * 2  # layers x K/V heads x (d_k + d_v) x bf16 = 131,072 B


def _write(tmp_path: Path, base: Path, **changes: object) -> Path:
    data = json.loads(base.read_text()) | changes
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


KEYS = ("count", "batch", "context", "kv_bytes_per_token")


def _cores(model: ModelSpec, phase: str, tokens: float) -> dict[str, dict[str, float]]:
    shape = PassShape(phase, np.array(1.0), np.array(tokens), np.array(1.0))  # type: ignore[arg-type]
    return {
        op.name: {f.name: float(np.ravel(getattr(op, f.name))[0]) for f in dataclasses.fields(op) if f.name in KEYS}
        for op in forward_ops(model, shape)
        if op.name.endswith("core")
    }


def test_mistral_7b_loads_with_every_layer_windowed() -> None:
    spec = load_hf_config(MISTRAL)
    assert spec.sliding_window is not None
    assert (spec.sliding_window.window, spec.sliding_window.layers) == (4096, tuple(range(32)))
    assert spec.all_layers_windowed
    assert (spec.num_kv_layers, spec.num_swa_layers) == (0, 32)
    assert 7.24e9 < spec.total_params() < 7.25e9  # the published 7.24 B parameters


def test_mistral_7b_kv_bytes_at_4k_and_32k() -> None:
    """bf16: 131,072 B per token. At 4k (= the window) a sequence holds 4,096 x 131,072 = 536,870,912 B, exactly what
    the engine holds. At 32k vLLM's SlidingWindowManager keeps the last 4,096 tokens, and so does pdplan: 536,870,912
    B, not 32,768 x 131,072 = 4,294,967,296 B (8x); no window state."""
    spec = load_hf_config(MISTRAL)
    assert spec.kv_bytes_per_token(2) == MISTRAL_KV_PER_TOKEN == 131_072
    assert spec.sequence_state_bytes(2) == 0.0
    assert spec.sequence_cache_bytes(4096, 2) == 536_870_912
    assert spec.kv_window_tokens == 4096.0
    assert spec.sequence_cache_bytes(32768, 2) == 536_870_912 == 4096 * 131_072
    assert spec.sequence_cache_bytes(1000, 2) == 1000 * 131_072  # below the window: every token
    assert spec.sequence_cache_bytes(32768, 2, tp=8) == 536_870_912 / 8  # 8 K/V heads over 8 GPUs
    shape = kv_shape_from_model(spec, 2.0)
    assert (shape.kv_bytes_per_token, shape.state_bytes_per_sequence) == (131_072, 0.0)


def test_mistral_7b_attention_runs_over_the_window() -> None:
    """Decode: one op of 32 window layers reading min(context, 4,096) tokens, no full-attention core. Prefill of 32,768
    tokens: c·w − w²/2 = 134,217,728 − 8,388,608 = 125,829,120 query-key pairs (4.3x fewer than 536,870,912)."""
    spec = load_hf_config(MISTRAL)
    for context, seen in ((1024.0, 1024.0), (4096.0, 4096.0), (32768.0, 4096.0)):
        cores = _cores(spec, "decode", context)
        assert set(cores) == {"swa.core"}
        assert (cores["swa.core"]["count"], cores["swa.core"]["context"]) == (32.0, seen)
        assert cores["swa.core"]["kv_bytes_per_token"] == 8 * 256 * 2  # one layer's K/V per token
    pre = _cores(spec, "prefill", 32768.0)["swa.core"]
    assert pre["batch"] * pre["context"] ** 2 / 2 == pytest.approx(125_829_120)


def test_qwen2_windows_the_layers_from_max_window_layers(tmp_path: Path) -> None:
    """Qwen2.5-72B with ``use_sliding_window`` and ``max_window_layers`` 70: layers 70..79 windowed (Qwen2Config's
    layer_types rule), 70 global layers of 8 K/V heads x 256 x 2 B = 286,720 B per token, and a window state of
    10 x 4,096 x 4,096 B = 167,772,160 B per sequence."""
    path = _write(tmp_path, HF / "qwen2.5-72b.json", use_sliding_window=True, sliding_window=4096, max_window_layers=70)
    spec = load_hf_config(path)
    assert spec.sliding_window is not None
    assert spec.sliding_window.layers == tuple(range(70, 80))
    assert spec.kv_bytes_per_token(2) == 70 * 8 * 256 * 2 == 286_720
    assert spec.sequence_state_bytes(2) == 10 * 4096 * 8 * 256 * 2 == 167_772_160
    assert spec.sequence_cache_bytes(32768, 2) == 32768 * 286_720 + 167_772_160


def test_layer_types_pick_the_windowed_layers(tmp_path: Path) -> None:
    types = ["sliding_attention", "full_attention"] * 16
    spec = load_hf_config(_write(tmp_path, MISTRAL, layer_types=types))
    assert spec.sliding_window is not None
    assert spec.sliding_window.layers == tuple(range(0, 32, 2))
    assert spec.kv_bytes_per_token(2) == 16 * 8 * 256 * 2


@pytest.mark.parametrize(
    ("base", "changes"),
    [
        (MISTRAL, {"sliding_window": None}),  # Mistral-7B v0.2 and later
        (MISTRAL, {"sliding_window": 32768}),  # a window as long as the context never slides
        (MISTRAL, {"layer_types": ["full_attention"] * 32}),
        (HF / "qwen2.5-72b.json", {}),  # use_sliding_window false: its sliding_window 131,072 is ignored
        (HF / "qwen2.5-72b.json", {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 80}),
    ],
)
def test_configs_without_a_sliding_layer_stay_full_attention(
    tmp_path: Path, base: Path, changes: dict[str, object]
) -> None:
    spec = load_hf_config(_write(tmp_path, base, **changes))
    assert spec.sliding_window is None
    assert spec.num_kv_layers == spec.num_layers


def test_qwen2_window_needs_max_window_layers(tmp_path: Path) -> None:
    data = json.loads((HF / "qwen2.5-72b.json").read_text()) | {"use_sliding_window": True, "sliding_window": 4096}
    del data["max_window_layers"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="missing required key 'max_window_layers'") as info:
        load_hf_config(path)
    assert info.value.field == "max_window_layers"
