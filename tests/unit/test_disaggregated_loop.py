"""The disaggregated benchmark closed loop (benchmark/disaggregated_loop.py): hand-worked numbers and its invariants."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.benchmark.disaggregated_loop import (
    DisaggLoopInputs,
    batch_max,
    check_floors,
    decode_capacity_rps,
    disagg_benchmark_loop,
    disagg_benchmark_of,
    disagg_loop_inputs,
    finite_source,
    kv_tokens_per_seq,
    steady_state,
)
from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.expert_parallel import expert_parallel_defaults
from pdplan.io.scenario import scenario_from_dict
from pdplan.perf.expert_parallel import allreduce_s
from pdplan.perf.kernels import allreduce_time_s
from pdplan.queueing import LinearStepTime
from pdplan.serving.build import build_model
from pdplan.serving.checks.physics import PhysicsInvariantError
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve
from pdplan.serving.roles import step_bytes
from pdplan.specs.perf_data import PerfData

BASE = DisaggLoopInputs(
    prefill_service_s=0.1,
    prefill_latency_s=0.1,
    servers=4,
    transfer_s=0.01,
    request_delay_s=0.005,
    overlap_steps=0.0,
    step=LinearStepTime(0.01, 1e-4, 0.0),
    input_tokens=1000.0,
    output_tokens=101.0,
    decode_instances=1,
    seats_per_instance=1000.0,
    kv_tokens_per_instance=1e9,
)


def test_machine_repairman_by_hand() -> None:
    """m = 1, C = 2, S = Z = 1: p ∝ (1, 2, 2), L = 6/5, X = (2 − 6/5)/1 = 0.8, W = L/X − S = 0.5."""
    x, w = finite_source(1, 2, 1.0, 1.0)
    assert x == pytest.approx(0.8)
    assert w == pytest.approx(0.5)


def test_machine_repairman_no_wait_with_enough_servers() -> None:
    """C ≤ m: every client has a server, X = C/(S + Z), no wait."""
    assert finite_source(4, 3, 0.1, 0.9) == (pytest.approx(3.0), 0.0)


def test_machine_repairman_saturates_at_the_servers() -> None:
    """Many clients, short away time: X → m/S and the wait → C·S/m − S − Z (everyone else queues)."""
    x, w = finite_source(2, 200, 1.0, 1.0)
    assert x == pytest.approx(2.0, rel=1e-9)
    assert w == pytest.approx(200 / 2.0 - 1.0 - 1.0, rel=1e-6)


def test_steady_state_by_hand() -> None:
    """C = 2 ≤ 4 prefill servers: no prefill wait. The fixed point, iterated by hand from X = 1.74: rn = X·101,
    B = rn·(t0 + k)/(1 − rn·k/2) = 1.7942 (k = t1 = 1e-4), the other client's share B/2 = 0.8971, τ = t0 + k·1.8971 =
    10.1897 ms, Z = 0.015 + (1 − e^{−0.8971})·τ/2 + 101·τ, X = 2/(0.1 + Z) = 1.7434 req/s, and TTFT = delay + S_p +
    T_kv + (1 − e^{−0.8971})·τ/2 + τ = 0.005 + 0.1 + 0.01 + 0.00302 + 0.01019 = 0.12821 s."""
    x, ttft, tpot = steady_state(BASE, 2)
    assert tpot == pytest.approx(0.0101897, rel=1e-4)
    assert x == pytest.approx(1.7434, rel=1e-4)
    assert ttft == pytest.approx(0.12821, rel=1e-4)
    others = (tpot - 0.01 - 1e-4) / 1e-4
    expect = 0.005 + 0.1 + 0.01 + (1.0 - math.exp(-others)) * tpot / 2.0 + tpot
    assert ttft == pytest.approx(expect, rel=1e-6)


def test_convention_b_moves_the_hand_off_onto_token_2() -> None:
    """Convention B, C = 2 ≤ 4 servers: TTFT = delay + S_p = 0.105 s exactly; the transfer, the step in flight and
    the 100 decode steps (token 1 came from the prefill) make E2E − TTFT, so TPOT = τ + (T_kv + (1 − e^{−B'})·τ/2)/100,
    and TTFT + 100·TPOT = C/X (Little)."""
    inp = dataclasses.replace(BASE, prefill_streams_token_1=True)
    x, ttft, tpot = steady_state(inp, 2)
    assert ttft == pytest.approx(0.105, rel=1e-12)
    rn = x * 100.0  # a sequence holds its seat for OSL − 1 = 100 steps
    others = rn * (0.01 + 1e-4) / (1.0 - rn * 1e-4 / 2.0) / 2.0
    tau = 0.01 + 1e-4 * (1.0 + others)
    assert tpot == pytest.approx(tau + (0.01 + (1.0 - math.exp(-others)) * tau / 2.0) / 100.0, rel=1e-9)
    assert ttft + 100.0 * tpot == pytest.approx(2.0 / x, rel=1e-9)


def test_decode_seats_bind_and_the_rest_wait() -> None:
    """2 seats, 10 clients: X = X_d = 2/(OSL·τ(2)) and the 8 clients the pool cannot admit wait before token 1."""
    inp = dataclasses.replace(BASE, seats_per_instance=2.0)
    x_d = 2.0 / (101.0 * (0.01 + 2e-4))
    assert decode_capacity_rps(inp) == pytest.approx(x_d)
    bench = disagg_benchmark_loop(inp, 10, 200, 20, "aiperf")
    assert bench.throughput_rps == pytest.approx(x_d, rel=1e-6)
    assert bench.effective_concurrency == 2
    assert bench.mean_tpot_s == pytest.approx(0.0102, rel=1e-6)
    assert bench.steady_ttft_s == pytest.approx(10.0 / x_d - 100.0 * 0.0102, rel=1e-6)


@pytest.mark.parametrize(
    ("rule", "per_seq"),
    [
        ({"kv_admission": "reserve"}, 1101.0),  # ISL + OSL
        ({"kv_admission": "on_demand"}, 1050.5),  # κ = ISL + OSL/2
        ({"kv_admission": "ratio", "kv_reserve_ratio": 0.1, "kv_reserve_clip_tokens": 4096.0}, 1055.55),  # + 0.1·50.5
        (
            {"kv_admission": "ratio", "kv_reserve_ratio": 0.1, "kv_reserve_clip_tokens": 50.0},
            1050.5 + 0.1 * (50.0 - 50.0**2 / 202.0),
        ),
        ({"kv_admission": "on_demand", "pd_decode_reserved_tokens": 512.0}, 1562.5),  # κ + R, the PD rule first
    ],
)
def test_decode_kv_bound_follows_the_engine(rule: dict[str, Any], per_seq: float) -> None:
    """ISL 1000, OSL 101, a 110,000-token pool: k per sequence by the decode server's rule, B_max = ⌊110,000/k⌋ (99,
    104, 104, 104, 70) and X_d = B_max/(OSL·τ(B_max)), τ(B) = 0.01 + 1e-4·B."""
    inp = dataclasses.replace(BASE, kv_tokens_per_instance=110_000.0, **rule)
    assert kv_tokens_per_seq(inp) == pytest.approx(per_seq, rel=1e-9)
    b = math.floor(110_000.0 / per_seq)
    assert batch_max(inp) == b
    assert decode_capacity_rps(inp) == pytest.approx(b / (101.0 * (0.01 + 1e-4 * b)), rel=1e-12)


def test_sglang_pd_decode_reserve_read_from_the_profile() -> None:
    """SGLang's decode server counts 512 reserved tokens a sequence (the profile's pd_decode_reserved_tokens), not its
    colocated ratio; with R = 512 the MoE deployment's k is κ + 512 + s."""
    inp = disagg_loop_inputs(_moe_model())
    assert inp.pd_decode_reserved_tokens == 512.0
    assert inp.kv_admission == "ratio"
    kappa = inp.input_tokens + inp.output_tokens / 2.0
    assert kv_tokens_per_seq(inp) == pytest.approx(kappa + 512.0 + inp.state_tokens_per_seq, rel=1e-12)


def test_burst_staircase_and_warmup_weight() -> None:
    """8 clients, 4 prefill servers, no warm-up, N = 8: the whole run is the burst; prompts end at 1·S_p (four) and
    2·S_p (four), so the burst TTFT is 1.5·S_p plus the same delays as the steady state's first token."""
    bench = disagg_benchmark_loop(BASE, 8, 8, 0, "aiperf")
    _, _, tau = steady_state(BASE, 8)
    first = 0.01 + (1.0 - math.exp(-7.0)) * tau / 2.0 + tau  # the 7 others decode beside it
    assert bench.burst_ttft_s == pytest.approx(0.005 + 1.5 * 0.1 + first, rel=1e-9)
    assert bench.mean_ttft_s == pytest.approx(bench.burst_ttft_s, rel=1e-9)


def test_burst_weight_ignores_the_warmup() -> None:
    """8 clients, N = 160 after 16 warm-up requests (AIConfigurator's 20·C / 2·C): the measured phase starts its 8
    clients together, so the burst enters with w = k·8/160 = 0.05 at k = 1 and 0.1 at k = 2, whatever the warm-up."""
    for k in (1.0, 2.0):
        inp = dataclasses.replace(BASE, startup_cohorts=k)
        bench = disagg_benchmark_loop(inp, 8, 160, 16, "aiperf")
        w = k * 8 / 160
        assert bench.mean_ttft_s == pytest.approx(w * bench.burst_ttft_s + (1.0 - w) * bench.steady_ttft_s, rel=1e-9)
        no_warmup = disagg_benchmark_loop(inp, 8, 160, 0, "aiperf")
        assert no_warmup.mean_ttft_s == pytest.approx(bench.mean_ttft_s, rel=1e-12)


@pytest.mark.parametrize("clients", [1, 3, 4, 9, 40, 400])
@pytest.mark.parametrize("seats", [2.0, 64.0, 1000.0])
def test_invariants_over_a_grid(clients: int, seats: float) -> None:
    """TTFT ≥ the prompt's own prefill + transfer + first step; TPOT ≥ τ_d(1) (the step model's floor); the
    throughput never beats either pool's capacity."""
    inp = dataclasses.replace(BASE, seats_per_instance=seats)
    bench = disagg_benchmark_loop(inp, clients, 20 * clients, 2 * clients, "aiperf")
    assert bench.mean_ttft_s >= inp.prefill_latency_s + inp.transfer_s + inp.step.t0_s
    assert bench.steady_ttft_s >= inp.prefill_latency_s
    assert bench.mean_tpot_s >= inp.step.t0_s + inp.step.t1_s_per_seq  # a sequence decodes in a batch of ≥ 1
    assert bench.throughput_rps <= min(inp.servers / inp.prefill_service_s, decode_capacity_rps(inp)) * (1 + 1e-9)


def _moe_model() -> DisaggregatedModel:
    sc = scenario_from_dict(
        {
            "model": "qwen3-30b-a3b",
            "mode": "disaggregated",
            "prefill": {"gpu": "h100-sxm", "tp": 1, "dp": 2, "ep": 2, "count": 1},
            "decode": {"gpu": "h100-sxm", "tp": 2, "ep": 2, "count": 1},
            "link": "ib-ndr",
            "granularity": "request",
            "routing": "least-work",
            "workload": {
                "input_tokens": {"dist": "fixed", "value": 2048},
                "output_tokens": {"dist": "fixed", "value": 256},
            },
            "dtype": "fp8",
            "kv_dtype": "fp8",
            "engine": "sglang",
        },
        source="test",
        base_dir=Path.cwd(),
    )
    model = build_model(resolve(sc, open_catalog()))
    assert isinstance(model, DisaggregatedModel)
    return model


@pytest.mark.parametrize("clients", [1, 16, 256])
def test_moe_deployment_respects_the_physics(clients: int) -> None:
    """A disaggregated MoE deployment (attention DP 2 + EP 2 prefill, TP2 EP2 decode): TTFT ≥ the prompt's prefill
    compute and a decode step ≥ its weight and KV bytes ÷ HBM bandwidth at the batch the loop runs."""
    model = _moe_model()
    bench = disagg_benchmark_of(model, clients, None, None)
    prefill_s = float(model.pool.point_latency_s.min())
    assert bench.mean_ttft_s >= prefill_s
    assert bench.steady_ttft_s >= prefill_s
    res = model.res
    assert res.hardware.decode is not None
    batch = np.array(max(bench.throughput_rps * 256.0 * bench.mean_tpot_s, 1.0))
    floor_s = (
        float(step_bytes(res.hardware.decode, batch, np.array(2048.0 + 128.0)))
        / res.hardware.decode.gpu.memory_bytes_per_s
    )
    assert bench.mean_tpot_s >= floor_s
    assert bench.tool == "sglang.bench_serving"


def test_cross_node_allreduce_by_hand() -> None:
    """TP 16 on two 8-GPU H100 nodes: the node's own all-reduce plus the ring over 2 nodes of each GPU's 1/8 shard,
    α 10 µs (DeepEP low-latency message) + 2·½·(14,336/8) B / 50 GB/s = 10.036 µs over the 8-GPU time."""
    catalog = open_catalog()
    gpu, table = catalog.gpu("h100-sxm"), catalog.kernel_table("h100-sxm")
    message = np.array(14336.0)
    inside = float(allreduce_time_s(message, 8, gpu, table))
    data = PerfData(expert_parallel=expert_parallel_defaults())
    assert float(allreduce_s(message, 8, gpu, table, data)) == inside
    assert float(allreduce_s(message, 16, gpu, table, data)) == pytest.approx(inside + 10e-6 + 1792.0 / 50e9, rel=1e-12)


def test_tp_across_whole_nodes_only() -> None:
    """TP 16 (two whole 8-GPU nodes) is accepted; TP 12 is not a whole number of nodes: SpecError."""
    sc = {
        "model": "deepseek-r1",
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 16},
        "decode": {"gpu": "h100-sxm", "tp": 16},
        "link": "ib-ndr",
        "granularity": "layer",
        "routing": "least-work",
        "workload": {"input_tokens": {"dist": "fixed", "value": 1024}, "output_tokens": {"dist": "fixed", "value": 64}},
        "dtype": "fp8",
        "kv_dtype": "fp8",
    }
    res = resolve(scenario_from_dict(sc, source="t", base_dir=Path.cwd()), open_catalog())
    assert res.hardware.decode is not None
    assert res.hardware.decode.tp == 16
    bad = {**sc, "decode": {"gpu": "h100-sxm", "tp": 12}, "model": "opt-175b"}  # 96 heads: 12 divides them
    with pytest.raises(SpecError, match="not a multiple"):
        resolve(scenario_from_dict(bad, source="t", base_dir=Path.cwd()), open_catalog())


def test_floor_check_catches_an_impossible_step() -> None:
    """A decode step model below the HBM floor (t0 = 1 µs for a 30B MoE on one GPU) is caught: the benchmark TPOT
    of one sequence cannot beat reading its weights and KV once."""
    model = _moe_model()
    inp = dataclasses.replace(disagg_loop_inputs(model), step=LinearStepTime(1e-6, 0.0, 0.0))
    bench = disagg_benchmark_loop(inp, 1, 10, 0, "aiperf")
    with pytest.raises(PhysicsInvariantError, match="decode step floor"):
        check_floors(model, inp, bench)
    fine = disagg_loop_inputs(model)
    check_floors(model, fine, disagg_benchmark_loop(fine, 1, 10, 0, "aiperf"))
