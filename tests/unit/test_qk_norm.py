"""Per-layer q/k norms (MiniMax-M2 ``qk_norm_type: per_layer``), by hand: one RMSNorm over all q (all k) channels,
its variance all-reduced across TP once per layer (pdplan.perf.ops ``QK_NORM_VARIANCE_BYTES_PER_TOKEN``), its
weights in the parameter count (pdplan.specs.model), its ``config.json`` key (pdplan.io.hf_config) and validation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.hf_config import load_hf_config
from pdplan.perf.op_types import AllReduceOp, PassShape
from pdplan.perf.ops import QK_NORM_VARIANCE_BYTES_PER_TOKEN, forward_ops
from pdplan.perf.roofline import phase_time

CATALOG = open_catalog()
HF = Path(__file__).resolve().parents[1] / "unit" / "data" / "hf"


def _decode_shape(batch: float, tp: float) -> PassShape:
    return PassShape("decode", np.asarray(batch), np.asarray(1024.0), np.asarray(tp), weight_bytes=1.0, ep=4.0)


def test_minimax_qk_norm_all_reduce_per_layer() -> None:
    # 32 sequences at TP4: one all-reduce per attention layer (62) of 32 tokens x 2 fp32 = 256 bytes
    mm = CATALOG.model("minimax-m2.5")
    assert mm.qk_norm_span == "layer"
    ops = {op.name: op for op in forward_ops(mm, _decode_shape(32.0, 4.0))}
    op = ops["attn.qk_norm_allreduce"]
    assert op.count == 62.0
    assert isinstance(op, AllReduceOp)
    assert float(op.bytes) == pytest.approx(32 * 8.0)
    assert QK_NORM_VARIANCE_BYTES_PER_TOKEN == 8.0
    # a per-head q/k norm (Qwen3) is local to each GPU: no such all-reduce
    qwen = CATALOG.model("qwen3-235b-a22b")
    assert "attn.qk_norm_allreduce" not in {op.name for op in forward_ops(qwen, _decode_shape(32.0, 4.0))}


def test_qk_norm_all_reduce_is_free_at_tp1() -> None:
    mm = CATALOG.model("minimax-m2.5")
    gpu, table = CATALOG.gpu("h100-sxm"), CATALOG.kernel_table("h100-sxm")
    t = phase_time(mm, gpu, table, phase="decode", batch=8.0, tokens=1024.0, tp=1, ep=1)
    assert {o.name: float(o.time_s) for o in t.ops}["attn.qk_norm_allreduce"] == 0.0
    t4 = phase_time(mm, gpu, table, phase="decode", batch=8.0, tokens=1024.0, tp=4, ep=4)
    assert {o.name: float(o.time_s) for o in t4.ops}["attn.qk_norm_allreduce"] > 0.0


def test_per_layer_qk_norm_weights() -> None:
    # per layer: (48 + 8) heads x 128 channels = 7,168 norm weights instead of 2 x 128 = 256: 62 x 6,912 more
    mm = CATALOG.model("minimax-m2.5")
    per_head = mm.model_copy(update={"qk_norm_span": "head"})
    assert mm.total_params() - per_head.total_params() == 62 * 6912


def test_hf_import_reads_qk_norm_type(tmp_path: Path) -> None:
    assert load_hf_config(HF / "minimax-m2.5.json").qk_norm_span == "layer"
    data = json.loads((HF / "minimax-m2.5.json").read_text())
    data["qk_norm_type"] = "per_head"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    assert load_hf_config(path).qk_norm_span == "head"
    data["qk_norm_type"] = "per_token"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="per_layer or per_head"):
        load_hf_config(path)


def test_layer_span_needs_qk_norm() -> None:
    qwen = CATALOG.model("qwen3-32b").model_dump()
    qwen.update(qk_norm=False, qk_norm_span="layer")
    with pytest.raises(ValueError, match="needs qk_norm"):
        type(CATALOG.model("qwen3-32b")).model_validate(qwen)
