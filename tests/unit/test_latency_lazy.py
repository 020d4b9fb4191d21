"""A latency's percentiles solved on first read (pdplan.serving.snapshot.Latency, issue #27): each quantile solved
once, only when read, to the same double an eager solve gives; pickles, equality and the report read what they need.

Hand-worked law: an exponential latency of mean 2 s has quantile q at -2 ln(1 - q): P50 = 2 ln 2 = 1.386294 s,
P90 = 2 ln 10 = 4.605170 s, P99 = 2 ln 100 = 9.210340 s.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from support.plan_fixture import pick

from pdplan.report.common import at_percentile
from pdplan.serving.snapshot import Latency, LatencySummary, _summaries
from pdplan.types import FloatArray

MEAN_S = 2.0


def _exponential(calls: Counter[float]) -> Callable[[float], float]:
    def solve(q: float) -> float:
        calls[q] += 1
        return -MEAN_S * math.log1p(-q)

    return solve


def test_each_percentile_is_solved_once_when_first_read() -> None:
    calls: Counter[float] = Counter()
    lat = Latency.solved(MEAN_S, _exponential(calls))
    assert not calls
    assert lat.p90 == pytest.approx(2.0 * math.log(10.0), rel=1e-12)  # 4.605170 s
    assert lat.p90 == lat.p90
    assert calls == Counter({0.9: 1})
    assert lat.p50 == pytest.approx(2.0 * math.log(2.0), rel=1e-12)  # 1.386294 s
    assert lat.p99 == pytest.approx(2.0 * math.log(100.0), rel=1e-12)  # 9.210340 s
    assert calls == Counter({0.9: 1, 0.5: 1, 0.99: 1})
    assert lat._solve is None  # all three read: the law is let go


def test_summary_solves_the_slo_percentile_at_once_and_reuses_it() -> None:
    calls: Counter[float] = Counter()
    summ = LatencySummary.solved_at(MEAN_S, _exponential(calls), 90)
    assert calls == Counter({0.9: 1})
    assert summ.at_percentile == summ.p90 == pytest.approx(4.605170186, rel=1e-9)
    plain = summ.plain()
    assert type(plain) is Latency
    assert plain.p90 == summ.p90
    assert calls == Counter({0.9: 1})
    assert plain.p99 == pytest.approx(9.210340372, rel=1e-9)
    assert summ.p99 == plain.p99
    assert calls[0.99] == 1


def test_p95_slo_is_solved_besides_the_three_recorded() -> None:
    calls: Counter[float] = Counter()
    summ = LatencySummary.solved_at(MEAN_S, _exponential(calls), 95)
    assert summ.at_percentile == pytest.approx(2.0 * math.log(20.0), rel=1e-12)  # 5.991465 s
    assert calls == Counter({0.95: 1})
    assert summ.as_dict() == pytest.approx(
        {"mean": 2.0, "p50": 2.0 * math.log(2.0), "p90": 2.0 * math.log(10.0), "p99": 2.0 * math.log(100.0)}
    )
    assert summ._solve is None


def test_solved_values_equal_the_eager_ones_bit_for_bit() -> None:
    lazy = Latency.solved(MEAN_S, _exponential(Counter()))
    eager = Latency(MEAN_S, -MEAN_S * math.log1p(-0.5), -MEAN_S * math.log1p(-0.9), -MEAN_S * math.log1p(-0.99))
    assert lazy == eager
    assert hash(lazy) == hash(eager)
    assert repr(lazy) == repr(eager)
    assert lazy != LatencySummary(eager.mean, eager.p50, eager.p90, eager.p99, eager.p90)  # another type, as before


def test_pickle_carries_numbers_not_the_law() -> None:
    calls: Counter[float] = Counter()
    lat = Latency.solved(MEAN_S, lambda q: _exponential(calls)(q))  # a lambda: the law itself cannot be pickled
    back = pickle.loads(pickle.dumps(lat))
    assert calls == Counter({0.5: 1, 0.9: 1, 0.99: 1})
    assert back == lat
    assert back._solve is None
    summ = pickle.loads(pickle.dumps(LatencySummary.solved_at(MEAN_S, lambda q: -MEAN_S * math.log1p(-q), 99)))
    assert type(summ) is LatencySummary
    assert summ.at_percentile == summ.p99 == pytest.approx(9.210340372, rel=1e-9)


def test_a_plain_latency_reads_only_what_it_records() -> None:
    lat = Latency(0.4125, 0.3310, 0.8742, 1.6120)
    assert (lat.mean, lat.p50, lat.p90, lat.p99) == (0.4125, 0.3310, 0.8742, 1.6120)
    with pytest.raises(ValueError, match=r"quantile 0\.95 is not recorded"):
        lat.quantile(0.95)


def test_a_batch_solves_each_quantile_once_for_every_rate() -> None:
    calls: Counter[float] = Counter()
    scale = np.array([1.0, 3.0])  # two rates: exponential laws of mean 1 and 3 s

    def quantile(q: float) -> FloatArray:
        calls[q] += 1
        return np.asarray(-scale * math.log1p(-q), dtype=np.float64)

    first, second = _summaries(scale, quantile, 90)
    assert calls == Counter({0.9: 1})
    assert second.p99 == pytest.approx(3.0 * math.log(100.0), rel=1e-12)  # 13.815511 s
    assert first.p99 == pytest.approx(math.log(100.0), rel=1e-12)  # 4.605170 s, from the same solve
    assert calls == Counter({0.9: 1, 0.99: 1})
    assert first.at_percentile == float(quantile(0.9)[0])


def test_the_table_reads_only_its_percentile() -> None:
    calls: Counter[float] = Counter()
    lazy = dataclasses.replace(pick(), tpot_s=Latency.solved(MEAN_S, _exponential(calls)))
    assert at_percentile(lazy, "tpot", 99) == pytest.approx(9.210340372, rel=1e-9)
    assert calls == Counter({0.99: 1})
    with pytest.raises(KeyError):
        at_percentile(lazy, "tpot", 95)
