"""The joint fit of the shipped end-to-end terms on both GPUs (issue #23 item 2), by hand.

``benchmarks/cross_gpu_fit.py`` weights each GPU's rows to half the total (``gpu_balanced_weights``) and
``pdplan.calibrate.engine_fit.solve_log_residuals`` applies the weights; ``benchmarks/fit_shipped_profile.py`` writes
the fitted value and its source into an engine YAML block and nothing else.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import yaml

from pdplan.calibrate.engine_fit import solve_log_residuals

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # the scripts import their siblings
    monkeypatch.delitem(sys.modules, name, raising=False)
    return __import__(name)


def test_each_gpu_gets_half_the_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    """3 H100 rows and 1 H200 row, all trained: n = 4, g = 2, so H100 rows 4/(2·3) = 2/3 each (total 2) and the H200
    row 4/(2·1) = 2 (total 2); a row outside the training mask weighs 0; one GPU alone: every row 1."""
    fit = _bench(monkeypatch, "cross_gpu_fit")
    gpu = np.array(["h100", "h100", "h100", "h200", "h200"])
    train = np.array([True, True, True, True, False])
    w = fit.gpu_balanced_weights(gpu, train)
    np.testing.assert_allclose(w, [2 / 3, 2 / 3, 2 / 3, 2.0, 0.0])
    np.testing.assert_allclose(fit.gpu_balanced_weights(gpu, gpu == "h100"), [1.0, 1.0, 1.0, 0.0, 0.0])


def test_weights_count_residuals_in_the_least_squares() -> None:
    """pred = 1 + x on two rows measured 2 and 4. Linear loss on log residuals with weights (3, 1):
    minimise 3·(ln(1+x) − ln 2)² + (ln(1+x) − ln 4)² → ln(1+x) = (3 ln 2 + ln 4)/4 = 1.25 ln 2, x = 2^1.25 − 1 =
    1.3784; unweighted ln(1+x) = (ln 2 + ln 4)/2, x = √8 − 1 = 1.8284."""
    base, jac, x0, meas = np.ones(2), np.ones((2, 1)), np.zeros(1), np.array([2.0, 4.0])

    def solve(weights: np.ndarray | None) -> np.ndarray:
        return solve_log_residuals(
            base, jac, x0, meas, bounds=[(0.0, 10.0)], scale=np.ones(1), losses=("linear",), floor=1e-9, weights=weights
        )

    weighted, plain = solve(np.array([3.0, 1.0])), solve(None)
    assert weighted[0] == pytest.approx(2**1.25 - 1, rel=1e-6)
    assert plain[0] == pytest.approx(math.sqrt(8) - 1, rel=1e-6)


PROFILE = """overheads:
  step_s:
    value: 0.0030
    source: "FITTED by pdplan on H100 rows
      (old text)"
  request_s:
    value: 0.005
    source: "taken"
"""


def test_writing_a_term_replaces_its_value_and_source_only(monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = _bench(monkeypatch, "fit_shipped_profile")
    text = shipped.replace_term(PROFILE, "step_s", 0.00216, "FITTED jointly " + "on both GPUs " * 12)
    data = yaml.safe_load(text)
    source = "FITTED jointly " + "on both GPUs " * 11 + "on both GPUs"
    assert data["overheads"]["step_s"] == {"value": 0.00216, "source": source}
    assert data["overheads"]["request_s"] == {"value": 0.005, "source": "taken"}
    assert max(len(line) for line in text.splitlines()) <= 118
    with pytest.raises(ValueError, match="found 0"):
        shipped.replace_term(PROFILE, "startup_cohorts", 2.0, "x")


def test_converged_fit_lands_on_the_same_terms_from_two_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rows whose TPOT is 1 + x and (1 + x)² ms (x = step_s in ms), measured 2 and 8, plain least squares of log
    residuals. With the forward-difference Jacobian (step h = 0.5 ms: slopes 1 and 2(1 + x) + h) the Gauss–Newton
    fixed point solves Σ rᵢ·Jᵢ/pᵢ = 0, rᵢ = ln(pᵢ/mᵢ): x = 1.6519 ms, by bisection below (the exact minimum,
    ln(1 + x) = 1.4 ln 2, is x = 1.6390: the secant's offset). From x = 0 and x = 5 ms the converged fit lands there
    within a tenth of its 1σ (0.34 ms); the chord passes on the start's Jacobian land at 1.24 and 2.19 ms."""
    fit = _bench(monkeypatch, "cross_gpu_fit")
    monkeypatch.setitem(fit.LOSSES, "tpot", ("linear",))
    meas = np.array([2.0, 8.0])

    def price(terms: dict[str, float], mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        x = 1000.0 * terms["step_s"]
        p = np.array([1.0 + x, (1.0 + x) ** 2])
        return p.copy(), p.copy()

    def condition(x: float) -> float:
        p = np.array([1.0 + x, (1.0 + x) ** 2])
        return float(np.sum(np.log(p / meas) * np.array([1.0, 2.0 * (1.0 + x) + 0.5]) / p))

    lo, hi = 0.0, 5.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if condition(mid) < 0 else (lo, mid)
    root_s = lo / 1000.0
    assert root_s == pytest.approx(1.6519e-3, abs=1e-7)
    train = np.ones(2, bool)
    chord = []
    for start in (0.0, 0.005):
        got = fit.fit_converged(price, {"step_s": start}, meas, meas, train)
        assert got.converged
        assert abs(got.fit.theta["step_s"] - root_s) < 0.1 * got.std["step_s"]
        assert got.std["step_s"] == pytest.approx(3.4e-4, rel=0.05)
        chord.append(fit.fit(fit.linearise(price, {"step_s": start}), price, meas, meas, train).theta["step_s"])
    assert chord[0] == pytest.approx(1.245e-3, rel=1e-2)
    assert chord[1] == pytest.approx(2.192e-3, rel=1e-2)
