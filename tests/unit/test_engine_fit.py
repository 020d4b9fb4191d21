"""fit_overheads (pdplan.calibrate.engine_fit) on a hand-made predictor whose terms are known."""

from collections.abc import Mapping

import numpy as np
import pytest

from pdplan.calibrate.engine_fit import fit_overheads
from pdplan.errors import SpecError
from pdplan.types import FloatArray

# runs: (layers, tp, kernel step s, prefill steps before the first token, queue factor)
RUNS = np.array(
    [
        (32, 1, 0.006, 1, 1.0),
        (32, 2, 0.004, 2, 1.3),
        (64, 2, 0.012, 1, 1.1),
        (64, 4, 0.008, 3, 1.6),
        (80, 4, 0.015, 2, 1.2),
        (80, 8, 0.010, 4, 2.0),
        (32, 8, 0.003, 1, 1.0),
    ]
)
TRUTH = {"step_s": 8e-4, "collective_s": 1.2e-5, "launch_gap_s_per_layer": 6e-6, "request_s": 0.035}


def _predict(terms: Mapping[str, float]) -> tuple[FloatArray, FloatArray]:
    """A step = kernels + step + layers·gap + 2·layers·collective (TP > 1); TTFT = queue·steps·step + request."""
    layers, tp, kernel, steps, queue = RUNS.T
    step = kernel + terms["step_s"] + layers * terms["launch_gap_s_per_layer"]
    step = step + np.where(tp > 1, 2 * layers * terms["collective_s"], 0.0)
    ttft = queue * steps * step + terms["request_s"]
    return ttft, step


def test_recovers_known_terms_with_small_uncertainty() -> None:
    ttft, tpot = _predict(TRUTH)
    start = dict.fromkeys(TRUTH, 0.0)
    fit = fit_overheads(_predict, start, ttft, tpot)
    for term in fit.terms:
        assert term.value_s == pytest.approx(TRUTH[term.name], rel=0.02)
        assert term.status == "fitted"
        assert term.std_s is not None
        assert term.std_s < 0.05 * TRUTH[term.name]  # exact data: residuals ~0
    assert fit.passes <= 4 * 5 + 1


def test_noisy_data_gives_an_uncertainty_that_covers_the_truth() -> None:
    rng = np.random.default_rng(7)
    ttft, tpot = _predict(TRUTH)
    ttft, tpot = ttft * rng.normal(1, 0.03, ttft.size), tpot * rng.normal(1, 0.03, tpot.size)
    fit = fit_overheads(_predict, dict.fromkeys(TRUTH, 0.0), ttft, tpot)
    for term in fit.terms:
        assert term.std_s is not None
        assert term.std_s > 0
        assert abs(term.value_s - TRUTH[term.name]) < 4 * term.std_s + 1e-7


def test_a_term_no_run_sees_keeps_its_start_value() -> None:
    def tp1_only(terms: Mapping[str, float]) -> tuple[FloatArray, FloatArray]:
        ttft, tpot = _predict({**terms, "collective_s": 0.0})
        return ttft, tpot

    ttft, tpot = tp1_only(TRUTH)
    fit = fit_overheads(tp1_only, {**dict.fromkeys(TRUTH, 0.0), "collective_s": 3e-6}, ttft, tpot)
    by = {t.name: t for t in fit.terms}
    assert by["collective_s"].status == "not constrained"
    assert by["collective_s"].value_s == 3e-6
    assert by["step_s"].value_s == pytest.approx(TRUTH["step_s"], rel=0.02)


def test_bounds_hold_and_are_reported() -> None:
    ttft, tpot = _predict(TRUTH)
    fit = fit_overheads(_predict, dict.fromkeys(TRUTH, 0.0), ttft * 0.5, tpot * 0.5)  # faster than zero overhead
    assert all(t.value_s >= 0.0 for t in fit.terms)
    assert any(t.status == "at_bound" and t.std_s is None for t in fit.terms)


def test_fewer_runs_than_terms_is_refused() -> None:
    ttft, tpot = _predict(TRUTH)
    with pytest.raises(SpecError, match=r"3 benchmark run\(s\) cannot fit 4 overhead terms"):
        fit_overheads(_predict, dict.fromkeys(TRUTH, 0.0), ttft[:3], tpot[:3])
