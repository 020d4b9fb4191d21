"""Calibrating an engine profile from benchmark runs (pdplan.calibrate.benchmarks), startup_cohorts as a term: where it
lives in a profile (scheduling, not overheads), its value when the base profile leaves it unset, and how the report
shows it (a count, not seconds)."""

import pytest
import yaml

from pdplan.calibrate.benchmarks import profile_yaml, term_value, with_terms
from pdplan.io.catalog import open_catalog
from pdplan.report.calibrate_runs import _term_cell
from pdplan.specs.engine import EngineProfile


def test_with_terms_writes_startup_cohorts_into_scheduling_and_keeps_the_rest() -> None:
    base = open_catalog().engine("vllm")
    new = with_terms(base, {"startup_cohorts": 2.25, "request_s": 0.031}, "fitted here")
    assert new.scheduling.startup_cohorts is not None
    assert new.scheduling.startup_cohorts.value == 2.25
    assert new.scheduling.startup_cohorts.source == "fitted here"
    assert new.overheads.request_s.value == 0.031
    assert new.overheads.step_s == base.overheads.step_s
    assert new.scheduling.steady_arrivals == base.scheduling.steady_arrivals
    assert term_value(new, "startup_cohorts") == 2.25
    assert term_value(new, "request_s") == 0.031
    # the written profile reads back with the term in its scheduling block
    back = EngineProfile.model_validate(yaml.safe_load(profile_yaml(new)))
    assert back.scheduling.startup_cohorts == new.scheduling.startup_cohorts


def test_an_unset_startup_cohorts_reads_as_one_cohort() -> None:
    base = open_catalog().engine("sglang")
    if base.scheduling.startup_cohorts is not None:
        pytest.skip("the packaged SGLang profile sets startup_cohorts")
    assert term_value(base, "startup_cohorts") == 1.0
    new = with_terms(base, {"startup_cohorts": 1.0})
    assert new.scheduling.startup_cohorts is not None
    assert "unset in the base profile" in new.scheduling.startup_cohorts.source


@pytest.mark.parametrize(
    ("name", "value", "std", "status", "text"),
    [
        ("startup_cohorts", 2.9, 0.18, "fitted", "2.9 cohorts ± 0.18"),
        ("startup_cohorts", 6.0, None, "at_bound", "6 cohorts (at_bound)"),
        ("request_s", 0.0443, 0.0092, "fitted", "44.3 ms ± 9.2 ms"),
    ],
)
def test_term_cells(name: str, value: float, std: float | None, status: str, text: str) -> None:
    assert _term_cell(name, value, std, status) == text
