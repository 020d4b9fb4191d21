"""Faster paths of the tandem link chain that must give the numbers of the paths they replace, bit for bit: the
empty link's first carry summed by segments (pdplan.queueing.tandem_chain._carried_flat) and every bin's delay
quantiles read in one pass (pdplan.queueing.link_delay.discretise_rows)."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing import tandem_chain
from pdplan.queueing.link_delay import discretise, discretise_rows
from pdplan.queueing.tandem_chain import ChainInputs


def _inputs(rng: np.random.Generator, bins: int) -> ChainInputs:
    prob = rng.dirichlet(np.ones(bins))
    prob[rng.integers(bins)] = 0.0  # a bin no request falls in: not iterated
    service = rng.uniform(0.01, 0.2, bins)
    carry = np.repeat(rng.uniform(0.001, 0.3, (bins + 1) // 2), 2)[:bins]  # pairs share a carry, as cache classes do
    return ChainInputs(prob / prob.sum(), service, carry, service * rng.uniform(0.5, 1.5, bins))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_empty_links_flat_carry_is_the_loops(seed: int) -> None:
    """The empty link's split cdfs are flat along the cells (no far side): summed by segments they give the
    bin-by-bin loop's Y to the last bit, for several rates at once."""
    rng = np.random.default_rng(seed)
    inputs, cells = _inputs(rng, 9), 64
    theta, h = rng.uniform(1.0, 5.0, 3), rng.uniform(0.002, 0.01, 3)
    head = tandem_chain.embedded_head(theta, inputs.prob, inputs.service_s, tandem_chain.LUMP_LEVEL)
    lat = tandem_chain._lattice(inputs, theta, h, cells, tandem_chain.LUMP_LEVEL)
    flat = tandem_chain._empty(head, inputs.prob[lat.live], lat, cells, None)
    assert flat.strides[3] == 0
    looped = tandem_chain._carried(np.ascontiguousarray(flat), lat)
    assert np.array_equal(tandem_chain._carried(flat, lat), looped)
    assert float(np.abs(looped).sum()) > 0.0
    with_far = tandem_chain._empty(head, inputs.prob[lat.live], lat, cells, np.ones((3, cells)))
    assert with_far.strides[3] != 0
    assert np.array_equal(tandem_chain._carried(with_far, lat), looped)


def _rows(rng: np.random.Generator, cells: int) -> np.ndarray:
    """cdf rows as the tandem chain's per-bin laws give them: waits with an atom at 0 and a tail, a bin with no
    mass (all 0), a link that never waits (all 1), a row that reaches its top early and one whose values repeat."""
    pmf = rng.exponential(1.0, (6, cells)) * np.exp(-np.arange(cells) / rng.uniform(2.0, 40.0, (6, 1)))
    pmf[:, 0] += rng.uniform(0.0, 50.0, 6)
    cdf = np.cumsum(pmf / pmf.sum(axis=1, keepdims=True), axis=1)
    early = np.minimum(np.cumsum(np.full(cells, 0.2)), 1.0)
    steps = np.repeat(np.linspace(0.3, 1.0, cells // 4), 4)[:cells]
    return np.vstack([cdf, np.zeros(cells), np.ones(cells), early, steps])


def test_every_rows_quantiles_are_discretises() -> None:
    """Atom and band quantiles of every row in one pass: those of one call of :func:`discretise` per row, bit for
    bit, on rows with atoms, flat tops, repeated values and no mass; a row falling by a round-off is read by
    ``numpy.interp`` itself."""
    rng, cells, points = np.random.default_rng(7), 96, 16
    cdf = _rows(rng, cells)
    cdf[0, 40] -= 1e-17  # falls by a round-off: not a cdf the one-pass search may read
    values = np.arange(cells) * 0.0037
    pts, wts = discretise_rows(cdf, values, points)
    for k, row in enumerate(cdf):
        ref_pts, ref_wts = discretise(float(row[0]), row, values, points)
        assert np.array_equal(pts[k], ref_pts), k
        assert np.array_equal(wts[k], ref_wts), k
    assert np.all(np.diff(pts[:6], axis=1) >= 0.0)
