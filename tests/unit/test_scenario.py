"""Scenario spec: loading, defaults, validation errors, CLI overrides (pdplan.specs.scenario)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdplan.errors import SpecError
from pdplan.io.overrides import apply_overrides, parse_xpyd
from pdplan.io.scenario import default_scenario_path, load_scenario, scenario_from_dict
from pdplan.specs.command_line import ScenarioOverrides

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_packaged_default_equals_example() -> None:
    assert default_scenario_path().read_bytes() == (ROOT / "examples/default.yaml").read_bytes()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_load(path: Path) -> None:
    sc = load_scenario(path)
    assert sc.num_gpus >= 1


def test_units_and_defaults() -> None:
    sc = load_scenario(ROOT / "examples/opt-13b-a100-distserve.yaml")
    assert sc.slo.ttft == pytest.approx(0.25)
    assert sc.slo.tpot == pytest.approx(0.1)
    assert sc.ttft_convention == "B"
    assert sc.num_gpus == 3  # prefill TP2 + decode TP1


def _base() -> dict[str, object]:
    return {"model": "llama-3.1-8b", "prefill": {"gpu": "h100-sxm"}, "decode": {"gpu": "h100-sxm"}, "workload": "chat"}


def test_unknown_field_is_one_line_error() -> None:
    with pytest.raises(SpecError, match=r"f\.yaml: prefil: unknown field"):
        scenario_from_dict({**_base(), "prefil": {}}, source="f.yaml", base_dir=ROOT)


def test_mode_shape_checked() -> None:
    data = _base()
    del data["decode"]
    with pytest.raises(SpecError, match="needs both prefill"):
        scenario_from_dict(data, source="f.yaml", base_dir=ROOT)


def test_bad_time_unit() -> None:
    with pytest.raises(SpecError, match=r"slo\.ttft"):
        scenario_from_dict({**_base(), "slo": {"ttft": "2 parsecs"}}, source="f", base_dir=ROOT)


def test_unknown_workload_preset() -> None:
    with pytest.raises(SpecError, match="workload"):
        scenario_from_dict({**_base(), "workload": "chatt"}, source="f", base_dir=ROOT)


def test_overrides_xpyd_gpu_tp_and_lengths() -> None:
    sc = load_scenario(default_scenario_path())
    out = apply_overrides(
        sc, ScenarioOverrides(xpyd="3P2D", decode_tp=8, gpu="h200-sxm", isl=1000, osl=100, ttft_slo="500ms")
    )
    assert out.prefill is not None
    assert out.decode is not None
    assert (out.prefill.count, out.decode.count, out.decode.tp) == (3, 2, 8)
    assert out.prefill.gpu == out.decode.gpu == "h200-sxm"
    assert out.slo.ttft == pytest.approx(0.5)
    assert out.workload.parametric() is not None
    assert out.num_gpus == 3 * 4 + 2 * 8


def test_overrides_colocated_and_back() -> None:
    sc = load_scenario(default_scenario_path())
    co = apply_overrides(sc, ScenarioOverrides(colocated=4, scheduler="prefill-first"))
    assert co.mode == "colocated"
    assert co.colocated is not None
    assert (co.colocated.count, co.colocated.scheduler) == (4, "prefill-first")
    back = apply_overrides(co, ScenarioOverrides(xpyd="1P1D"))
    assert back.mode == "disaggregated"
    assert back.num_gpus == 8


def test_override_errors() -> None:
    sc = load_scenario(default_scenario_path())
    with pytest.raises(SpecError, match="xpyd"):
        parse_xpyd("2X1D")
    with pytest.raises(SpecError, match="scheduler"):
        apply_overrides(sc, ScenarioOverrides(scheduler="chunked"))
    with pytest.raises(SpecError, match="granularity"):
        apply_overrides(sc, ScenarioOverrides(granularity="page"))
