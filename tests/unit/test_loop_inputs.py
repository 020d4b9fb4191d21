"""The benchmark loop's inputs (pdplan.benchmark.loop_inputs): the eager-step launch floor of MoE models
(specs/engine.py ``eager_s_per_moe_layer``) and the grid of decode batches the roofline is read on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.benchmark.loop_inputs import decode_batch_grid, eager_step_s, loop_inputs
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.resolve import resolve
from pdplan.specs.engine import Sourced

CATALOG = open_catalog()


def _model(name: str, engine: str, tp: int, ep: int = 1) -> ColocatedModel:
    sc = scenario_from_dict(
        {
            "model": name,
            "mode": "colocated",
            "colocated": {"gpu": "h100-sxm", "tp": tp, "ep": ep, "count": 1, "scheduler": "chunked"},
            "workload": {
                "input_tokens": {"dist": "fixed", "value": 512},
                "output_tokens": {"dist": "fixed", "value": 128},
            },
            "dtype": "fp8",
            "kv_dtype": "fp8",
            "engine": engine,
        },
        source="test",
        base_dir=Path.cwd(),
    )
    model = build_model(resolve(sc, CATALOG))
    assert isinstance(model, ColocatedModel)
    return model


def test_floor_is_layers_times_the_per_layer_time() -> None:
    """94 MoE layers x 0.515 ms = 48.41 ms; no entry = no floor."""
    over = CATALOG.engine("trtllm").overheads
    assert over.eager_s_per_moe_layer is not None
    assert over.eager_s_per_moe_layer.value == pytest.approx(5.15e-4)
    assert over.eager_step_floor_s(94) == pytest.approx(0.04841)
    without = over.model_copy(update={"eager_s_per_moe_layer": None})
    assert without.eager_step_floor_s(94) == 0.0
    one = over.model_copy(update={"eager_s_per_moe_layer": Sourced(value=1e-3, source="test")})
    assert one.eager_step_floor_s(10) == pytest.approx(0.010)


def test_trtllm_qwen3_235b_gets_the_floor_and_dense_models_do_not() -> None:
    """Qwen3-235B-A22B: all 94 layers MoE, at TP4 EP4 on TensorRT-LLM H = 94 x 0.515 ms; Qwen3-32B (dense): 0; vLLM and
    SGLang ship no eager term (piecewise CUDA graphs / not fitted): 0."""
    moe = _model("qwen3-235b-a22b", "trtllm", 4, 4)
    assert moe.res.hardware.colocated is not None
    assert len(moe.res.hardware.colocated.model.moe_layer_indices) == 94
    assert loop_inputs(moe).eager_step_s == pytest.approx(94 * 5.15e-4)
    dense = _model("qwen3-32b", "trtllm", 2)
    assert dense.res.hardware.colocated is not None
    assert eager_step_s(dense.res.hardware.colocated) == 0.0
    for engine in ("vllm", "sglang"):
        other = _model("qwen3-235b-a22b", engine, 4, 4)
        assert other.res.hardware.colocated is not None
        assert eager_step_s(other.res.hardware.colocated) == 0.0


def test_decode_batch_grid() -> None:
    grid = decode_batch_grid(1024)
    assert grid[0] == 1.0
    assert grid[-1] == pytest.approx(1024.0)
    assert set(np.arange(1.0, 65.0)) <= set(grid.tolist())
    assert np.all(np.diff(grid) > 0)
