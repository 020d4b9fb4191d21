"""gpt-oss's sliding-window layers (18 of 36, window 128) as the sliding-window layer kind prices them (hand-worked)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.perf.op_types import PassShape
from pdplan.perf.ops import forward_ops

CAT = open_catalog()


def _attn_ops(phase: str, batch: float, tokens: float) -> dict[str, tuple[float, dict[str, np.ndarray]]]:
    shape = PassShape(phase, np.array(batch), np.array(tokens), np.array(2.0))  # type: ignore[arg-type]
    ops = forward_ops(CAT.model("gpt-oss-120b"), shape)
    return {
        op.name: (op.count, {f.name: getattr(op, f.name) for f in dataclasses.fields(op)})
        for op in ops
        if "core" in op.name
    }


def test_gpt_oss_splits_its_attention_18_full_18_windowed() -> None:
    ops = _attn_ops("decode", 64.0, 5120.0)
    assert ops["attn.core"][0] == 18.0
    assert ops["swa.core"][0] == 18.0
    assert float(ops["attn.core"][1]["context"]) == 5120.0
    assert float(ops["swa.core"][1]["context"]) == 128.0  # a decode step reads at most the window


def test_windowed_prefill_keeps_the_query_key_pairs() -> None:
    """8,192 tokens, w = 128: c·w − w²/2 = 1,040,384 pairs, priced as c/w = 64 blocks of sqrt(2·pairs/64) = 180.3
    tokens, whose causal pairs 64·180.3²/2 are the same 1,040,384 (32x fewer than full causal attention)."""
    pre = _attn_ops("prefill", 1.0, 8192.0)
    batch, context = float(pre["swa.core"][1]["batch"]), float(pre["swa.core"][1]["context"])
    assert batch == pytest.approx(64.0)
    assert context == pytest.approx((2 * 1_040_384 / 64) ** 0.5)
    assert batch * context**2 / 2 == pytest.approx(8192 * 128 - 128**2 / 2)


def test_window_kv_is_bounded_per_sequence() -> None:
    """Full layers: 18 × 8 KV heads × (64 + 64) × 2 B = 36,864 B per token; window layers the same per token while it
    is within the last 128 tokens."""
    oss = CAT.model("gpt-oss-120b")
    assert oss.kv_bytes_per_token(2) == 18 * 8 * 128 * 2
    assert oss.window_kv_bytes_per_token(2) == 18 * 8 * 128 * 2


def test_full_attention_models_keep_one_op() -> None:
    shape = PassShape("decode", np.array(8.0), np.array(1000.0), np.array(1.0))
    names = [op.name for op in forward_ops(CAT.model("llama-3.1-8b"), shape)]
    assert "attn.core" in names
    assert "swa.core" not in names
