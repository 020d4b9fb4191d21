"""Sliding-window attention: the equivalent causal shapes, the ops split and the model spec (hand-worked)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from pdplan.io.catalog import open_catalog
from pdplan.perf.ops import PassShape, forward_ops
from pdplan.perf.sliding_window import window_decode_context, window_pairs, window_prefill_shape
from pdplan.specs.model import ModelSpec

CAT = open_catalog()


def test_pairs_inside_and_beyond_the_window() -> None:
    assert float(window_pairs(100.0, 128.0)) == 100 * 101 / 2  # shorter than the window: plain causal
    # 8192 tokens, W = 128: 128·129/2 + 8064·128
    assert float(window_pairs(8192.0, 128.0)) == 8256 + 8064 * 128 == 1_040_448


def test_prefill_shape_keeps_the_pairs() -> None:
    b, c = window_prefill_shape(2.0, 8192.0, 128.0)
    assert float(c) == 256.0
    assert float(b) == pytest.approx(2 * 1_040_448 / (256 * 257 / 2))  # 63.26 prompts of 256 tokens
    assert float(b) * 256 * 257 / 2 == pytest.approx(2 * float(window_pairs(8192.0, 128.0)))
    b1, c1 = window_prefill_shape(3.0, 100.0, 128.0)  # inside the window: unchanged
    assert (float(b1), float(c1)) == pytest.approx((3.0, 100.0))


def test_decode_reads_at_most_the_window() -> None:
    np.testing.assert_allclose(window_decode_context(np.array([50.0, 128.0, 5000.0]), 128.0), [50.0, 128.0, 128.0])


def _attn_ops(phase: str, batch: float, tokens: float) -> dict[str, tuple[float, dict[str, np.ndarray]]]:
    shape = PassShape(phase, np.array(batch), np.array(tokens), np.array(2.0))  # type: ignore[arg-type]
    return {op.name: (op.count, op.dims) for op in forward_ops(CAT.model("gpt-oss-120b"), shape) if "core" in op.name}


def test_gpt_oss_splits_its_attention_18_full_18_windowed() -> None:
    ops = _attn_ops("decode", 64.0, 5120.0)
    assert ops["attn.core"][0] == 18.0
    assert ops["attn.core_window"][0] == 18.0
    assert float(ops["attn.core"][1]["context"]) == 5120.0
    assert float(ops["attn.core_window"][1]["context"]) == 128.0
    pre = _attn_ops("prefill", 1.0, 8192.0)
    assert float(pre["attn.core_window"][1]["context"]) == 256.0
    assert float(pre["attn.core_window"][1]["batch"]) == pytest.approx(1_040_448 / 32_896)


def test_full_attention_models_keep_one_op() -> None:
    shape = PassShape("decode", np.array(8.0), np.array(1000.0), np.array(1.0))
    names = [op.name for op in forward_ops(CAT.model("llama-3.1-8b"), shape)]
    assert "attn.core" in names
    assert "attn.core_window" not in names


def test_window_and_its_layers_come_together() -> None:
    base = CAT.model("gpt-oss-120b").model_dump()
    with pytest.raises(ValidationError, match="sliding_window_layers"):
        ModelSpec(**{**base, "sliding_window_layers": 0})
    with pytest.raises(ValidationError, match="exceeds the 36 attention layers"):
        ModelSpec(**{**base, "sliding_window_layers": 40})
