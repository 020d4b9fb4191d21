"""Invariants of the per-bin KV link delay (pdplan.queueing.link_delay) over random prompt bins."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pdplan.queueing import mg1_wait_distribution
from pdplan.queueing.link_delay import TandemLink, slack_delay, tandem_delay

PROPS = settings(deadline=None, max_examples=25)
bins = st.lists(st.tuples(st.floats(0.05, 1.0), st.floats(1e-3, 0.5), st.floats(0.05, 2.0)), min_size=1, max_size=5)
"""(weight, prefill service s, link busy time as a multiple of the service) per prompt bin."""


def _link(spec: list[tuple[float, float, float]], speedup: float) -> TandemLink:
    prob = np.array([w for w, _, _ in spec])
    service = np.array([s for _, s, _ in spec])
    busy = np.array([s * m for _, s, m in spec]) / speedup
    return TandemLink(prob / prob.sum(), service, busy, service, np.zeros(service.size))


@PROPS
@given(spec=bins, load=st.floats(0.1, 0.8), speedup=st.floats(1.0, 4.0))
# Link load 0.84, carries of 0.6 and 13.7 cells: with nearest-cell rounding λ₂ = 0.998 (2,000 plain steps
# did not converge) and 2.2× the simulated mean wait (tandem_chain's module docstring).
@example(spec=[(1.0, 0.0625, 0.5), (0.5, 0.40625, 1.6875)], load=0.59375, speedup=1.0)
def test_a_faster_link_never_delays_more(spec: list[tuple[float, float, float]], load: float, speedup: float) -> None:
    """Request-wise transfers out of one prefill server: dividing every transfer time by
    ``speedup`` never raises the mean delay of a bin (lattice rounding: 1 % of the largest
    transfer time)."""
    slow, fast = _link(spec, 1.0), _link(spec, speedup)
    theta = np.array([load / float(slow.prob @ slow.service_s)])
    if float(slow.prob @ slow.carry_s) * theta[0] >= 0.9:
        return  # the link itself would be near saturation: outside the model's stable range
    d_slow = tandem_delay(slow, theta).bin_mean_s[0]
    d_fast = tandem_delay(fast, theta).bin_mean_s[0]
    assert np.all(d_fast <= d_slow + 0.01 * float(slow.carry_s.max()))


@PROPS
@given(rate=st.floats(0.5, 8.0), slack=st.lists(st.floats(0.0, 0.3), min_size=2, max_size=4))
def test_more_slack_never_delays_more(rate: float, slack: list[float]) -> None:
    wait = mg1_wait_distribution([rate], [0.05, 0.1], [0.5, 0.5])
    order = np.sort(np.array(slack))
    mean = slack_delay(wait, order).bin_mean_s[0]
    assert np.all(np.diff(mean) <= 1e-12)
    assert np.all(mean >= 0.0)
