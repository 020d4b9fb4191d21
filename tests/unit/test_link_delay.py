"""KV link delay per prompt bin (pdplan.queueing.link_delay): hand cases and a direct Lindley run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdplan.errors import UnsettledWaitError, exit_code_for
from pdplan.queueing import mg1_wait_distribution, tandem_chain
from pdplan.queueing.link_delay import TandemLink, slack_delay, tandem_delay
from pdplan.queueing.tandem_chain import ChainInputs, embedded_head, stationary_wait

# Three prompt bins of one prefill server feeding its link, request granularity (lead 0):
# prefill S_k, link busy a_k (a short prompt right behind a long one waits: a_2 > S_0).
PROB = np.array([0.5, 0.35, 0.15])
SERVICE_S = np.array([0.008, 0.04, 0.4])
BUSY_S = np.array([0.003, 0.02, 0.19])


def _lindley(theta: float, link: TandemLink, n: int = 200_000, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Direct simulation: M/G/1 prefill, then W_{k+1} = max(0, W_k + a_k − b_{k+1} − I_{k+1})."""
    rng = np.random.default_rng(seed)
    k = rng.choice(link.prob.size, size=n, p=link.prob)
    arrive = np.cumsum(rng.exponential(1.0 / theta, n))
    s, a, b = link.service_s[k], link.carry_s[k], link.clear_s[k]
    done, w = 0.0, np.zeros(n)
    for i in range(n):
        start = max(arrive[i], done)
        idle = max(0.0, arrive[i] - done) if i else 0.0
        done = start + s[i]
        if i:
            w[i] = max(0.0, w[i - 1] + a[i - 1] - b[i] - idle)
    return k[n // 10 :], w[n // 10 :]


def test_slack_delay_shifts_the_wait_per_bin() -> None:
    wait = mg1_wait_distribution([3.0], [0.1, 0.2], [0.5, 0.5])
    d = slack_delay(wait, np.array([0.0, 0.05, 10.0]))
    mean = d.bin_mean_s[0]
    assert mean[0] == pytest.approx(float(wait.mean_s[0]), rel=0.05)
    assert mean[0] > mean[1] > 0.0
    assert mean[2] == 0.0  # a slack longer than any wait absorbs it


def test_tandem_with_instant_prefill_is_the_mg1_link() -> None:
    """S = 0: every request finds the server idle and the gap is Exp(θ): Lindley's M/G/1."""
    link = TandemLink(PROB, np.zeros(3), BUSY_S, np.zeros(3), np.zeros(3))
    theta = np.array([2.0, 4.0])
    d = tandem_delay(link, theta)
    rho = theta * float(PROB @ BUSY_S)
    pk = theta * float(PROB @ BUSY_S**2) / (2.0 * (1.0 - rho))
    np.testing.assert_allclose(d.bin_mean_s @ PROB, pk, rtol=0.03)
    np.testing.assert_allclose(1.0 - d.weights[:, :, 0] @ PROB, rho, atol=0.01)


def test_stream_that_keeps_up_never_waits() -> None:
    link = TandemLink(PROB, SERVICE_S, np.array([0.002, 0.004, 0.006]), SERVICE_S * 0.9, np.zeros(3))
    d = tandem_delay(link, np.array([5.0]))
    assert float(np.abs(d.points_s).max()) == 0.0


@pytest.mark.parametrize("load", [0.3, 0.7, 0.9])
def test_tandem_matches_direct_lindley(load: float) -> None:
    """Against the recursion simulated on an M/G/1 prefill (200,000 requests): per bin P(W > 0)
    within 0.03, the mean within 6 % and the short bin's P90 within 2 % (measured: P(W > 0)
    within 0.005, means −1.5…−0.6 %, P90 within 1.1 %; approximations: the lumped N ≥ 3 and the
    lattice)."""
    link = TandemLink(PROB, SERVICE_S, BUSY_S, SERVICE_S, np.zeros(3))
    theta = load / float(PROB @ SERVICE_S)
    d = tandem_delay(link, np.array([theta]), points=64)
    k, w = _lindley(theta, link)
    for b in range(3):
        sim = w[k == b]
        assert 1.0 - d.weights[0, b, 0] == pytest.approx(np.mean(sim > 0), abs=0.03)
        assert d.bin_mean_s[0, b] == pytest.approx(sim.mean(), rel=0.06, abs=1e-4)
    pts, wts = d.points_s[0, 0], d.weights[0, 0]
    p90 = pts[np.searchsorted(np.cumsum(wts), 0.9)]
    assert p90 == pytest.approx(np.quantile(w[k == 0], 0.9), rel=0.02)


def test_far_side_wait_only_adds_delay() -> None:
    """A decode NIC busy with other prefill instances' streams (an independent M/G/1 wait V): each
    stream starts after max(W, V), so no bin's delay falls, and a stream that keeps up with its own
    server waits exactly V beyond its slack."""
    link = TandemLink(PROB, SERVICE_S, BUSY_S, SERVICE_S, np.zeros(3))
    theta = np.array([0.5 / float(PROB @ SERVICE_S)])
    far = mg1_wait_distribution(theta / 2.0, BUSY_S, PROB, max_cells=1024)
    alone = tandem_delay(link, theta).bin_mean_s[0]
    shared = tandem_delay(link, theta, other=far).bin_mean_s[0]
    assert np.all(shared >= alone - 1e-12)
    assert shared[2] > 0.0  # the long prompt never waits for its own NIC, only for the far side
    keeps_up = TandemLink(
        PROB, SERVICE_S, np.array([0.002, 0.004, 0.006]), SERVICE_S * 0.9, np.array([0.0, 0.01, 0.02])
    )
    expect = slack_delay(far, keeps_up.slack_s).bin_mean_s
    got = tandem_delay(keeps_up, theta, other=far).bin_mean_s
    np.testing.assert_allclose(got, expect)


def test_embedded_chain_head_by_hand() -> None:
    """Deterministic service S = 1 s at θ = 0.5/s (M/D/1 embedded chain): a_j = e^−½ ½^j/j!,
    π_0 = 1 − ρ = ½, π_1 = π_0 (1 − a_0)/a_0 = ½ (e^½ − 1)."""
    head = embedded_head(np.array([0.5]), np.ones(1), np.ones(1), 3)
    assert head[0, 0] == pytest.approx(0.5)
    assert head[0, 1] == pytest.approx(0.5 * (np.exp(0.5) - 1.0))
    assert head[0, :4].sum() == pytest.approx(1.0)
    assert 0.0 < head[0, 4] <= 1.0


def test_split_matches_direct_lindley_with_carries_of_a_few_cells() -> None:
    """A link at a third of the compute's speed (busy 2.8 S_k, link load 0.84 at prefill load 0.3):
    the lattice spans 30 M/G/1 means, so the carries are 0.3, 1.6 and 15.5 cells. Splitting each
    shift between its two cells keeps every bin's mean carry and clearance, and the per-bin mean
    waits within 10 % of the simulated recursion (measured over four seeds: −0.8…+3.6 %; rounding
    the shifts to the nearest cell put them 33–41 % low)."""
    link = TandemLink(PROB, SERVICE_S, 2.8 * SERVICE_S, SERVICE_S, np.zeros(3))
    theta = 0.3 / float(PROB @ SERVICE_S)
    d = tandem_delay(link, np.array([theta]))
    k, w = _lindley(theta, link, n=300_000)
    np.testing.assert_allclose(d.bin_mean_s[0], [w[k == b].mean() for b in range(3)], rtol=0.1)


def test_split_shift_keeps_the_mean_exactly() -> None:
    """A carry of 2.3 cells moves a point mass 2 cells (weight 0.7) and 3 cells (0.3); a clearance
    of 1.7 cells gives ``max(0, Z − b)`` its exact mean for every Z on the lattice (Z = 0, 1, 2, 5
    cells, one per level: 0, 0, 0.3, 3.3)."""
    inputs = ChainInputs(np.ones(1), np.ones(1), np.array([0.023]), np.array([0.017]))
    cells, levels, z_cells = 16, 4, np.array([0, 1, 2, 5])
    lat = tandem_chain._lattice(inputs, np.array([1.0]), np.array([0.01]), cells, levels - 1)
    at_3 = (np.arange(cells) >= 3).astype(float)  # a point mass on cell 3, as a cdf
    split = np.concatenate([0.7 * np.ones((levels, 1)), 0.3 * np.ones((levels, 1))]) * at_3
    carried = tandem_chain._carried(split[None, None], lat)[0, 0, 0]
    np.testing.assert_allclose(carried[[5, 6]], [0.7, 0.3])
    assert carried @ np.arange(lat.width) == pytest.approx(5.3)
    z = np.zeros((1, levels, 2 * lat.width + cells))
    z[0, np.arange(levels), lat.width + z_cells] = 1.0
    cdf = tandem_chain._clear_cdf(z, np.ones((1, levels)), lat, cells)[0, 0]
    cleared = np.diff(cdf, axis=1, prepend=0.0)
    np.testing.assert_allclose(cleared.sum(axis=1), 1.0)
    np.testing.assert_allclose(cleared @ np.arange(cells), np.maximum(z_cells - 1.7, 0.0), atol=1e-12)


# The hypothesis case of tests/property/test_link_delay_props.py (carries 0.6 and 13.7 cells of
# 0.05 s, link load 0.84): with nearest-cell rounding (link load 0.89) its second eigenvalue was
# 0.998 and 2,000 plain steps did not converge; with split shifts it needs 651 (λ₂ ≈ 0.995).
SLOW = ChainInputs(
    np.array([2.0, 1.0]) / 3.0,
    np.array([0.0625, 0.40625]),
    np.array([0.03125, 0.685546875]),
    np.array([0.0625, 0.40625]),
)
SLOW_THETA = np.array([0.59375 / float(SLOW.prob @ SLOW.service_s)])
SLOW_H = np.array([0.05])


def _steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the chain's steps (each ends in one ``_carried``; the empty start adds one)."""
    calls: list[int] = []
    carried = tandem_chain._carried

    def counted(split: np.ndarray, lat: object) -> np.ndarray:
        calls.append(1)
        return carried(split, lat)  # type: ignore[arg-type]

    monkeypatch.setattr(tandem_chain, "_carried", counted)
    return calls


def test_slowly_mixing_chain_reaches_its_fixed_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 651 plain steps this chain needs to an L1 change of 1e-6 become 10 plain and ~230 Anderson steps to a
    change of 1e-8 (measured 239 in all): within L1 5e-6 of the fixed point that 1,668 plain steps reach (their L1
    change 1e-10: within ~1e-8), 20× closer than the plain stop's ~1e-4 (``tandem_chain.ANDERSON_TOL_SHARE``).
    Measured 8e-7 until 2026-12-07 and 2.0e-6 with numpy 2.4.6 / scipy 1.17.1 (2026-12-08): the Anderson iterate's
    distance moves with the rounding of its least-squares steps, so the bound is a few times the largest seen."""
    steps = _steps(monkeypatch)
    got = stationary_wait(SLOW, SLOW_THETA, SLOW_H, 512, max_iter=500)
    assert len(steps) < 300
    monkeypatch.setattr(tandem_chain, "PLAIN_FIRST", 20_000)
    ref = stationary_wait(SLOW, SLOW_THETA, SLOW_H, 512, tol=1e-10, max_iter=20_000)
    assert float(np.abs(got - ref).sum()) < 5e-6
    assert float(got.sum()) == pytest.approx(1.0, abs=1e-9)


NEAR_THETA = np.array([0.66 / float(SLOW.prob @ SLOW.service_s)])
"""The two-bin chain at prefill load 0.66: link load 0.929, W's drift −0.019 s per request (by hand: E[a] − E[b] −
(1 − ρ)/θ = 0.25013 − 0.17708 − 0.34·0.17708/0.66 = −0.01896 s); the plain iteration takes ~1,000 steps per decade of
its change (decay ratio ≈ 0.9977)."""


def _plain_reference(monkeypatch: pytest.MonkeyPatch, theta: np.ndarray) -> np.ndarray:
    """The plain iteration alone, to an L1 change of 1e-11 (within ~1e-11/(1 − 0.9977) ≈ 4e-9 of the fixed point)."""
    monkeypatch.setattr(tandem_chain, "PLAIN_FIRST", 20_000)
    return stationary_wait(SLOW, theta, SLOW_H, 512, tol=1e-11, max_iter=20_000)


def test_nearly_critical_chain_settles_by_anderson(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anderson mixing needs ~380 steps here, past its former budget of 300, after which this chain took 2,552 steps
    (the plain iteration and its extrapolation); with ANDERSON_STEPS = 1000 it takes < 500. Its stop, an L1 change of
    1e-8, is within 1e-8/(1 − 0.9977) ≈ 4e-6 of the fixed point (measured 5.5e-6 against the plain iteration's 7,808
    steps to an L1 change of 1e-11): the bound is 1e-5."""
    assert float(tandem_chain.drift_s(SLOW, NEAR_THETA)[0]) == pytest.approx(-0.01896, abs=1e-5)
    steps = _steps(monkeypatch)
    got = stationary_wait(SLOW, NEAR_THETA, SLOW_H, 512)
    assert len(steps) < 500
    ref = _plain_reference(monkeypatch, NEAR_THETA)
    assert len(steps) > 7_000  # the reference is the plain iteration's
    assert float(np.abs(got - ref).sum()) < 1e-5
    assert float(got.sum()) == pytest.approx(1.0, abs=1e-9)


def test_gmres_where_anderson_does_not_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Anderson steps: GMRES (:func:`pdplan.queueing.chain_accel.krylov`) from the 10th plain iterate settles the
    nearly critical chain within its budget of 2,000 steps (the plain iteration needs ~4,000 to its own stop, an L1
    change of 1e-6: 7,808 to 1e-11 at ~800 a decade), to the stop and bound of
    :func:`test_nearly_critical_chain_settles_by_anderson` (measured 2.7e-6)."""
    monkeypatch.setattr(tandem_chain, "ANDERSON_STEPS", 0)
    steps = _steps(monkeypatch)
    got = stationary_wait(SLOW, NEAR_THETA, SLOW_H, 512)
    assert len(steps) < 2000
    ref = _plain_reference(monkeypatch, NEAR_THETA)
    assert float(np.abs(got - ref).sum()) < 1e-5
    assert float(got.min()) >= 0.0


def test_chain_that_settles_in_its_first_plain_steps_is_the_plain_iterate(monkeypatch: pytest.MonkeyPatch) -> None:
    """At prefill load 0.1 the three-bin chain settles within PLAIN_FIRST plain steps (9): the law is that of the
    plain iteration alone, byte for byte. At 0.3 it needs 19 and Anderson mixing takes over after PLAIN_FIRST: within
    the tolerance (L1 1e-6) of the plain iteration's law."""
    inputs = ChainInputs(PROB, SERVICE_S, BUSY_S, SERVICE_S)
    h = np.array([1e-3])
    steps = _steps(monkeypatch)
    fast = stationary_wait(inputs, np.array([0.1 / float(PROB @ SERVICE_S)]), h, 512)
    assert len(steps) <= tandem_chain.PLAIN_FIRST + 1
    mixed = stationary_wait(inputs, np.array([0.3 / float(PROB @ SERVICE_S)]), h, 512)
    monkeypatch.setattr(tandem_chain, "ANDERSON_STEPS", 0)
    monkeypatch.setattr(tandem_chain, "PLAIN_FIRST", 2000)
    assert np.array_equal(fast, stationary_wait(inputs, np.array([0.1 / float(PROB @ SERVICE_S)]), h, 512))
    plain = stationary_wait(inputs, np.array([0.3 / float(PROB @ SERVICE_S)]), h, 512)
    assert 0.0 < float(np.abs(mixed - plain).sum()) < 1e-6


def test_chain_short_of_its_budget_raises() -> None:
    """50 steps in all: Anderson mixing's (it needs ~230), which leave GMRES none."""
    with pytest.raises(UnsettledWaitError, match="no convergence") as err:
        stationary_wait(SLOW, SLOW_THETA, SLOW_H, 512, max_iter=50)
    assert exit_code_for(err.value) == 3


def test_poisson_pmf_by_hand() -> None:
    """P(A = k) for A ~ Poisson(m): P(0; 0) = 1, P(3; 0) = 0, P(2; 1.5) = e^-1.5 · 1.5² / 2 = 0.251021."""
    from pdplan.queueing.tandem_chain import poisson_pmf

    got = poisson_pmf(np.array([0.0, 3.0, 2.0]), np.array([0.0, 0.0, 1.5]))
    assert got == pytest.approx([1.0, 0.0, math.exp(-1.5) * 1.5**2 / 2.0], rel=1e-12, abs=1e-300)
    assert got[2] == pytest.approx(0.251021, abs=1e-6)


def test_bins_that_never_occur_change_nothing() -> None:
    """A bin with p = 0 (a cache class no request falls in) is not iterated: its row is zero, and the other bins'
    laws are those of the chain without it, to round-off."""
    theta = np.array([0.6 / float(SLOW.prob @ SLOW.service_s)])
    base = stationary_wait(SLOW, theta, SLOW_H, 512, max_iter=4000)
    padded = ChainInputs(
        np.array([0.0, *SLOW.prob]),
        np.array([0.3, *SLOW.service_s]),
        np.array([2.0, *SLOW.carry_s]),
        np.array([0.3, *SLOW.clear_s]),
    )
    got = stationary_wait(padded, theta, SLOW_H, 512, max_iter=4000)
    assert base is not None
    assert got is not None
    assert not got[0, 0].any()
    np.testing.assert_allclose(got[0, 1:], base[0], rtol=0.0, atol=1e-15)
