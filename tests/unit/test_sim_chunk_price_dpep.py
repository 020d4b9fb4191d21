"""The simulator's price of prefill pieces on attention-DP / expert-parallel hardware (issue #24 item 6).

An append-prefill (PPD) or a colocated chunk runs on ONE attention-DP rank: that rank's dense layers and causal
attention over its own tokens, while the routed experts, spread over EP GPUs, see only those tokens. The simulator
used to price the pieces at the instance's TP alone (all 256 DeepSeek-V3 experts on one GPU): 0.161 s for a
253-token append on a 33K history on a B200 TP1 DP8 EP8 decode instance, against 0.073 s in the closed form.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.role_pass import kind_s, prefill_pass

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving import resolve
from pdplan.serving.resolve import ColocatedHardware
from pdplan.serving.role_hardware import RoleHardware
from pdplan.sim.deployment import rank_split_s, sim_chunk_price

CATALOG = open_catalog()


def _hw(model: str, gpu: str, dp: int, ep: int, engine: str = "sglang") -> RoleHardware:
    data: dict[str, Any] = {
        "model": model,
        "mode": "colocated",
        "colocated": {"gpu": gpu, "tp": 1, "dp": dp, "ep": ep, "count": 1, "scheduler": "chunked"},
        "workload": {
            "input_tokens": {"dist": "fixed", "value": 2000},
            "output_tokens": {"dist": "fixed", "value": 100},
        },
        "slo": {"ttft": "5s", "tpot": "150ms"},
        "engine": engine,
        "dtype": "fp8",
        "kv_dtype": "fp8",
    }
    hardware = resolve(scenario_from_dict(data, source="test", base_dir=Path.cwd()), CATALOG).hardware
    assert isinstance(hardware, ColocatedHardware)
    return hardware.colocated


def test_one_append_on_a_dp8_ep8_b200_instance_priced_per_rank() -> None:
    # One append of N = 256 tokens over an H = 36,864-token history: causal attention of N queries over H + N keys,
    # N(2H + N)/2 query-key pairs, those of a from-scratch prompt of s = sqrt(N(2H + N)) = 256·17 = 4,352 tokens
    # (whole, so the table is read at a tabulated point). By hand, per rank of the TP1 DP8 EP8 instance:
    #   dense side: the pass in which each of the 8 ranks carries N tokens (batch 8), less its attention and experts;
    #   experts: the expert op of the pass in which the instance carries N tokens in all (batch 1);
    #   attention: one prompt of s tokens on ONE B200 at TP1 (a rank's attention is its own GPU's, no DP/EP);
    # each side less its one-token value (the decode step pays the weight read and fixed costs).
    hw = _hw("deepseek-v3", "b200", 8, 8)
    n, h = 256.0, 36864.0
    s = math.sqrt(n * (2.0 * h + n))
    assert s == 4352.0

    def g(tokens: float) -> float:
        rank, whole = prefill_pass(hw, 8.0, tokens), prefill_pass(hw, 1.0, tokens)
        dense = float(rank.time_s[0]) - kind_s(rank, "attn_prefill") - kind_s(rank, "moe")
        return dense + kind_s(whole, "moe")

    gpu = dataclasses.replace(hw, dp=1, ep=1)
    attention = kind_s(prefill_pass(gpu, 1.0, s), "attn_prefill")
    by_hand = g(n) - g(1.0) + attention
    chunk = sim_chunk_price(hw, 16384, h + n)
    priced = float(chunk(np.array([n]), np.array([h]))[0])
    assert priced == pytest.approx(by_hand, rel=1e-9)
    # the instance without its DP8/EP8 (the old price: one GPU holding all the experts) costs more than twice that
    alone = sim_chunk_price(gpu, 16384, h + n)
    assert float(alone(np.array([n]), np.array([h]))[0]) > 2.0 * priced
    # the rank's attention is that of one GPU, not an eighth of a prompt spread over the ranks
    assert kind_s(prefill_pass(hw, 8.0, s), "attn_prefill") == pytest.approx(attention, rel=1e-12)


def test_a_rank_sends_fewer_tokens_to_the_experts_than_eight_ranks() -> None:
    # Each rank carrying N tokens puts 8N through the experts; one rank's N alone is cheaper there, never dearer.
    hw = _hw("deepseek-v3", "b200", 8, 8)
    tokens = np.array([1.0, 64.0, 512.0, 4096.0])
    g, _ = rank_split_s(hw, tokens)
    every = np.array(
        [float(prefill_pass(hw, 8.0, t).time_s[0]) - kind_s(prefill_pass(hw, 8.0, t), "attn_prefill") for t in tokens]
    )
    assert np.all(g <= every + 1e-15)
    assert g[-1] < every[-1]
    assert np.all(np.diff(g) > 0.0)


def test_without_attention_dp_the_price_is_the_batch_oneprefill_pass() -> None:
    # A dense model at TP1 (dp = 1): one rank is the instance; G and A are those of the batch-1 pass.
    hw = _hw("llama-3.1-8b", "h100-sxm", 1, 1, engine="vllm")
    tokens = np.array([1.0, 100.0, 2048.0])
    g, a = rank_split_s(hw, tokens)
    for i, t in enumerate(tokens):
        pt = prefill_pass(hw, 1.0, float(t))
        assert a[i] == pytest.approx(kind_s(pt, "attn_prefill"), rel=1e-12)
        assert g[i] == pytest.approx(float(pt.time_s[0]) - a[i], rel=1e-12)
