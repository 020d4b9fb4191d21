"""Sliding-window and KDA layers in the operator list (pdplan.perf.ops), with hand-worked shapes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.perf.op_types import PassShape
from pdplan.perf.ops import forward_ops


def _op(model: str, phase: str, batch: float, tokens: float, tp: float, name: str) -> dict[str, np.ndarray]:
    spec = open_catalog().model(model)
    shape = PassShape(phase, np.array(batch), np.array(tokens), np.array(tp))  # type: ignore[arg-type]
    ops = {op.name: op for op in forward_ops(spec, shape)}
    op = ops[name]
    return {"count": np.array(op.count), **{f.name: getattr(op, f.name) for f in dataclasses.fields(op)}}


def test_window_prefill_is_priced_as_blocks_of_the_window() -> None:
    """MiMo-V2-Flash, one 1,024-token prompt, window 128: query i sees min(i, 128) keys, 1024·128 − 128²/2 = 122,880
    pairs, priced as 1024/128 = 8 blocks of sqrt(2·122,880/8) = 175.3 tokens (8·175.3²/2 = 122,880 pairs)."""
    d = _op("mimo-v2-flash", "prefill", 1, 1024, 8, "swa.core")
    assert d["count"] == 39
    assert float(d["batch"]) == pytest.approx(8.0)
    assert float(d["context"]) == pytest.approx(math.sqrt(2 * 122_880 / 8))
    assert float(d["batch"]) * float(d["context"]) ** 2 / 2 == pytest.approx(122_880)
    short = _op("mimo-v2-flash", "prefill", 1, 64, 8, "swa.core")
    assert (float(short["batch"]), float(short["context"])) == (1.0, 64.0)  # within the window: full causal
    full = _op("mimo-v2-flash", "prefill", 1, 1024, 8, "attn.core")
    assert (full["count"], float(full["context"])) == (9, 1024.0)


def test_window_decode_reads_at_most_the_window() -> None:
    """Decode at context 32K: the 39 SWA layers read 128 tokens of 8 KV heads (one per GPU at TP 8): 128 x 640 B;
    the 9 global layers the whole context of 4 KV heads (replicated to one per GPU at TP 8: 640 B per token)."""
    d = _op("mimo-v2-flash", "decode", 4, 32768, 8, "swa.core")
    assert float(d["context"]) == 128.0
    assert float(d["kv_bytes_per_token"]) == pytest.approx(1 * (192 + 128) * 2)
    g = _op("mimo-v2-flash", "decode", 4, 32768, 8, "attn.core")
    assert float(g["context"]) == 32768.0
    assert float(g["head_dim"]) == (192 + 128) / 2  # QK^T at 192, PV at 128


def test_kda_projections_shard_like_vllm() -> None:
    """Kimi Linear at TP 8: q/k/v 3 x 4096 columns split 8 ways (1,536), the rank-128 f_a replicated, o_proj split
    on its 4096 input rows (512); 20 KDA layers."""
    qkv = _op("kimi-linear-48b-a3b", "prefill", 1, 1024, 8, "linear_attn.qkv_proj")
    assert (qkv["count"], float(qkv["n"]), float(qkv["k"])) == (20, 1536.0, 2304.0)
    f_a = _op("kimi-linear-48b-a3b", "prefill", 1, 1024, 8, "linear_attn.f_a_proj")
    assert float(f_a["n"]) == 128.0
    o = _op("kimi-linear-48b-a3b", "prefill", 1, 1024, 8, "linear_attn.o_proj")
    assert (float(o["n"]), float(o["k"])) == (2304.0, 512.0)
