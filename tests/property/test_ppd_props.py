"""PPD placement properties (pdplan/serving/ppd_model.py) on examples/chat-ppd.yaml's deployment: policy ``pd``
(whatever its other fields) builds the very model of a scenario without ``turn_placement``; any other policy keeps
its shares in [0, 1], sends no Turn 1 to decode, and never gives a turn on decode a first token before its
append's own work in the step."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.ppd_model import place_turns
from pdplan.serving.ppd_report import placement_of
from pdplan.serving.resolve import resolve
from pdplan.specs.cache import TurnPlacementSpec

EXAMPLE = Path(__file__).parents[2] / "examples" / "chat-ppd.yaml"


@cache
def _resolved(spec: TurnPlacementSpec, think_s: float) -> Any:
    sc = load_scenario(EXAMPLE)
    assert sc.cache is not None
    sessions = sc.workload.sessions
    assert sessions is not None
    think = sessions.think_time.model_copy(update={"mean": think_s})
    workload = sc.workload.model_copy(update={"sessions": sessions.model_copy(update={"think_time": think})})
    return resolve(
        sc.model_copy(update={"cache": sc.cache.model_copy(update={"turn_placement": spec}), "workload": workload}),
        open_catalog(),
    )


placements = st.builds(
    TurnPlacementSpec,
    append_threshold_tokens=st.integers(0, 4096),
    ttft_weight=st.sampled_from([0.5, 1.0, 2.0]),
    tpot_weight=st.sampled_from([0.5, 1.0, 2.0, 6.0]),
)


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(spec=placements, rate=st.floats(2.0, 14.0))
def test_pd_is_the_plain_model(spec: TurnPlacementSpec, rate: float) -> None:
    plain = build_model(with_cache_rate(_resolved(TurnPlacementSpec(), 10.0), rate))
    model = build_model(with_cache_rate(_resolved(spec.model_copy(update={"policy": "pd"}), 10.0), rate))
    assert placement_of(model) is None
    assert place_turns(model) is model
    at = np.array([0.5 * min(rate, plain.limit().rate_rps)])  # below the stable range (the pd link binds ~5 req/s)
    assert np.array_equal(model.snapshot(at).ttft.mean_s, plain.snapshot(at).ttft.mean_s)
    assert model.limit() == plain.limit()


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    spec=placements,
    policy=st.sampled_from(["ppd", "threshold", "score"]),
    think_s=st.sampled_from([1.0, 10.0, 60.0]),
    rate=st.floats(2.0, 14.0),
)
def test_shares_and_decode_ttft(spec: TurnPlacementSpec, policy: str, think_s: float, rate: float) -> None:
    res = with_cache_rate(_resolved(spec.model_copy(update={"policy": policy}), think_s), rate)
    model = build_model(res)
    p = placement_of(model)
    assert p is not None
    assert 0.0 <= p.share_on_decode <= 1.0
    assert np.all((p.held >= 0.0) & (p.held <= 1.0 + 1e-12))
    assert np.all((p.placed >= 0.0) & (p.placed <= p.held + 1e-12))
    assert p.placed[0] == 0.0  # Turn 1 always on the prefill pool
    assert np.all((p.decode_by_bin >= 0.0) & (p.decode_by_bin <= 1.0 + 1e-9))
    rows = p.decode_rows.astype(bool)
    own = model.pool.point_latency_s[rows].min()  # the append's work (and its extra steps): its own prefill
    at = np.array([0.5 * min(rate, model.limit().rate_rps)])
    below = model.snapshot(at).ttft.inner.cdf_per_bin(float(own) * (1.0 - 1e-9))[0]
    assert np.all(below[rows] == 0.0)
