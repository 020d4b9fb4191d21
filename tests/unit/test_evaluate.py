"""``evaluate`` (pdplan.evaluation) and the simulator's summary when every output is one token (``--osl 1``): no decode
interval, so no TPOT; goodput and TTFT stay finite.

The TPOT is a point mass at 0 (no time after the only token, E2E = TTFT) that meets any threshold, in the closed form
and in the simulator's summary alike; normalising the TPOT percentiles over no TPOT-defined cell (0/0) would stop the
goodput root search on a NaN.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.sim.compare import simulate_scenario
from pdplan.specs.scenario import Scenario

CATALOG = open_catalog()
ONE = {"input_tokens": {"dist": "lognormal", "mu": 6.9, "sigma": 0.8, "min": 1, "max": 8192}}


def _scenario(**extra: Any) -> Scenario:
    data: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "prefill": {"gpu": "h100-sxm", "count": 1},
        "decode": {"gpu": "h100-sxm"},
        "workload": {**ONE, "output_tokens": {"dist": "fixed", "value": 1}},
        "slo": {"ttft": "500ms", "tpot": "50ms"},
    }
    data.update(extra)
    if data.get("mode") == "colocated":
        del data["prefill"], data["decode"]
    return scenario_from_dict(data, source="test", base_dir=Path.cwd())


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"ttft_convention": "B"},
        {"mode": "colocated", "colocated": {"gpu": "h100-sxm", "count": 1, "scheduler": "chunked"}},
        {"mode": "colocated", "colocated": {"gpu": "h100-sxm", "count": 1, "scheduler": "prefill-first"}},
    ],
)
def test_one_token_outputs_evaluate(extra: dict[str, Any]) -> None:
    ev = evaluate(_scenario(**extra), catalog=CATALOG, rate=2.0)
    assert math.isfinite(ev.goodput_rps)
    assert ev.goodput_rps > 0
    op = ev.operating_point
    assert op is not None
    assert all(math.isfinite(v) and v > 0 for v in op.ttft_s.as_dict().values())
    assert op.tpot_s.as_dict() == {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
    assert 0.0 < op.attainment <= 1.0


def test_a_tpot_slo_does_not_bind_one_token_outputs() -> None:
    loose = evaluate(_scenario(), catalog=CATALOG).goodput_rps
    tight = evaluate(_scenario(slo={"ttft": "500ms", "tpot": "1ms"}), catalog=CATALOG).goodput_rps
    assert tight == pytest.approx(loose, rel=1e-9)


def test_one_token_outputs_simulate() -> None:
    cmp = simulate_scenario(_scenario(), catalog=CATALOG, rate=2.0, n_requests=300)
    assert cmp.simulated is not None
    assert cmp.simulated.tpot_s.as_dict() == {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
    assert math.isfinite(cmp.simulated.ttft_s.p90)
    assert cmp.relative_error()["tpot_s"]["p90"] is None  # 0 vs 0: no relative error
