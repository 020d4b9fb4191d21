"""The chunked colocated queue is memoised on the exact doubles of its inputs: a hit is the first call's object with
read-only arrays and the doubles a fresh computation gives; any changed input is computed afresh."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from pdplan.queueing import LinearStepTime, decode_workload
from pdplan.queueing import colocated_queue as cq
from pdplan.queueing.decode import DecodeWorkload
from pdplan.queueing.exact_memo import exact_key

STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)
WL = decode_workload([500.0, 2000.0], [50.0, 200.0], [0.5, 0.5])
KW: dict[str, Any] = {"token_budget": 512.0, "prefill_s_per_token": 6e-5, "attention_s_per_token2": 1e-9}


def _numbers(r: cq.ColocatedResult) -> tuple[bytes, ...]:
    return (
        r.ttft.quantile(0.9).tobytes(),
        r.tpot.quantile(0.9).tobytes(),
        r.tpot_mean_s.tobytes(),
        r.ttft.wait.cdf_grid.tobytes(),
    )


def test_a_hit_is_the_first_result_read_only_and_fresh() -> None:
    cq.colocated_chunked.clear()
    first = cq.colocated_chunked([1.0, 2.0], WL, STEP, **KW)
    again = cq.colocated_chunked(np.array([1.0, 2.0]), WL, STEP, **KW)
    assert again is first
    with pytest.raises(ValueError, match="read-only"):
        first.ttft.wait.cdf_grid[0, 0] = 0.5
    fresh = cq.colocated_chunked.__wrapped__([1.0, 2.0], WL, STEP, **KW)
    assert _numbers(fresh) == _numbers(first)


@pytest.mark.parametrize(
    ("rates", "wl", "step", "kw"),
    [
        ([1.0, 2.5], WL, STEP, KW),  # a rate
        ([1.0, 2.0], replace(WL, prefill_tokens=np.array([250.0, 2000.0])), STEP, KW),  # a prefix cache
        ([1.0, 2.0], WL, LinearStepTime(8e-3, 50e-6, 4e-8), KW),  # the step's t2
        ([1.0, 2.0], WL, STEP, {**KW, "token_budget": 1024.0}),  # the budget
        ([1.0, 2.0], WL, STEP, {**KW, "arrival_ca2": 2.0}),  # bursty arrivals
    ],
)
def test_a_changed_input_is_computed_afresh(
    rates: list[float], wl: DecodeWorkload, step: LinearStepTime, kw: dict[str, Any]
) -> None:
    cq.colocated_chunked.clear()
    base = cq.colocated_chunked([1.0, 2.0], WL, STEP, **KW)
    other = cq.colocated_chunked(rates, wl, step, **kw)
    assert other is not base
    assert _numbers(other) == _numbers(cq.colocated_chunked.__wrapped__(rates, wl, step, **kw))


def test_keys_tell_none_lengths_types_and_values_apart() -> None:
    assert exact_key(None, [1.0]) != exact_key([1.0], None)
    assert exact_key([1.0, 2.0], [3.0]) != exact_key([1.0], [2.0, 3.0])
    assert exact_key((1.0, 2.0), 3.0) != exact_key(1.0, (2.0, 3.0))
    assert exact_key(1.0) != exact_key(np.nextafter(1.0, 2.0))
    assert exact_key(2, 1.5) == exact_key(2.0, np.array([1.5]))
    assert exact_key(("a", 1.0)) != exact_key(("b", 1.0))
    assert exact_key(WL) != exact_key(replace(WL, window_tokens=4096.0))
    assert exact_key(STEP) != exact_key((8e-3, 50e-6, 3.9e-8))  # a dataclass is tagged with its type


def test_the_memo_stays_within_its_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    memo = cq.colocated_chunked
    memo.clear()
    monkeypatch.setattr(memo, "entries", 2)
    for rate in (1.0, 1.5, 2.0):
        memo([rate], WL, STEP, **KW)
    assert len(memo.held) == 1  # emptied when the third came
    monkeypatch.setattr(memo, "max_bytes", 8 * 1000)
    memo.clear()
    memo([1.0], WL, STEP, **KW)  # above an eighth of the bytes: not kept
    assert len(memo.held) == 0
    assert memo.held_bytes == 0
    memo.clear()


def test_clear_all_empties_every_queueing_memo() -> None:
    from pdplan.queueing import components, decode
    from pdplan.queueing.exact_memo import clear_all

    r = cq.colocated_chunked([1.0], WL, STEP, **KW)
    r.tpot.quantile(0.9)
    memos = (cq.colocated_chunked.held, components._QUANTILES, decode._COVARIANCES)
    assert all(len(m) > 0 for m in memos)
    clear_all()
    assert all(len(m) == 0 for m in memos)
