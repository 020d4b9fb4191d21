"""The one overrides model (pdplan.specs.command_line) and its two readers: apply_overrides (evaluate, simulate) and the
search narrowing of optimize (pdplan.io.overrides); error messages name the flag from one vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.io.overrides import apply_overrides, instance_counts, parse_xpyd, search_scenario, with_search_overrides
from pdplan.io.scenario import load_scenario
from pdplan.specs.command_line import DEPLOYMENT_FIELDS, FLAGS, ScenarioOverrides, flag

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "data" / "small_scenario.yaml"


def test_every_field_has_its_flag() -> None:
    for field in ScenarioOverrides.model_fields:
        assert flag(field) == "--" + field.replace("_", "-")
    assert FLAGS["gpus"] == "--gpus"
    assert set(DEPLOYMENT_FIELDS) < set(ScenarioOverrides.model_fields)


def test_the_model_is_frozen_and_strict_about_names() -> None:
    ov = ScenarioOverrides(prefill_tp=2, decode_tp=8)
    with pytest.raises(ValidationError):
        ov.tp = 4  # type: ignore[misc]
    with pytest.raises(ValidationError):
        ScenarioOverrides(prefil_tp=2)  # type: ignore[call-arg]
    assert ov.without(("prefill_tp",)) == ScenarioOverrides(decode_tp=8)


def test_per_role_values_stay_apart_in_the_scenario() -> None:
    out = apply_overrides(load_scenario(SMALL), ScenarioOverrides(tp=2, decode_tp=4, decode_gpu="h200-sxm"))
    assert out.prefill is not None
    assert out.decode is not None
    assert (out.prefill.gpu, out.prefill.tp, out.decode.gpu, out.decode.tp) == ("h100-sxm", 2, "h200-sxm", 4)


def test_search_narrowing_keeps_the_tp_degrees_per_role() -> None:
    """Issue #12 item 5: --prefill-tp/--decode-tp used to join one TP set searched for both roles."""
    sc = with_search_overrides(load_scenario(SMALL), ScenarioOverrides(tp=2, prefill_tp=1, decode_tp=4))
    assert sc.search is not None
    assert (sc.search.tp, sc.search.prefill_tp, sc.search.decode_tp) == ([2], [1], [4])


def test_optimize_searches_each_role_at_its_own_tp() -> None:
    from pdplan.io.catalog import open_catalog
    from pdplan.search.space import build_space

    sc = with_search_overrides(load_scenario(SMALL), ScenarioOverrides(prefill_tp=1, decode_tp=2))
    space = build_space(sc, open_catalog())
    assert {h.tp for h in space.prefill} == {1}
    assert {h.tp for h in space.decode} == {2}


def test_search_narrowing_per_role_gpus_lists_and_scheduler() -> None:
    ov = ScenarioOverrides(gpu="h100-sxm, l40s", decode_gpu="l40s", link="ib-ndr,roce-100g", scheduler="prefill-first")
    sc = with_search_overrides(load_scenario(SMALL), ov)
    assert sc.search is not None
    assert (sc.search.prefill_gpus, sc.search.decode_gpus) == (["h100-sxm", "l40s"], ["l40s"])
    assert sc.search.links == ["ib-ndr", "roce-100g"]
    assert sc.search.colocated_scheduler == "prefill-first"
    assert with_search_overrides(sc, ScenarioOverrides()) is sc


def test_search_scenario_applies_only_the_non_deployment_fields_to_the_scenario() -> None:
    base = load_scenario(SMALL)
    ov = ScenarioOverrides(gpu="l40s", tp=2, xpyd="2P1D", isl=2048, ttft_slo="3s", kv_dtype="fp8")
    sc = search_scenario(base, ov)
    assert sc.prefill == base.prefill  # the deployment flags narrow the search instead
    assert (sc.kv_dtype, sc.slo.ttft) == ("fp8", pytest.approx(3.0))
    assert sc.search is not None
    assert (sc.search.prefill_gpus, sc.search.tp) == (["l40s"], [2])
    assert instance_counts(ov) == ((2, 1), None)
    assert instance_counts(ScenarioOverrides(colocated=3)) == (None, 3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda sc: parse_xpyd("2X1D"), "--xpyd: expected counts like 2P1D, got '2X1D'"),
        (
            lambda sc: apply_overrides(sc, ScenarioOverrides(xpyd="2P1D", colocated=2)),
            "--xpyd: give either --xpyd or --colocated, not both",
        ),
        (
            lambda sc: instance_counts(ScenarioOverrides(xpyd="2P1D", colocated=2)),
            "--xpyd: give either --xpyd or --colocated, not both",
        ),
        (
            lambda sc: apply_overrides(sc, ScenarioOverrides(scheduler="chunked")),
            "--scheduler: --scheduler applies to colocated deployments (--colocated N)",
        ),
        (
            lambda sc: with_search_overrides(sc, ScenarioOverrides(gpu=",")),
            "expected one or more comma-separated names, got ','",
        ),
        (
            lambda sc: with_search_overrides(sc, ScenarioOverrides(granularity="page", scheduler="nope")),
            "command line: search.granularities.0: Input should be 'request', 'layer' or 'chunk'",
        ),
    ],
    ids=["xpyd", "xpyd-and-colocated", "counts", "scheduler", "empty-list", "search-first-error-alone"],
)
def test_error_messages_are_unchanged(call: object, message: str) -> None:
    with pytest.raises(SpecError) as err:
        call(load_scenario(SMALL))  # type: ignore[operator]
    assert str(err.value) == message


def test_a_trace_needs_both_lengths(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("input_tokens,output_tokens\n100,10\n200,20\n")
    (tmp_path / "w.yaml").write_text("trace: {file: t.csv}\n")
    sc = apply_overrides(load_scenario(SMALL), ScenarioOverrides(workload=str(tmp_path / "w.yaml")))
    with pytest.raises(SpecError) as err:
        apply_overrides(sc, ScenarioOverrides(isl=100))
    assert str(err.value) == "--isl: a trace workload needs both --isl and --osl to be replaced"


def test_transfer_errors_name_the_flag() -> None:
    from pdplan.io.catalog import open_catalog
    from pdplan.serving.transfer_one import one_transfer

    catalog = open_catalog()
    with pytest.raises(SpecError) as err:
        one_transfer(catalog, model="opt-66b", tokens=512, link="ib-hdr", granularity="layer")
    assert str(err.value) == (
        "--gpu: layer/chunk granularity and a TP mismatch need --gpu (prefill time, HBM bandwidth)"
    )
    with pytest.raises(SpecError) as err:
        one_transfer(catalog, model="opt-66b", tokens=512, link="ib-hdr", granularity="request", kv_dtype="fp4")
    assert str(err.value) == "--kv-dtype: 'fp4' is not one of bf16, fp8"


def test_isl_override_renames_the_workload() -> None:
    from pdplan.io.overrides import apply_overrides
    from pdplan.io.scenario import default_scenario_path, load_scenario
    from pdplan.specs.command_line import ScenarioOverrides

    base = load_scenario(default_scenario_path())
    assert base.workload.name == "chat"
    assert apply_overrides(base, ScenarioOverrides(isl=2048)).workload.name == "chat (isl=2048)"
    both = apply_overrides(base, ScenarioOverrides(isl=2048, osl=128)).workload.name
    assert both == "chat (isl=2048, osl=128)"
