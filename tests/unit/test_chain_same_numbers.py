"""Faster paths of the tandem link chain that must give the numbers of the paths they replace, bit for bit: the
empty link's first carry summed by segments (pdplan.queueing.tandem_chain._carried_flat)."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.queueing import tandem_chain
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
