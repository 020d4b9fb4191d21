"""Which expert layout an FP8 block-scaled checkpoint loads in (pdplan.perf.block_quant)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.perf.block_quant import block_split_error, expert_parallel_for_blocks
from pdplan.specs.model import ModelSpec

CAT = open_catalog()
MINIMAX = CAT.model("minimax-m2.5")  # 256 experts of width 1536, FP8 blocks of 128
MIMO = CAT.model("mimo-v2-flash")  # 256 experts of width 2048, FP8 blocks of 128


def _with_width(model: ModelSpec, width: int) -> ModelSpec:
    assert model.moe is not None
    return model.model_copy(update={"moe": model.moe.model_copy(update={"expert_intermediate_size": width})})


def test_hand_worked_layouts() -> None:
    # MiniMax-M2.5 at TP 8: 1536 / 8 = 192 = 1.5 blocks -> EP 8 (32 whole experts per GPU); at TP 4: 384 = 3 blocks
    assert "192 per GPU" in (block_split_error(MINIMAX, 8, 1.0) or "")
    assert expert_parallel_for_blocks(MINIMAX, 8, 1.0) == 8
    assert expert_parallel_for_blocks(MINIMAX, 4, 1.0) == 1
    # MiMo-V2-Flash at TP 8: 2048 / 8 = 256 = 2 blocks; DeepSeek-V3 likewise (2048)
    assert expert_parallel_for_blocks(MIMO, 8, 1.0) == 1
    assert expert_parallel_for_blocks(CAT.model("deepseek-v3"), 8, 1.0) == 1


def test_bf16_and_unblocked_weights_split_freely() -> None:
    assert expert_parallel_for_blocks(MINIMAX, 8, 2.0) == 1  # served in BF16: no scale blocks
    assert expert_parallel_for_blocks(CAT.model("qwen3-235b-a22b"), 8, 1.0) == 1  # BF16 checkpoint, no blocks
    assert block_split_error(CAT.model("llama-3.1-70b"), 8, 1.0) is None  # dense


def test_no_loadable_layout_is_an_error() -> None:
    with pytest.raises(SpecError, match="neither a 8-way expert split nor 8-way expert parallelism"):
        expert_parallel_for_blocks(_with_width(MINIMAX, 1000), 8, 1.0)  # 1000 is not whole blocks even unsplit


def test_block_size_needs_an_fp8_checkpoint() -> None:
    with pytest.raises(SpecError, match="weight_block_size"):
        ModelSpec.from_mapping(MINIMAX.model_dump() | {"weight_dtype": "bf16"})


@given(tp=st.sampled_from([1, 2, 4, 8, 16]), blocks=st.integers(1, 40))
def test_the_chosen_layout_always_loads(tp: int, blocks: int) -> None:
    """Whatever EP is chosen, each GPU's expert shard (width / (tp / ep)) is whole blocks."""
    model = _with_width(MINIMAX, 128 * blocks)
    try:
        ep = expert_parallel_for_blocks(model, tp, 1.0)
    except SpecError:
        return
    assert ep in (1, tp)
    assert block_split_error(model, tp // ep, 1.0) is None


def test_planner_refuses_layouts_the_engines_cannot_load() -> None:
    """The same rule in the planner: MiniMax-M2.5 FP8 at TP 8 needs EP (8, or DP 1 EP 2: moe_tp 4 = 3 blocks); the
    search never offers TP 8 EP 1, and `evaluate` names the problem (exit 2 at the CLI)."""
    from pdplan.perf.expert_parallel import parallelism_error
    from pdplan.search.parallel import parallel_shapes

    assert "192 per GPU" in (parallelism_error(MINIMAX, 8, 1, 1, 0, 1.0) or "")
    assert parallelism_error(MINIMAX, 8, 1, 8, 0, 1.0) is None
    assert parallelism_error(MINIMAX, 8, 1, 2, 0, 1.0) is None
    assert parallelism_error(MINIMAX, 8, 1, 1) is None  # no dtype given: only the EP divisibility rules
    shapes = parallel_shapes(MINIMAX, (4, 8), None, None, weight_bytes=1.0)
    assert (8, 1, 1) not in shapes
    assert {(4, 1, 1), (8, 1, 8)} <= set(shapes)


def test_evaluate_cli_exits_2_on_an_unloadable_split(cli: Callable[..., Any]) -> None:
    args = ("evaluate", "--model", "minimax-m2.5", "--gpu", "h200-sxm", "--tp", "8", "--colocated", "1")
    bad = cli(*args, "--isl", "1024", "--osl", "128")
    assert bad.code == 2
    assert "not a multiple of the FP8 weight block 128" in bad.err
    assert cli(*args, "--ep", "8", "--isl", "1024", "--osl", "128").code == 0


def test_prfaas_remote_cluster_loads_the_checkpoint_as_the_sweep_does() -> None:
    """A PrfaaS block's remote TP 8 of MiniMax-M2.5 (FP8 blocks) runs its experts at EP 8, the layout the engines
    load and `transfer --sweep` prices, instead of being refused for a 1.5-block split."""
    from pdplan.io.scenario import scenario_from_dict
    from pdplan.serving.prfaas.build import prfaas_setup
    from pdplan.serving.resolve import resolve

    sc = scenario_from_dict(
        {
            "schema_version": 1,
            "name": "minimax-prfaas",
            "model": "minimax-m2.5",
            "mode": "disaggregated",
            "prefill": {"gpu": "h100-sxm", "tp": 4, "count": 2},
            "decode": {"gpu": "h100-sxm", "tp": 4, "ep": 4, "count": 2},
            "workload": "prfaas-long",
            "slo": {"ttft": "20s", "tpot": "50ms"},
            "prfaas": {"gpu": "h200-sxm", "tp": 8, "count": 1, "link": "dci-100g"},
        },
        source="test",
        base_dir=Path.cwd(),
    )
    setup = prfaas_setup(resolve(sc, CAT))
    assert setup.remote_hw is not None
    assert (setup.remote_hw.tp, setup.remote_hw.ep) == (8, 8)
