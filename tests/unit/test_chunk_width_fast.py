"""The step-width mean field's fast paths give the doubles of the general ones (pdplan/queueing/chunk_width.py
``_Gap`` and ``_illinois_one``, pdplan/queueing/colocated_queue.py ``_landing_cdfs``; docs/accuracy.md §7.22).

Each is compared bit for bit (``tobytes``) with the code it replaced, on a G(n) with tile waves (its convex envelope,
as :func:`pdplan.serving.roles.chunk_price` builds it) and on rates from near zero (the x/(1 − e^{−x}) small-x branch)
to past the budget's edge.
"""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing import chunk_width as cw
from pdplan.queueing.chunk_width import GemmWidth, lower_convex_hull, riding_mean_field
from pdplan.queueing.colocated_queue import _landing_cdfs
from pdplan.queueing.decode import DecodeWorkload, LinearStepTime

TOKENS = np.arange(1.0, 8200.0)
WAVES = 0.004 + 3e-6 * 128.0 * np.ceil(TOKENS / 128.0)  # a weight read, then compute in waves of 128 tokens
WIDTH = GemmWidth(TOKENS, lower_convex_hull(TOKENS, WAVES))
STEP = LinearStepTime(t0_s=0.006, t1_s_per_seq=2e-5, t2_s_per_token=1.5e-8)
WORKLOAD = DecodeWorkload(np.array([120.0, 900.0, 3000.0]), np.array([40.0, 250.0, 600.0]), np.array([0.5, 0.3, 0.2]))
ATTENTION = np.array([1e-5, 2e-4, 1.5e-3])
RATES = np.array([1e-12, 1e-7, 0.05, 0.4, 1.3, 4.2, 15.0, 60.0, 120.0, 180.0, 250.0])


def _reference_gap(rate: np.ndarray, budget: float, tau: np.ndarray) -> np.ndarray:
    """τ − map(τ) as riding_mean_field computed it before ``_Gap`` (its closure, verbatim)."""
    el, ea = float(WORKLOAD.prob @ WORKLOAD.computed_tokens), float(WORKLOAD.prob @ ATTENTION)
    load = rate * (STEP.per_request_s(WORKLOAD) + ea)
    r = rate if tau.ndim == 1 else rate[:, None]
    t_p = cw._width_price(r, tau, WORKLOAD, budget, WIDTH, el)[0]
    return np.asarray(tau - STEP.t0_s - tau * ((load if tau.ndim == 1 else load[:, None]) + r * el * t_p), np.float64)


def _gap(rate: np.ndarray, budget: float) -> cw._Gap:
    el, ea = float(WORKLOAD.prob @ WORKLOAD.computed_tokens), float(WORKLOAD.prob @ ATTENTION)
    load = rate * (STEP.per_request_s(WORKLOAD) + ea)
    return cw._Gap(rate, load, WORKLOAD, el, STEP.t0_s, budget, WIDTH)


@pytest.mark.parametrize("budget", [8192.0, 512.0, 1.5])
def test_gap_is_the_closures_doubles(budget: float) -> None:
    gap = _gap(RATES, budget)
    taus = np.geomspace(1e-3, 2.0, 7)
    for tau in taus:
        row = np.full(RATES.size, tau)
        assert gap(row).tobytes() == _reference_gap(RATES, budget, row).tobytes()
    grid = np.broadcast_to(taus, (RATES.size, taus.size)).copy()
    assert gap(grid).tobytes() == _reference_gap(RATES, budget, grid).tobytes()


def test_gap_past_the_table_is_an_error() -> None:
    short = GemmWidth(TOKENS[:600], WIDTH.gemm_s[:600])
    gap = cw._Gap(RATES, RATES * 0.0, WORKLOAD, 5000.0, STEP.t0_s, 8192.0, short)
    with pytest.raises(ValueError, match="past the table"):
        gap(np.full(RATES.size, 0.5))


def test_one_row_illinois_is_the_vectorised_loops_doubles() -> None:
    for rate in RATES[1:]:
        one = np.array([rate])
        gap = _gap(one, 8192.0)
        lo, hi = np.array([1e-3]), np.array([5.0])
        f_lo, f_hi = gap(lo), gap(hi)
        if not (f_lo[0] <= 0.0 <= f_hi[0]):
            continue
        vector = cw._illinois(gap, lo, hi, f_lo, f_hi)
        assert cw._illinois_one(gap, lo, hi, f_lo, f_hi).tobytes() == vector.tobytes()


@pytest.mark.parametrize("power", [3.0, 8.0, 0.3])
def test_one_row_illinois_on_curved_functions(power: float) -> None:
    # regula falsi on a curved function keeps one end for several steps, so the Illinois halving of the stale end
    # runs (it does not on the mean field's nearly straight gap above)
    def fn(x: np.ndarray) -> np.ndarray:
        return np.asarray(x**power - 2.0, dtype=np.float64)

    steps = []
    for lo_x, hi_x in ((0.1, 10.0), (1.0, 2.0), (1e-3, 50.0), (1.2, 1.3)):
        lo, hi = np.array([lo_x]), np.array([hi_x])
        if not fn(lo)[0] <= 0.0 <= fn(hi)[0]:  # the root outside this bracket
            continue
        seen: list[float] = []

        def counted(x: np.ndarray, seen: list[float] = seen) -> np.ndarray:
            seen.append(float(x[0]))
            return fn(x)

        one = cw._illinois_one(counted, lo, hi, fn(lo), fn(hi))
        steps.append(len(seen))
        assert one.tobytes() == cw._illinois(fn, lo, hi, fn(lo), fn(hi)).tobytes()
        assert abs(float(one[0]) ** power - 2.0) < 1e-9
    assert max(steps) >= 6  # past the few steps of a straight gap: the halving ran


def test_one_rate_is_its_row_of_many() -> None:
    many = riding_mean_field(RATES, WORKLOAD, STEP, 8192.0, WIDTH, ATTENTION)
    assert many.stable.any()  # both kinds of row compared
    assert not many.stable.all()
    for i, rate in enumerate(RATES):
        one = riding_mean_field(np.array([rate]), WORKLOAD, STEP, 8192.0, WIDTH, ATTENTION)
        for name in ("tau_mean_s", "s_per_token", "decode_tokens", "step_prompt_tokens", "stable"):
            assert getattr(one, name).tobytes() == getattr(many, name)[i : i + 1].tobytes(), (name, rate)


def test_landing_cdfs_are_each_parts_clip() -> None:
    edges = np.asarray(np.arange(300) * 0.0137, dtype=np.float64)
    busy = np.asarray(np.linspace(0.0, 1.0, 300) ** 2, dtype=np.float64)
    parts = [(0.5, 0.2, False, 1.0), (1.7, 0.1, False, 3.0), (2.2, 0.7, True, 4.0), (1e-9, 0.0, False, 0.0)]
    got = _landing_cdfs(edges, parts, busy)
    for j, (t, _, full, _) in enumerate(parts):
        rest = np.clip(edges / t, 0.0, 1.0)
        assert got[j].tobytes() == (busy * rest if full else rest).tobytes()
