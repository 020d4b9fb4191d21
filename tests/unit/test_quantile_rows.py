"""Mixture quantiles solved for all rates at once (pdplan.queueing.distributions.mixture_quantile_rows) are the doubles
the one-rate-at-a-time brentq gave: GammaMixture (with and without a spread delay and a uniform part) and TtftMixture
(one shared wait, and a wait per prompt bin) against the scalar loop they replaced; the wait lattice's cdf against
its former formula; the Snapshot's percentile reads against its summaries; the colocated KV/seat search's memo of F
against solving F at every trial rate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.numerics.roots import brentq
from pdplan.queueing import mg1_wait_distribution
from pdplan.queueing.batched_ttft import PerBinWait
from pdplan.queueing.decode import DecodeWorkload, LinearStepTime, decode_workload
from pdplan.queueing.distributions import (
    GammaMixture,
    SpreadDelay,
    UniformPart,
    WaitDistribution,
    mixture_quantile_rows,
)
from pdplan.queueing.kv_admission import kv_held
from pdplan.queueing.linear_capacity import _bound_rates, riding_capacity, riding_feedback
from pdplan.queueing.link_delay import BinDelay
from pdplan.queueing.ttft_mixture import TtftMixture, _span_s
from pdplan.serving.snapshot import Snapshot

LEVELS = (0.5, 0.9, 0.99)


def _scalar_root(cdf: object, q: float, lo: float, hi: float) -> float:
    """The replaced per-rate solve: ``lo`` when F(lo) ≥ q, else brentq on F − q at xtol 1e-12, rtol 1e-10."""
    assert callable(cdf)
    if cdf(lo) >= q:
        return lo
    assert cdf(hi) >= q
    return float(brentq(lambda t: cdf(t) - q, lo, hi, xtol=1e-12, rtol=1e-10))


def _gamma_scalar(mix: GammaMixture, q: float) -> list[float]:
    """GammaMixture.quantile as it was: one brentq per rate on ``row(r).first_cdf``, the same bracket."""
    out = []
    for r in range(mix.offset_s.shape[0]):
        lo = float(mix.offset_s[r].min())
        hi = float((mix.offset_s[r] + mix.load_mean_s[r] + 60.0 * np.sqrt(mix.load_var_s2[r])).max()) + 1e-12
        if mix.delay is not None:
            hi += float(mix.delay.points_s[r].max() / mix.delay.intervals.min())
        if mix.uniform is not None:
            hi += float(mix.uniform.width_s[r].max())
        out.append(_scalar_root(mix.row(r).first_cdf, q, lo, hi))
    return out


def _ttft_scalar(mix: TtftMixture, q: float) -> list[float]:
    """TtftMixture.quantile as it was: one brentq per rate on ``row(r).first_cdf``, the same bracket."""
    out = []
    for r in range(mix.offsets_s.shape[0]):
        one = mix.row(r)
        hi = float(one.offsets_s.max() + one.link.points_s.max()) + float(np.max(_span_s(one.wait)))
        out.append(_scalar_root(one.first_cdf, q, float(one.offsets_s.min()), hi))
    return out


def _gamma_mixture(seed: int, delay: str, uniform: bool) -> GammaMixture:
    rng = np.random.default_rng(seed)
    n_rates, n_bins, n_points = int(rng.integers(1, 7)), int(rng.integers(1, 40)), int(rng.integers(1, 6))
    offset = rng.uniform(1e-3, 0.05, (n_rates, n_bins))
    mean = rng.uniform(0.0, 0.05, (n_rates, n_bins))
    var = (rng.uniform(0.0, 0.6, (n_rates, n_bins)) * mean) ** 2
    var[rng.random((n_rates, n_bins)) < 0.2] = 0.0  # point masses
    prob = rng.random(n_bins)
    spread = None
    if delay != "none":
        shape = (n_rates, n_points) if delay == "shared" else (n_rates, n_bins, n_points)
        weights = rng.random(shape)
        spread = SpreadDelay(
            rng.uniform(0.0, 0.2, shape),
            weights / weights.sum(axis=-1, keepdims=True),
            rng.integers(1, 300, n_bins).astype(np.float64),
        )
    part = UniformPart(rng.uniform(0.0, 0.02, (n_rates, n_bins)), rng.random(n_rates)) if uniform else None
    return GammaMixture(offset, mean, var, prob / prob.sum(), spread, part)


@pytest.mark.parametrize("delay", ["none", "shared", "per bin"])
@pytest.mark.parametrize("uniform", [False, True])
def test_gamma_quantiles_are_the_scalar_loops(delay: str, uniform: bool) -> None:
    for seed in range(12):
        mix = _gamma_mixture(seed, delay, uniform)
        for q in LEVELS:
            assert mix.quantile(q).tolist() == _gamma_scalar(mix, q)  # bit for bit


@settings(deadline=None, max_examples=30)
@given(
    seed=st.integers(0, 2**31),
    delay=st.sampled_from(["none", "shared", "per bin"]),
    uniform=st.booleans(),
    q=st.floats(0.01, 0.999),
)
def test_gamma_quantiles_any_level(seed: int, delay: str, uniform: bool, q: float) -> None:
    mix = _gamma_mixture(seed, delay, uniform)
    got = mix.quantile(q)
    assert got.tolist() == _gamma_scalar(mix, q)
    for r, t in enumerate(got.tolist()):  # and it is the level's quantile: F crosses q within the tolerance there
        cdf = mix.row(r).first_cdf
        assert cdf(t + 1e-12 + 1e-10 * t) >= q - 1e-12
        assert t == float(mix.offset_s[r].min()) or cdf(t - 1e-12 - 1e-10 * t) <= q + 1e-12


def _ttft_mixture(seed: int, per_bin_wait: bool) -> TtftMixture:
    rng = np.random.default_rng(seed)
    n_rates, n_bins, n_lengths, n_points = (
        int(rng.integers(1, 6)),
        int(rng.integers(1, 12)),
        int(rng.integers(1, 5)),
        int(rng.integers(1, 8)),
    )
    rates = rng.uniform(0.5, 8.0, n_rates)
    wait: WaitDistribution | PerBinWait = mg1_wait_distribution(rates, [0.05, 0.08], [0.5, 0.5])
    if per_bin_wait:
        grid = np.cumsum(rng.random((n_rates, n_bins, 200)), axis=2)
        grid = grid / grid[:, :, -1:] * rng.uniform(0.999, 1.0, (n_rates, n_bins, 1))
        wait = PerBinWait(rng.uniform(1e-3, 1e-2, n_rates), grid, rng.random((n_rates, n_bins)), rng.random(n_rates))
    link_bins = 1 if rng.random() < 0.3 else n_bins  # a bin axis of length 1 applies to every bin
    weights = rng.random((n_rates, link_bins, n_points))
    link = BinDelay(rng.uniform(0.0, 0.1, (n_rates, link_bins, n_points)), weights / weights.sum(2, keepdims=True))
    prob = rng.random(n_bins)
    offsets = rng.uniform(0.01, 0.5, (n_rates, n_bins, n_lengths))
    return TtftMixture(wait, link, offsets, prob / prob.sum())


@pytest.mark.parametrize("per_bin_wait", [False, True])
def test_ttft_quantiles_are_the_scalar_loops(per_bin_wait: bool) -> None:
    for seed in range(12):
        mix = _ttft_mixture(seed, per_bin_wait)
        for q in LEVELS:
            assert mix.quantile(q).tolist() == _ttft_scalar(mix, q)  # bit for bit


@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 2**31), per_bin_wait=st.booleans(), q=st.floats(0.01, 0.99))
def test_ttft_quantiles_any_level(seed: int, per_bin_wait: bool, q: float) -> None:
    mix = _ttft_mixture(seed, per_bin_wait)
    assert mix.quantile(q).tolist() == _ttft_scalar(mix, q)


@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 2**31), per_bin_wait=st.booleans(), data=st.data())
def test_ttft_cdf_of_some_rates_is_each_rates_own(seed: int, per_bin_wait: bool, data: st.DataObject) -> None:
    """The batched cdf reads the wait of the rates asked alone (any increasing subset, as Brent's running rows are):
    rate r's value is its one-rate mixture's ``first_cdf``, bit for bit."""
    mix = _ttft_mixture(seed, per_bin_wait)
    n_rates = mix.offsets_s.shape[0]
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, n_rates - 1), min_size=1))), dtype=np.intp)
    a_s = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=rows.size, max_size=rows.size)))
    got = mix._rows_cdf(a_s, rows)
    assert got.tolist() == [mix.row(int(r)).first_cdf(float(a)) for r, a in zip(rows, a_s, strict=True)]


def _cdf_rowwise_before(wait: WaitDistribution, t_s: np.ndarray) -> np.ndarray:
    """WaitDistribution.cdf_rowwise as it was (clipped cell and fraction, 2-D fancy indexing)."""
    extra = t_s.ndim - 1
    n_cells = wait.cdf_grid.shape[1]
    x = t_s / wait.h_s.reshape((-1,) + (1,) * extra)
    k = np.clip(np.floor(x), 0, n_cells - 1).astype(np.intp)
    k1 = np.minimum(k + 1, n_cells - 1)
    frac = np.clip(x - k, 0.0, 1.0)
    rows = np.arange(wait.cdf_grid.shape[0]).reshape((-1,) + (1,) * extra)
    lo = wait.cdf_grid[rows, k]
    out = lo + frac * (wait.cdf_grid[rows, k1] - lo)
    return np.asarray(np.where(x < 0, 0.0, out), dtype=np.float64)


def test_wait_cdf_rowwise_is_the_former_formula() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        n_rates, n_cells = int(rng.integers(1, 6)), int(rng.integers(2, 60))
        grid = np.cumsum(rng.random((n_rates, n_cells)), axis=1)
        wait = WaitDistribution(
            rng.uniform(1e-3, 1.0, n_rates), grid / grid[:, -1:], grid[:, 0] / grid[:, -1], np.zeros(n_rates)
        )
        span = wait.h_s[:, None, None] * n_cells
        t = rng.uniform(-0.2, 1.3, (n_rates, 7, 5)) * span  # below 0, inside and beyond the grid
        t[:, 0, :2] = np.array([0.0, -0.0])  # both zeros
        t[:, 1, :] = wait.h_s[:, None] * rng.integers(0, n_cells + 2, (n_rates, 5))  # on grid points
        new, old = wait.cdf_rowwise(t), _cdf_rowwise_before(wait, t)
        assert np.array_equal(new, old)
        assert np.array_equal(np.signbit(new), np.signbit(old))


def test_a_quantile_beyond_the_range_names_the_first_such_rate() -> None:
    def cdf(t: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.minimum(t, np.where(rows == 0, 1.0, 0.8))  # rates 1 and 2 top out at 0.8

    with pytest.raises(ValueError, match=r"TTFT: quantile 0.9 lies beyond the modelled range \(2 s\)"):
        mixture_quantile_rows(cdf, 0.9, np.zeros(3), np.array([1.0, 2.0, 3.0]), "TTFT")
    assert mixture_quantile_rows(cdf, 0.5, np.array([0.0, 0.6]), np.array([1.0, 1.0]), "TTFT")[1] == 0.6  # F(lo) ≥ q


def test_snapshot_percentile_reads_are_the_summaries() -> None:
    ttft = _ttft_mixture(5, per_bin_wait=False)
    n_rates, n_bins = ttft.offsets_s.shape[:2]
    tpot = _gamma_mixture(1, "none", uniform=False)
    tpot = GammaMixture(
        *(np.resize(a, (n_rates, a.shape[1])) for a in (tpot.offset_s, tpot.load_mean_s, tpot.load_var_s2)), tpot.prob
    )
    n_cells = tpot.prob.size
    snap = Snapshot(
        np.arange(1.0, n_rates + 1.0), tpot.prob, np.full(n_cells, 50.0), ttft, np.arange(n_cells) % n_bins, tpot, {}
    )
    for percentile in (90.0, 95.0):
        summaries = snap.ttft_summary(percentile), snap.tpot_summary(percentile)
        assert snap.ttft_at_percentile_s(percentile).tolist() == [s.at_percentile for s in summaries[0]]
        assert snap.tpot_at_percentile_s(percentile).tolist() == [s.at_percentile for s in summaries[1]]


def test_riding_capacity_memo_gives_the_unmemoised_rates() -> None:
    wl: DecodeWorkload = decode_workload([200.0, 900.0, 3000.0], [40.0, 150.0, 600.0], [0.5, 0.3, 0.2])
    step = LinearStepTime(8e-3, 2e-5, 4e-8)
    held = kv_held(wl, 0.0, reserve=False)
    per_request = 1.5e-4
    calls: list[float] = []

    def fresh(lam: float) -> float:  # F solved at every trial rate, as before the memo
        calls.append(lam)
        return riding_feedback(lam, lam * per_request, wl, step)

    for kv_cap, seats in ((2.0e5, 256.0), (6.0e4, 64.0), (1.0e6, 24.0)):
        per = step.t1_s_per_seq * wl.mean_steps + step.t2_s_per_token * wl.mean_work
        rate_max = 0.85 / (per + per_request)
        memo = riding_capacity(
            wl,
            step,
            prefill_s_per_request=per_request,
            rate_max=rate_max,
            kv_capacity_tokens=kv_cap,
            max_num_seqs=seats,
            held=(held.work, held.square_sum),
        )
        calls.clear()
        plain = _bound_rates(wl, step, rate_max, kv_cap, seats, fresh, (held.work, held.square_sum), per_request)
        assert memo == plain  # bit for bit
        assert any(math.isfinite(x) for x in memo)
        assert len(set(calls)) < len(calls)  # the searches did cross a rate twice: the memo has work to do
