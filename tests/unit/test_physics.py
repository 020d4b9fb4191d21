"""Physics invariants (pdplan/serving/checks/physics.py) against numbers worked by hand.

Llama-3.1-8B on one H100 SXM (TP1, BF16): per layer the GEMM weights are QKV 4096×6144, O 4096×4096,
gate/up 4096×28672 and down 14336×4096 = 218,103,808 parameters, 32 layers = 6,979,321,856; the LM head
4096×128,256 = 525,336,576. KV per token per layer 2·8·128·2 B = 4,096 B (131,072 B over 32 layers).
H100 SXM: 989.4 TFLOP/s BF16 dense, 3.35 TB/s HBM.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.errors import exit_code_for
from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.perf.op_types import Phase
from pdplan.perf.roofline import phase_time
from pdplan.queueing import LinearStepTime
from pdplan.serving import build_model, resolve
from pdplan.serving.checks.physics import (
    PhysicsInvariantError,
    check_operating_point,
    operating_point_breaches,
    peak_time_s,
    physics_bounds,
)
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.roles import step_bytes
from pdplan.specs.scenario import Scenario

CATALOG = open_catalog()
EVALUATE = importlib.import_module("pdplan.serving.build")  # where evaluate builds its model
GEMM_PARAMS = 32 * (4096 * 6144 + 4096 * 4096 + 4096 * 28672 + 14336 * 4096)
HEAD_PARAMS = 4096 * 128256
PEAK, HBM = 989.4e12, 3.35e12


def _scenario(**extra: Any) -> Scenario:
    data: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "prefill": {"gpu": "h100-sxm", "count": 1},
        "decode": {"gpu": "h100-sxm"},
        "link": "ib-ndr",
        "granularity": "request",
        "workload": {"input_tokens": {"dist": "fixed", "value": 1000}, "output_tokens": {"dist": "fixed", "value": 3}},
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }
    data.update(extra)
    return scenario_from_dict(data, source="test", base_dir=Path.cwd())


def _colocated(**extra: Any) -> Scenario:
    base: dict[str, Any] = {
        "model": "opt-13b",
        "mode": "colocated",
        "colocated": {"gpu": "a100-sxm-80gb", "tp": 1, "count": 1, "scheduler": "chunked"},
        "workload": {"input_tokens": {"dist": "fixed", "value": 512}, "output_tokens": {"dist": "fixed", "value": 64}},
        "slo": {"ttft": "400ms", "tpot": "40ms"},
        "engine": "kernels",  # kernel time only: the broken models below must show without engine overheads
    }
    base.update(extra)
    return scenario_from_dict(base, source="test", base_dir=Path.cwd())


def _names(breaches: list[Any]) -> set[str]:
    return {b.invariant for b in breaches}


def test_prefill_peak_time_by_hand() -> None:
    """1000 prompt tokens: GEMMs 2·1000·6.979e9, LM head for the last token 2·525,336,576, causal attention
    2·32 heads·1000²·128·32 layers = 2.621e11; 1.4222e13 FLOPs / 989.4 TFLOP/s = 14.374 ms."""
    res = resolve(_scenario(), CATALOG)
    assert res.hardware.prefill is not None
    flops = 2.0 * 1000 * GEMM_PARAMS + 2.0 * HEAD_PARAMS + 2.0 * 32 * 1000**2 * 128 * 32
    got = float(peak_time_s(res.hardware.prefill, "prefill", np.ones(1), np.array([1000.0]))[0])
    assert got == pytest.approx(flops / PEAK, rel=1e-12)
    assert got == pytest.approx(0.014374, rel=1e-4)


def test_peak_time_uses_the_roofline_flop_counts() -> None:
    """The FLOPs are those phase_time reports per op (MoE and decode included), at the op's peak."""
    for sc in (_scenario(), _scenario(model="mixtral-8x7b", prefill={"gpu": "h100-sxm", "tp": 2}, dtype="fp8")):
        hw = resolve(sc, CATALOG).hardware.prefill
        assert hw is not None
        cases: list[tuple[Phase, Any, list[float]]] = [
            ("prefill", 1.0, [100.0, 5000.0]),
            ("decode", [1.0, 64.0], [300.0, 300.0]),
        ]
        for phase, batch, tokens in cases:
            pt = phase_time(
                hw.model, hw.gpu, hw.table, phase=phase, batch=batch, tokens=tokens, tp=hw.tp, precision=hw.precision
            )
            gemm = hw.gpu.fp8_flops_per_s if hw.precision.weight_bytes <= 1.0 else PEAK
            assert gemm is not None
            ref = sum(op.flops / (gemm if op.kind in ("gemm", "moe") else PEAK) for op in pt.ops)
            got = peak_time_s(hw, phase, np.asarray(batch), np.asarray(tokens))
            np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_decode_step_bytes_by_hand() -> None:
    """One sequence at 1000 tokens of context reads 2 B × (6,979,321,856 + 525,336,576) of weights and
    1000 × 131,072 B of KV: 15,140,388,864 B, 4.5195 ms at 3.35 TB/s."""
    res = resolve(_scenario(), CATALOG)
    assert res.hardware.decode is not None
    got = float(step_bytes(res.hardware.decode, np.array(1.0), np.array(1000.0)))
    assert got == 2.0 * (GEMM_PARAMS + HEAD_PARAMS) + 1000 * 131072
    assert got / HBM == pytest.approx(4.5195e-3, rel=1e-4)


def test_compute_ceiling_at_one_over_the_prefill_peak_time() -> None:
    """One TP1 prefill instance serves at most 1/14.374 ms = 69.57 prompts of 1000 tokens per second."""
    res = resolve(_scenario(), CATALOG)
    bounds = physics_bounds(res, build_model(res))
    limit = 1.0 / float(peak_time_s(bounds.pools[0].hw, "prefill", np.ones(1), np.array([1000.0]))[0])
    assert limit == pytest.approx(69.57, rel=1e-3)
    assert "compute ceiling (prefill)" not in _names(bounds.ceiling_breaches(0.99 * limit))
    assert "compute ceiling (prefill)" in _names(bounds.ceiling_breaches(1.01 * limit))


def test_link_ceiling_at_line_rate() -> None:
    """10 GbE = 1.25e9 B/s; a 1000-token prompt's KV is 1.31072e8 B: at most 9.537 req/s per NIC."""
    res = resolve(_scenario(link="eth-10g"), CATALOG)
    bounds = physics_bounds(res, build_model(res))
    limit = 1.25e9 / (1000 * 131072)
    assert "link bandwidth (prefill side)" not in _names(bounds.ceiling_breaches(0.99 * limit))
    assert {"link bandwidth (prefill side)", "link bandwidth (decode side)"} <= _names(
        bounds.ceiling_breaches(1.01 * limit)
    )


def test_kv_capacity_by_littles_law_at_the_fastest_step() -> None:
    """3 output tokens = 2 decode steps: work 2·1000 + 1 = 2001 token-steps; the fastest step reads the
    weights alone, 15,009,316,864 B / 3.35 TB/s = 4.4804 ms; at 10 req/s ≥ 89.65 KV tokens are resident."""
    res = resolve(_scenario(), CATALOG)
    model = build_model(res)
    assert isinstance(model, DisaggregatedModel)
    bounds = physics_bounds(res, model)
    assert bounds.tau_min_s == pytest.approx(2.0 * (GEMM_PARAMS + HEAD_PARAMS) / HBM, rel=1e-12)
    small = dataclasses.replace(model, decode=dataclasses.replace(model.decode, kv_capacity_tokens=80.0))
    found = [b for b in physics_bounds(res, small).ceiling_breaches(10.0) if b.invariant.startswith("KV capacity")]
    assert found
    assert found[0].value >= 10.0 * 2001 * bounds.tau_min_s
    assert 10.0 * 2001 * bounds.tau_min_s == pytest.approx(89.65, rel=1e-3)


def test_a_priced_deployment_keeps_every_invariant() -> None:
    for sc in (_scenario(), _colocated()):
        res = resolve(sc, CATALOG)
        model = build_model(res)
        limit = model.limit().rate_rps
        for frac in (0.05, 0.5, 0.95):
            assert operating_point_breaches(res, model, frac * limit) == []


def _free_chunks(model: ColocatedModel) -> ColocatedModel:
    """The colocated model as it was for a fixed length: the fit's (S, 0, 0) made chunks free."""
    zero = np.zeros_like(model.attention_cell_s)
    return dataclasses.replace(
        model, prefill_s_per_token=0.0, attention_cell_s=zero, drain_cell_s=zero, gemm_width=None
    )


def test_free_chunked_prefill_breaks_the_ttft_floor() -> None:
    """512 tokens of OPT-13B need 41.64 ms of A100 peak compute; free chunks give a TTFT below that."""
    res = resolve(_colocated(), CATALOG)
    model = build_model(res)
    assert isinstance(model, ColocatedModel)
    found = operating_point_breaches(res, _free_chunks(model), 1.0)
    assert "TTFT floor" in _names(found)
    assert "41.64 ms" in str(found[0])


def test_a_decode_step_faster_than_hbm_breaks_the_floor() -> None:
    res = resolve(_scenario(), CATALOG)
    model = build_model(res)
    assert isinstance(model, DisaggregatedModel)
    st = model.decode.step
    fast = LinearStepTime(st.t0_s / 10.0, st.t1_s_per_seq / 10.0, st.t2_s_per_token / 10.0)
    broken = dataclasses.replace(model, decode=dataclasses.replace(model.decode, step=fast))
    assert {"decode step floor", "decode HBM traffic (decode)"} <= _names(operating_point_breaches(res, broken, 5.0))


def test_evaluate_refuses_a_result_that_breaks_physics(monkeypatch: pytest.MonkeyPatch) -> None:
    """A breach is a bug: a plain exception (exit code 1) naming the numbers, never a reported plan."""
    sc = _colocated()
    real = EVALUATE.build_model

    def broken(res: Any) -> Any:
        model = real(res)
        assert isinstance(model, ColocatedModel)
        return _free_chunks(model)

    monkeypatch.setattr(EVALUATE, "build_model", broken)
    with pytest.raises(PhysicsInvariantError) as err:
        evaluate(sc, catalog=CATALOG)
    assert exit_code_for(err.value) == 1
    assert "req/s" in str(err.value)
    assert err.value.breaches


def test_check_operating_point_raises_with_the_numbers() -> None:
    res = resolve(_colocated(), CATALOG)
    model = build_model(res)
    assert isinstance(model, ColocatedModel)
    check_operating_point(res, model, 1.0)  # the priced model holds
    with pytest.raises(PhysicsInvariantError, match="TTFT floor"):
        check_operating_point(res, _free_chunks(model), 1.0)
