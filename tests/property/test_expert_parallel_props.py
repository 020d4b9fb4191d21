"""Expert parallelism and attention DP (issue #13): more EP never raises the weight bytes per GPU, more DP GPUs
never raise them either, and MoE plans with DP/EP keep every physics invariant (pdplan.serving.checks.physics)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdplan.errors import NoFeasiblePlanError
from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.io.serving_defaults import serving_defaults
from pdplan.perf.expert_parallel import parallelism_error
from pdplan.perf.memory import instance_memory
from pdplan.serving import resolve
from pdplan.serving.build import model_at_rate
from pdplan.serving.checks.physics import operating_point_breaches

CATALOG = open_catalog()
MOE = ("mixtral-8x7b", "qwen3-235b-a22b", "deepseek-v3")


def _weights(model: str, tp: int, dp: int, ep: int, dtype_bytes: float) -> float:
    m = CATALOG.model(model)
    mem = instance_memory(
        m, 80 * 2**30, defaults=serving_defaults(), tp=tp, dp=dp, ep=ep, weight_dtype_bytes=dtype_bytes
    )
    return float(mem.weight_bytes)


@given(
    model=st.sampled_from(MOE),
    tp=st.sampled_from((1, 2, 4, 8)),
    dp=st.sampled_from((1, 2, 4, 8, 16)),
    dtype_bytes=st.sampled_from((1.0, 2.0)),
    data=st.data(),
)
@settings(max_examples=60, deadline=None)
def test_more_ep_never_raises_weight_bytes(
    model: str, tp: int, dp: int, dtype_bytes: float, data: st.DataObject
) -> None:
    m = CATALOG.model(model)
    eps = [e for e in (1, 2, 4, 8, 16, 32, 64, 128) if parallelism_error(m, tp, dp, e) is None]
    low, high = sorted(data.draw(st.lists(st.sampled_from(eps), min_size=2, max_size=2)))
    assert _weights(model, tp, dp, high, dtype_bytes) <= _weights(model, tp, dp, low, dtype_bytes) * (1 + 1e-12)
    # wide EP over more DP ranks (ep = tp·dp) never raises them either
    if parallelism_error(m, tp, 2 * dp, 2 * dp * tp) is None and parallelism_error(m, tp, dp, dp * tp) is None:
        assert _weights(model, tp, 2 * dp, 2 * dp * tp, dtype_bytes) <= _weights(model, tp, dp, dp * tp, dtype_bytes)


@st.composite
def _moe_deployment(draw: st.DrawFn) -> dict[str, object]:
    shape = draw(st.sampled_from(((2, 1, 2), (1, 2, 2), (2, 2, 4), (1, 4, 4), (4, 2, 8))))
    tp, dp, ep = shape
    dshape = draw(st.sampled_from(((2, 1, 2), (1, 4, 4), (2, 4, 8), (1, 8, 8))))
    return {
        "model": "mixtral-8x7b",
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": tp, "dp": dp, "ep": ep, "count": draw(st.integers(1, 2))},
        "decode": {
            "gpu": "h100-sxm",
            "tp": dshape[0],
            "dp": dshape[1],
            "ep": dshape[2],
            "count": draw(st.integers(1, 2)),
        },
        "dtype": draw(st.sampled_from(("bf16", "fp8"))),
        "workload": {
            "input_tokens": {
                "dist": "lognormal",
                "mean": draw(st.sampled_from((512, 2048))),
                "sigma": 0.8,
                "max": 8192,
            },
            "output_tokens": {"dist": "fixed", "value": draw(st.sampled_from((64, 256)))},
        },
        "slo": {"ttft": "4s", "tpot": "200ms"},
    }


@given(spec=_moe_deployment(), load=st.sampled_from((0.1, 0.5, 0.9)))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_moe_dp_ep_plans_keep_the_invariants(spec: dict[str, object], load: float) -> None:
    sc = scenario_from_dict(spec, source="hypothesis", base_dir=Path.cwd())
    with contextlib.suppress(NoFeasiblePlanError):
        ev = evaluate(sc, catalog=CATALOG)  # checks its own operating point; a breach raises
        res = resolve(sc, CATALOG)
        rate = load * ev.stability_limit_rps
        model = model_at_rate(res, rate)  # a MoE step concave in B: the line that rate runs on (decode_lines)
        assert operating_point_breaches(model.res, model, rate) == []
