"""ComponentMixture's cdf skips ``gammainc`` where its value does not count: the same doubles as the full formula."""

from __future__ import annotations

import numpy as np

from pdplan.numerics.special import gammainc
from pdplan.queueing import components
from pdplan.queueing.components import ComponentMixture
from pdplan.types import FloatArray


def _full_formula(mix: ComponentMixture, b_s: float) -> FloatArray:
    """The module docstring's cdf with ``gammainc`` evaluated on every component (the code before the skip)."""
    x = b_s - mix.offset_s[None] - mix.comp_lo_s
    random = np.isfinite(mix.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(random, np.clip(x, 0.0, None) / np.where(random, mix.scale, 1.0), 0.0)
    gam = gammainc(np.where(random, mix.shape, 1.0), z) / mix.norm
    below = b_s - mix.offset_s[None] < mix.comp_hi_s
    per = np.where(
        random,
        np.where(below, np.minimum(gam, 1.0), 1.0),
        (b_s - mix.offset_s[None] >= mix.comp_mean_s).astype(np.float64),
    )
    return np.asarray(np.sum(per * mix.weights, axis=0), dtype=np.float64)


def _mixture() -> ComponentMixture:
    """Two rates, five bins, three components: zero weights, a capped component, a point mass (sd 0)."""
    rng = np.random.default_rng(7)
    k, r, m = 3, 2, 5
    weights = rng.uniform(0.0, 1.0, (k, r, m))
    weights[0, 0, :2] = 0.0  # components of zero weight
    weights /= weights.sum(axis=0)
    mean = rng.uniform(0.01, 0.03, (k, r, m))
    var = (0.3 * mean) ** 2
    var[2, 1, 3] = 0.0  # a point mass
    lo = np.zeros((k, r, m))
    lo[1] = 0.005
    hi = np.full((k, r, m), np.inf)
    hi[1] = mean[1] + 0.01  # a truncated component
    offset = rng.uniform(0.005, 0.01, (r, m))
    return ComponentMixture.of(offset, weights, mean, var, np.full(m, 1.0 / m), lo, hi)


def test_cdf_per_bin_matches_the_full_formula_to_the_bit() -> None:
    mix = _mixture()
    for b in np.linspace(0.0, 0.08, 161):
        assert np.array_equal(mix.cdf_per_bin(float(b)), _full_formula(mix, float(b)))


def test_quantile_is_the_root_of_the_first_rows_cdf() -> None:
    """The cdf crosses q within 1 µs of each rate's quantile (the mixture has jumps: a point mass, a cap)."""
    mix = _mixture()
    for q in (0.5, 0.9, 0.99):
        got = mix.quantile(q)
        for r in range(2):
            one = mix.row(r)
            assert float(one.cdf_per_bin(float(got[r]) + 1e-6)[0] @ one.prob) >= q
            assert float(one.cdf_per_bin(float(got[r]) - 1e-6)[0] @ one.prob) < q


def test_quantile_memo_gives_fresh_doubles_in_a_fresh_copy() -> None:
    mix = _mixture()
    components.clear_memo()
    first = mix.quantile(0.9)
    first[0] = -1.0  # the caller's copy
    again = mix.quantile(0.9)
    assert again.tobytes() == mix._quantile(0.9).tobytes()
    moved = ComponentMixture.of(
        mix.offset_s + 1e-3, mix.weights, mix.comp_mean_s, mix.comp_var_s2, mix.prob, mix.comp_lo_s, mix.comp_hi_s
    )
    assert moved.quantile(0.9).tobytes() == moved._quantile(0.9).tobytes() != again.tobytes()
