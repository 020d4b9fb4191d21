"""pdplan/serving/session_spread.py: a session hit's mean tokens per prompt bin and the spread of the tokens it leaves
to compute, with hand-worked laws (issue #24 item 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.sessions_1p2d import sessions_1p2d

from pdplan.io.catalog import open_catalog
from pdplan.serving import session_spread
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.resolve import resolve
from pdplan.serving.session_spread import (
    CHAINED_COLUMNS,
    FFT_ROWS,
    SLICES,
    _cumulated,
    _x_cumulated,
    bin_factors,
    computed_slices,
    history_grid,
    laws_in_bins,
    point_spread,
    slice_means,
    turn_hit_laws,
)
from pdplan.specs.token_pmf import TokenPmf, length_pmf


def test_slice_means_split_an_atom() -> None:
    """0 with mass 3/4 and 10 with 1/4: the lower half is all zeros, the upper half a quarter of zeros and a quarter
    of tens (mean 5); four slices: 0, 0, 0, 10."""
    values, weights = np.array([10.0, 0.0]), np.array([0.25, 0.75])
    np.testing.assert_allclose(slice_means(values, weights, 2), [0.0, 5.0], atol=1e-12)
    np.testing.assert_allclose(slice_means(values, weights, 4), [0.0, 0.0, 0.0, 10.0], atol=1e-12)


def _two_turn_laws() -> tuple[np.ndarray, np.ndarray, TokenPmf, TokenPmf]:
    """Appends of 1 or 3 tokens (each 1/2), outputs of 2, no system prompt, on a grid of one token."""
    new, out = TokenPmf(np.array([1, 3]), np.array([0.5, 0.5])), TokenPmf(np.array([2]), np.array([1.0]))
    size = 16
    tokens = np.arange(size, dtype=np.float64)
    laws = np.zeros((2, size))
    laws[0, [1, 3]] = 0.5  # P_1 = new_1
    laws[1, [4, 6, 8]] = [0.25, 0.5, 0.25]  # P_2 = new_1 + 2 + new_2
    return tokens, laws, new, out


def test_turn_hit_laws_by_hand() -> None:
    """xPyD (outputs not held): turn 2's hit is P_1 ∈ {1, 3}, what it computes D = new_2 + 2 ∈ {3, 5}. Bins [0, 5),
    [5, 7), [7, ∞): P_2 = 4 only from (1, 3), 8 only from (3, 5), 6 from (1, 5) or (3, 3), so E[X | bin] = 1, 2, 3
    and D | bin = 3, {3, 5}, 5; E[X_2] = 2, the factors 0.5, 1, 1.5 (mean 1 over the bins' 1/4, 1/2, 1/4). Turn 1:
    X = 0 (no system prompt), D = P_1."""
    tokens, laws, new, out = _two_turn_laws()
    edges = np.array([-math.inf, 5.0, 7.0, math.inf])
    got = turn_hit_laws(tokens, laws, new, out, edges, holds_outputs=False)
    np.testing.assert_allclose(got.history_mean[1], [1.0, 2.0, 3.0], atol=1e-9)
    assert got.history_overall[1] == pytest.approx(2.0)
    np.testing.assert_allclose(got.missed[1, 0], np.full(SLICES, 3.0), atol=1e-9)
    np.testing.assert_allclose(got.missed[1, 1], [3.0] * (SLICES // 2) + [5.0] * (SLICES // 2), atol=1e-9)
    np.testing.assert_allclose(got.missed[1, 2], np.full(SLICES, 5.0), atol=1e-9)
    np.testing.assert_allclose(got.history_mean[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(got.missed[0, 0], [1.0] * (SLICES // 2) + [3.0] * (SLICES // 2), atol=1e-9)
    bins = np.array([[1.0, 0.0, 0.0], [0.25, 0.5, 0.25]])
    np.testing.assert_allclose(bin_factors(got, bins), [[1.0, 1.0, 1.0], [0.5, 1.0, 1.5]], atol=1e-9)


def test_turn_hit_laws_colocated_holds_the_outputs() -> None:
    """Colocated (outputs held): turn 2's hit is P_1 + 2 ∈ {3, 5}, it computes new_2 ∈ {1, 3}: the same bins give
    E[X | bin] = 3, 4, 5."""
    tokens, laws, new, out = _two_turn_laws()
    edges = np.array([-math.inf, 5.0, 7.0, math.inf])
    got = turn_hit_laws(tokens, laws, new, out, edges, holds_outputs=True)
    np.testing.assert_allclose(got.history_mean[1], [3.0, 4.0, 5.0], atol=1e-9)
    np.testing.assert_allclose(got.missed[1, 1], [1.0] * (SLICES // 2) + [3.0] * (SLICES // 2), atol=1e-9)


def test_one_grid_rebinned_is_each_binning_from_scratch() -> None:
    """The sensitivity rows scale the bin edges: one :func:`history_grid` binned at each set of edges gives what
    :func:`turn_hit_laws` computes from scratch, bit for bit (the grid does not depend on the edges), both with and
    without the outputs held; the by-hand bins still give E[X_2 | bin] = 1, 2, 3 from the shared grid."""
    tokens, laws, new, out = _two_turn_laws()
    base = np.array([-math.inf, 5.0, 7.0, math.inf])
    for holds in (False, True):
        grid = history_grid(tokens, laws, new, out, holds_outputs=holds)
        assert not grid.x_laws.flags.writeable  # the cache's arrays frozen
        assert laws.flags.writeable  # the caller's not
        for edges in (base, base * 0.8, base * 1.2):
            shared = laws_in_bins(grid, edges)
            fresh = turn_hit_laws(tokens, laws, new, out, edges, holds_outputs=holds)
            for name in ("history_mean", "history_overall", "missed"):
                assert np.array_equal(getattr(shared, name), getattr(fresh, name), equal_nan=True), (holds, name)
    xpyd = laws_in_bins(history_grid(tokens, laws, new, out, holds_outputs=False), base)
    np.testing.assert_allclose(xpyd.history_mean[1], [1.0, 2.0, 3.0], atol=1e-9)


def test_chained_cumulation_is_the_full_cumsum_bit_for_bit() -> None:
    """:func:`_cumulated` chains running sums between the columns read: each column the very double of the whole
    grid's cumsum (and of Σ i·x), column 0 a 0, whatever columns (few: chained; many: the whole grid)."""
    rng = np.random.default_rng(7)
    x = rng.random((5, 3000)) * (rng.random((5, 3000)) < 0.3)
    cdf = np.concatenate((np.zeros((5, 1)), np.cumsum(x, axis=1)), axis=1)
    first = np.concatenate((np.zeros((5, 1)), np.cumsum(x * np.arange(3000), axis=1)), axis=1)
    for cols in (np.array([0, 1, 2, 3000]), np.unique(rng.integers(0, 3001, 40)), np.arange(0, 3001, 3)):
        got_cdf, got_first = _cumulated(x, cols)
        assert np.array_equal(got_cdf, cdf[:, cols])
        assert np.array_equal(got_first, first[:, cols])
    assert _cumulated(x, np.array([0, 3000]))[0][0, 0] == 0.0


@pytest.mark.parametrize("block", [1, 7, 64, 5000])
def test_blocked_cumulation_is_the_full_cumsum_bit_for_bit(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chained sums advance :data:`CUMULATED_BLOCK` cells at a time: whatever the block (one cell, one that
    splits the gaps unevenly, one wider than the grid), every column read is the very double of the whole grid's
    cumsum and of Σ i·x, gaps wider than the block included (0 to 1, 1 to 1500, 1500 to 3000)."""
    monkeypatch.setattr(session_spread, "CUMULATED_BLOCK", block)
    rng = np.random.default_rng(8)
    x = rng.random((4, 3000)) * (rng.random((4, 3000)) < 0.5)
    cdf = np.concatenate((np.zeros((4, 1)), np.cumsum(x, axis=1)), axis=1)
    first = np.concatenate((np.zeros((4, 1)), np.cumsum(x * np.arange(3000), axis=1)), axis=1)
    for cols in (np.array([0, 1, 1500, 3000]), np.array([2999]), np.unique(rng.integers(1, 3001, 30))):
        got_cdf, got_first = _cumulated(x, cols)
        assert np.array_equal(got_cdf, cdf[:, cols])
        assert np.array_equal(got_first, first[:, cols])


@pytest.mark.parametrize("many", [False, True])
def test_held_laws_cumulated_by_row_blocks_are_the_whole_array_bit_for_bit(many: bool) -> None:
    """With the outputs held, X's laws are convolved and cumulated :data:`FFT_ROWS` rows at a time
    (:func:`_x_cumulated`): each row the very doubles of one rfft / product / irfft / clip over the whole array, then
    cumulated (a row count that is not a multiple of the block, laws of many cells; few columns read: chained, many:
    the whole grid)."""
    rng = np.random.default_rng(11)
    size = 4096
    laws = rng.random((2 * FFT_ROWS + 4, size)) ** 6
    laws /= laws.sum(axis=1, keepdims=True)
    tokens = np.arange(size, dtype=np.float64)
    new, out = TokenPmf(np.array([1, 3]), np.array([0.5, 0.5])), TokenPmf(np.arange(3, 60), np.full(57, 1.0 / 57))
    grid = history_grid(tokens, laws, new, out, holds_outputs=True)
    assert grid.out_hat is not None
    spectrum = np.fft.rfft(laws[:-1], axis=1)
    spectrum *= grid.out_hat
    whole = np.clip(np.fft.irfft(spectrum, size, axis=1), 0.0, None)
    cols = np.arange(0, size + 1, 3) if many else np.array([0, 5, 700, 2048, size])
    assert (cols.size > CHAINED_COLUMNS) == many
    for got, want in zip(_x_cumulated(grid, cols), _cumulated(whole, cols), strict=True):
        assert np.array_equal(got, want)


def test_prefix_cache_computes_one_grid_per_spec_and_holding() -> None:
    """prefix_cache keeps the last grid: the three binnings of one spec with the outputs held compute it once, and a
    binning already seen is not recomputed; a change of holding computes the other grid."""
    from pdplan.serving import prefix_cache
    from pdplan.specs.reuse import SessionsSpec

    spec = SessionsSpec.model_validate(
        {
            "system_prompt_tokens": 20,
            "new_tokens": {"dist": "histogram", "bins": [99.5, 100.5, 399.5, 400.5], "weights": [1, 0, 1]},
            "output_tokens": {"dist": "fixed", "value": 50},
            "turns": {"dist": "fixed", "value": 3},
            "think_time": {"dist": "fixed", "value": 1},
        }
    )
    js = spec.model_dump_json()
    edges = np.array([-math.inf, 150.0, 300.0, 450.0, math.inf])
    prefix_cache._hit_laws_cached.cache_clear()
    prefix_cache._GRID.clear()
    computed: list[bool] = []
    real = prefix_cache.history_grid

    def counted(*args: object, **kwargs: bool) -> object:
        computed.append(kwargs["holds_outputs"])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    prefix_cache.history_grid = counted  # type: ignore[assignment]
    try:
        for scale in (1.0, 0.8, 1.2):
            prefix_cache._hit_laws_cached(js, 3, tuple(float(e) for e in edges * scale), True)
        prefix_cache._hit_laws_cached(js, 3, tuple(float(e) for e in edges), False)
    finally:
        prefix_cache.history_grid = real  # type: ignore[assignment]
        prefix_cache._hit_laws_cached.cache_clear()
        prefix_cache._GRID.clear()
    assert computed == [True, False]


def test_a_grid_binned_again_keeps_its_held_laws_whole_with_the_same_doubles() -> None:
    """prefix_cache's first binning of a held-output grid convolves X's laws block by block (the grid keeps only the
    output law's spectrum); the second keeps them whole (:func:`held_laws`), which the third reads: every binning the
    very doubles of :func:`turn_hit_laws` from scratch."""
    from pdplan.serving import prefix_cache
    from pdplan.specs.reuse import SessionsSpec

    spec = SessionsSpec.model_validate(
        {
            "new_tokens": {"dist": "lognormal", "mean": 60, "sigma": 0.8, "max": 400},
            "output_tokens": {"dist": "lognormal", "mean": 40, "sigma": 0.6, "max": 200},
            "turns": {"dist": "fixed", "value": 12},
            "think_time": {"dist": "fixed", "value": 1},
        }
    )
    js = spec.model_dump_json()
    tokens, laws = prefix_cache._turn_laws(js, 12)
    new, out = length_pmf(spec.new_tokens), length_pmf(spec.output_tokens)
    edges = np.array([-math.inf, 150.0, 300.0, 450.0, 900.0, math.inf])
    prefix_cache._hit_laws_cached.cache_clear()
    prefix_cache._GRID.clear()
    kept: list[bool] = []
    try:
        for scale in (1.0, 0.8, 1.2):
            cut = tuple(float(e) for e in edges * scale)
            got = prefix_cache._hit_laws_cached(js, 12, cut, True)
            kept.append(next(iter(prefix_cache._GRID.values())).out_hat is None)
            fresh = turn_hit_laws(tokens, laws, new, out, np.array(cut), holds_outputs=True)
            for name in ("history_mean", "history_overall", "missed"):
                assert np.array_equal(getattr(got, name), getattr(fresh, name), equal_nan=True), (scale, name)
    finally:
        prefix_cache._hit_laws_cached.cache_clear()
        prefix_cache._GRID.clear()
    assert kept == [False, True, True]


def test_computed_slices_mix_turns_and_pair_with_the_points() -> None:
    """The middle bin of the two-turn law with its turn-2 hits at E[X | bin] = 2: it computes 3 or 5 (deviations ∓1);
    two points 10 and 20 (mean 15) then hold hit + (−5 + 1) and hit + (5 − 1), in the points' own order; the misses
    keep one count (offset 0)."""
    tokens, laws, new, out = _two_turn_laws()
    edges = np.array([-math.inf, 5.0, 7.0, math.inf])
    got = turn_hit_laws(tokens, laws, new, out, edges, holds_outputs=False)
    weights = np.zeros((2, 3, 2))
    weights[1, :, 1] = [0.25, 0.5, 0.25]
    hits = np.zeros((2, 3, 2))
    hits[1, :, 1] = got.history_mean[1]
    spread = computed_slices(got, weights, hits)
    np.testing.assert_allclose(spread[1, 1], [-1.0] * (SLICES // 2) + [1.0] * (SLICES // 2), atol=1e-9)
    assert np.all(np.isnan(spread[:, 0]))
    points = np.broadcast_to(np.array([10.0, 20.0]), (3, 2, 2)).copy()
    np.testing.assert_allclose(point_spread(spread, points)[1, 1], [-4.0, 4.0], atol=1e-9)
    np.testing.assert_allclose(point_spread(spread, points[:, :, ::-1].copy())[1, 1], [4.0, -4.0], atol=1e-9)
    np.testing.assert_allclose(point_spread(spread, points)[:, 0], 0.0)


def test_pool_points_compute_the_appends_law() -> None:
    """Three turns of lognormal appends (mean 400, σ = 1, at most 8,192) and 250-token outputs on a 1P2D prefill pool,
    zero think time, ample cache: every Turn 2+ hits its previous prompt and computes D = new + 250 (E[D] = 650,
    E[D²] = 0.674·10⁶ on the law). The hit rows' computed tokens at the pool's quadrature points follow it: the mean
    within 1.5 % (the resolved prompt bins'), the second moment within 5 % (the slices' means lose the spread inside
    each slice: 0.649·10⁶); pricing each bin's points at one hit count gave 0.98·10⁶ (docs/prefix_cache.md §11)."""
    sessions = {
        "turns": {"dist": "fixed", "value": 3},
        "new_tokens": {"dist": "lognormal", "mean": 400, "sigma": 1.0, "max": 8192},
        "output_tokens": {"dist": "fixed", "value": 250},
        "think_time": {"dist": "fixed", "value": 0},
    }
    sc = sessions_1p2d("three turns", sessions, {"routing": "affinity"})
    res = with_cache_rate(resolve(sc, open_catalog()), 5.0)
    classes = build_model(res).cache
    assert classes is not None
    assert classes.spread is not None
    h = classes.weights.shape[1]
    points = np.repeat(res.input_points[:, None, :], h, axis=1)
    hits = classes.hit_tokens[:, :, None] + point_spread(classes.spread, points)
    computed = (points - np.clip(np.minimum(hits, points - 1.0), 0.0, None))[:, 1, :]
    w = res.lengths.input_marginal() * classes.weights[:, 1]
    assert res.cache is not None
    assert res.cache.reuse.sessions is not None
    law = length_pmf(res.cache.reuse.sessions.new_tokens)
    d, p = law.values.astype(np.float64) + 250.0, np.asarray(law.prob, dtype=np.float64)
    assert float(w @ computed.mean(axis=1)) / float(w.sum()) == pytest.approx(float(p @ d), rel=1.5e-2)
    assert float(w @ (computed**2).mean(axis=1)) / float(w.sum()) == pytest.approx(float(p @ d**2), rel=5e-2)
