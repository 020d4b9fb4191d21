"""The model changes behind the vLLM gpt-oss-120b / MiniMax-M2.5 rows (docs/accuracy_engines.md, MoE section), by hand.

* MiniMax-M2 ``qk_norm_type: per_layer``: one RMSNorm over all q (all k) channels, its variance all-reduced across
  TP once per layer (pdplan.perf.ops ``QK_NORM_VARIANCE_BYTES_PER_TOKEN``);
* the benchmark loop's decode step: the roofline's own τ_d(B) on a grid, interpolated, instead of the linear law;
* vLLM's on-demand KV admission: requests hold ISL + (OSL − 1)/2 tokens on average;
* the benchmark client's 100 connections (benchmarks/client_connections.py).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pdplan.benchmark.colocated_loop import LoopInputs, admitted, decode_s
from pdplan.benchmark.loop_inputs import decode_batch_grid
from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.hf_config import load_hf_config
from pdplan.perf.op_types import PassShape
from pdplan.perf.ops import QK_NORM_VARIANCE_BYTES_PER_TOKEN, forward_ops
from pdplan.perf.roofline import phase_time
from pdplan.queueing import LinearStepTime

CATALOG = open_catalog()
HF = Path(__file__).resolve().parents[1] / "unit" / "data" / "hf"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "client_connections.py"


def _decode_shape(batch: float, tp: float) -> PassShape:
    return PassShape("decode", np.asarray(batch), np.asarray(1024.0), np.asarray(tp), weight_bytes=1.0, ep=4.0)


def test_minimax_qk_norm_all_reduce_per_layer() -> None:
    # 32 sequences at TP4: one all-reduce per attention layer (62) of 32 tokens x 2 fp32 = 256 bytes
    mm = CATALOG.model("minimax-m2.5")
    assert mm.qk_norm_span == "layer"
    ops = {op.name: op for op in forward_ops(mm, _decode_shape(32.0, 4.0))}
    op = ops["attn.qk_norm_allreduce"]
    assert op.count == 62.0
    assert float(op.dims["bytes"]) == pytest.approx(32 * 8.0)
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


def _inputs(**kw: object) -> LoopInputs:
    base = LoopInputs(
        step=LinearStepTime(1e-3, 1e-4, 0.0),
        prompt_s=0.01,
        input_tokens=1000.0,
        output_tokens=1001.0,
        budget_tokens=8192,
        seats=1024,
        kv_tokens=10_000.0,
        mixed=True,
        request_delay_s=0.0,
        overlap_steps=0.0,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_decode_step_interpolates_the_roofline_grid() -> None:
    # linear law: 1 ms + 0.1 ms x 3 = 1.3 ms; grid (1, 2, 4) -> (1, 2, 2.5) ms: at B = 3 halfway, 2.25 ms
    assert decode_s(_inputs(), 3.0) == pytest.approx(1.3e-3)
    grid = _inputs(decode_batches=np.array([1.0, 2.0, 4.0]), decode_step_s=np.array([1e-3, 2e-3, 2.5e-3]))
    assert decode_s(grid, 3.0) == pytest.approx(2.25e-3)
    assert decode_s(grid, 2.0) == pytest.approx(2e-3)


def test_decode_batch_grid() -> None:
    grid = decode_batch_grid(1024)
    assert grid[0] == 1.0
    assert grid[-1] == pytest.approx(1024.0)
    assert set(np.arange(1.0, 65.0)) <= set(grid.tolist())
    assert np.all(np.diff(grid) > 0)


def test_on_demand_kv_admits_at_the_mean_length() -> None:
    # 10,000 KV tokens, ISL 1,000, OSL 1,001: reserving 2,000 each admits 5; on demand 1,000 + 500 = 1,500 -> 6
    assert admitted(_inputs(), 64) == 5
    assert admitted(_inputs(kv_on_demand=True), 64) == 6
    assert admitted(_inputs(kv_on_demand=True), 4) == 4


def test_vllm_profiles_allocate_kv_on_demand() -> None:
    for name in ("vllm", "vllm-0.18"):
        assert CATALOG.engine(name).scheduling.kv_admission == "on_demand"
    assert CATALOG.engine("trtllm").scheduling.kv_admission == "reserve"


def _client_connections() -> ModuleType:
    spec = importlib.util.spec_from_file_location("client_connections", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_client_connection_cap() -> None:
    cc = _client_connections()
    # Little's law on the TP8 1024/1024 C = 512 row: 512 x 1023 x 5.333 ms / (22.295 s + 1023 x 5.333 ms) = 101
    assert cc.in_service_from_measured(512, 1024, 22.295, 5.333e-3) == pytest.approx(101.0, abs=0.5)
    # priced at 100 clients: TTFT 1 s, TPOT 10 ms -> cycle 1 + 10.23 = 11.23 s; wait (5.12 - 1) x 11.23 = 46.27 s
    assert cc.client_ttft_s(512, 100, 1024, 1.0, 0.01) == pytest.approx(1.0 + 4.12 * 11.23)
    assert cc.client_ttft_s(64, 100, 1024, 1.0, 0.01) == 1.0
    row = {"engine": "vllm"}
    assert cc.connections_of(row, "measured=2025-12-08T00:00:00.000Z") == 100
    assert cc.connections_of(row, "measured=2026-03-27T08:01:51Z") is None
    assert cc.connections_of({"engine": "trtllm"}, "measured=2025-12-08") is None
