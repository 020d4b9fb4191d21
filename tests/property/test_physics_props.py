"""No evaluation breaks physics: mode × scheduler × workload shape × dense/MoE × BF16/FP8
(pdplan.serving.checks.physics).

``evaluate`` checks its own result (every ceiling and floor at the goodput rate, the ceilings at the stability
limit) and raises :class:`~pdplan.serving.checks.physics.PhysicsInvariantError` on a breach; here hypothesis draws
deployments and workloads across the grid, and every ceiling and floor is also checked at three loads up to the
stability limit. A plan the inputs cannot meet (NoFeasiblePlanError) is fine; a breach is not.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdplan.errors import NoFeasiblePlanError
from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving import build_model, resolve
from pdplan.serving.checks.physics import operating_point_breaches

CATALOG = open_catalog()
MODELS = {"dense": ("llama-3.1-8b", 1), "moe": ("mixtral-8x7b", 2)}
"""Model and TP on an H100 SXM (Mixtral's 93 GB of BF16 weights need two)."""
LOADS = (0.05, 0.5, 0.95)


@st.composite
def lengths(draw: st.DrawFn, shape: str, lo: int, hi: int) -> dict[str, Any]:
    """One length law of ``shape`` within [lo, hi] tokens."""
    a = draw(st.integers(lo, hi))
    if shape == "fixed":
        return {"dist": "fixed", "value": a}
    if shape == "uniform":
        return {"dist": "uniform", "min": max(1, a // 4), "max": a}
    if shape == "lognormal":
        return {"dist": "lognormal", "mu": float(draw(st.floats(3.0, 7.5))), "sigma": 0.8, "min": 1, "max": hi}
    edges = sorted({1, max(2, a // 8), max(3, a // 2), a + 3})
    return {"dist": "histogram", "bins": edges, "weights": [1.0 + i for i in range(len(edges) - 1)]}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    model, tp = MODELS[draw(st.sampled_from(sorted(MODELS)))]
    shape = draw(st.sampled_from(["fixed", "one-token outputs", "uniform", "lognormal", "histogram"]))
    prompt_shape = "fixed" if shape == "one-token outputs" else shape
    outputs = {"dist": "fixed", "value": 1} if shape == "one-token outputs" else draw(lengths(shape, 2, 400))
    dtype = draw(st.sampled_from(["bf16", "fp8"]))
    data: dict[str, Any] = {
        "model": model,
        "dtype": dtype,
        "kv_dtype": draw(st.sampled_from(["bf16", dtype])),
        "workload": {"input_tokens": draw(lengths(prompt_shape, 16, 6000)), "output_tokens": outputs},
        "slo": {"ttft": "3s", "tpot": "150ms"},
    }
    if draw(st.sampled_from(["disaggregated", "colocated"])) == "colocated":
        scheduler = draw(st.sampled_from(["chunked", "prefill-first"]))
        data.update(mode="colocated", colocated={"gpu": "h100-sxm", "tp": tp, "count": 1, "scheduler": scheduler})
    else:
        data.update(
            prefill={"gpu": "h100-sxm", "tp": tp, "count": draw(st.integers(1, 2))},
            decode={"gpu": "h100-sxm", "tp": tp},
            granularity=draw(st.sampled_from(["request", "layer"])),
            ttft_convention=draw(st.sampled_from(["A", "B"])),
        )
    return data


@settings(deadline=None, max_examples=24, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_evaluate_never_breaks_physics(data: dict[str, Any]) -> None:
    sc = scenario_from_dict(data, source="prop", base_dir=Path.cwd())
    with contextlib.suppress(NoFeasiblePlanError):
        evaluate(sc, catalog=CATALOG)  # checks its own result: raises PhysicsInvariantError on a breach
    try:
        res = resolve(sc, CATALOG)
        model = build_model(res)
    except NoFeasiblePlanError:
        return
    limit = model.limit().rate_rps
    for load in LOADS:
        assert operating_point_breaches(res, model, load * limit) == [], (data, load)
