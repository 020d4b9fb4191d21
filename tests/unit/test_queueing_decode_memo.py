"""The §2.4 load covariances are memoised on the exact doubles they read: a hit is the fresh result, read-only, and
any changed input (a rate, the step's slope, the bins, the window) is computed afresh."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pdplan.queueing import LinearStepTime, decode_fixed_point, decode_workload, load_noise
from pdplan.queueing import decode as decode_module

STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)  # docs/queueing.md §6.3 coefficients
WORKLOAD = decode_workload([500.0, 2000.0], [50.0, 200.0], [0.7, 0.3])


def _fresh(rates: list[float], wl: decode_module.DecodeWorkload, step: LinearStepTime) -> tuple[bytes, bytes]:
    decode_module.clear_memo()
    var, fac = load_noise(decode_fixed_point(rates, wl, step), wl)
    return var.tobytes(), fac.tobytes()


def test_a_hit_is_the_fresh_result_and_read_only() -> None:
    rates = [20.0, 60.0]
    fresh = _fresh(rates, WORKLOAD, STEP)
    state = decode_fixed_point(rates, WORKLOAD, STEP)
    var, fac = load_noise(state, WORKLOAD)  # a hit
    assert (var.tobytes(), fac.tobytes()) == fresh
    kept = decode_module._load_covariances(state, WORKLOAD)
    assert kept is decode_module._load_covariances(state, WORKLOAD)
    with pytest.raises(ValueError, match="read-only"):
        kept[0][1][0, 0] = 1.0


@pytest.mark.parametrize(
    ("rates", "wl", "step"),
    [
        ([20.0, 61.0], WORKLOAD, STEP),  # one rate moved
        ([20.0, 60.0], WORKLOAD, LinearStepTime(8e-3, 51e-6, 3.9e-8)),  # the slope t1
        ([20.0, 60.0], replace(WORKLOAD, prob=np.array([0.6, 0.4])), STEP),  # the bins' weights
        ([20.0, 60.0], replace(WORKLOAD, window_tokens=1024.0), STEP),  # a sliding window
    ],
)
def test_a_changed_input_is_computed_afresh(
    rates: list[float], wl: decode_module.DecodeWorkload, step: LinearStepTime
) -> None:
    base = _fresh([20.0, 60.0], WORKLOAD, STEP)  # memoised
    var, fac = load_noise(decode_fixed_point(rates, wl, step), wl)  # no stale hit
    assert (var.tobytes(), fac.tobytes()) != base
    assert (var.tobytes(), fac.tobytes()) == _fresh(rates, wl, step)


def test_the_memo_stays_within_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    decode_module.clear_memo()
    monkeypatch.setattr(decode_module, "_COVARIANCES_BUDGET", 1000)
    for rate in (10.0, 20.0, 30.0, 40.0):
        load_noise(decode_fixed_point([rate], WORKLOAD, STEP), WORKLOAD)
        assert decode_module._COVARIANCES_HELD[0] <= 1000 or len(decode_module._COVARIANCES) == 1
    decode_module.clear_memo()


def test_average_variance_of_a_batch_is_each_rows_by_hand() -> None:
    """Var X̄(n) = (n C_0 + 2 Σ_{m<n} (n − m) C_m)/n²: C = (4, 2, 1) gives 4 at n = 1, (2·4 + 2·2)/4 = 3 at n = 2 and
    (3·4 + 2(2·2 + 1·1))/9 = 22/9 at n = 3, 3.5 halfway between 1 and 2; a second row C = (1, 0, 0) gives 1/n."""
    cov = np.array([[4.0, 2.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    steps = np.array([1.0, 2.0, 3.0, 1.5])
    got = decode_module._average_variance(cov, steps)
    np.testing.assert_allclose(got, [[4.0, 3.0, 22.0 / 9.0, 3.5], [1.0, 0.5, 1.0 / 3.0, 0.75]], rtol=1e-15)
    assert got[1].tobytes() == decode_module._average_variance(cov[1:], steps)[0].tobytes()
