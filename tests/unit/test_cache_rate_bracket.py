"""The self-consistent cache rate's bracket (pdplan/serving/build.py ``_between``, ``_Kept``): false position with
the Illinois weights, worked by hand on examples/chat-ppd.yaml's colocated pick, whose g(r) collapses past 14 req/s."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pdplan.serving.build import _between, _Kept


def _at(rate_rps: float, good_rps: float) -> Any:
    return SimpleNamespace(rate_rps=rate_rps, good=SimpleNamespace(rate_rps=good_rps), holds=good_rps >= rate_rps)


def test_chord_with_unit_weights_is_false_position() -> None:
    # h(lo) = 15.9926 − 13.3071 = 2.6855, h(hi) = 7.9955 − 14.0769 = −6.0814: 13.3071 + 0.7698·2.6855/8.7669
    lo, hi = _at(13.3071, 15.9926), _at(14.0769, 7.9955)
    assert _between(lo, hi, _Kept()) == pytest.approx(13.5429, abs=1e-4)


def test_the_kept_end_is_halved_when_the_other_moves_twice() -> None:
    kept = _Kept()
    hi = _at(14.0769, 7.9955)
    lo, hi = kept.narrow(_at(13.3071, 15.9926), hi, _at(13.5429, 15.707))  # low end moves once: weights 1, 1
    assert (kept.lo, kept.hi) == (1.0, 1.0)
    assert lo is not None
    assert hi is not None
    # 13.5429 + 0.534·2.1641/(2.1641 + 6.0814) = 13.6831: plain false position's next probe
    assert _between(lo, hi, kept) == pytest.approx(13.6831, abs=1e-4)
    lo, hi = kept.narrow(lo, hi, _at(13.6831, 15.5012))  # twice: the high end's h counts half
    assert (kept.lo, kept.hi) == (1.0, 0.5)
    assert lo is not None
    assert hi is not None
    # 13.6831 + 0.3938·1.8181/(1.8181 + 3.0407) = 13.8305, where plain false position creeps to 13.7737
    assert _between(lo, hi, kept) == pytest.approx(13.8305, abs=1e-4)
    lo, hi = kept.narrow(lo, hi, _at(14.0, 7.9955))  # the high end moves: its weight is 1 again
    assert (kept.lo, kept.hi) == (1.0, 1.0)
    lo, hi = kept.narrow(lo, hi, _at(13.99, 7.9955))  # and again: the low end's h counts half
    assert (kept.lo, kept.hi) == (0.5, 1.0)
    assert hi is not None
    assert hi.rate_rps == 13.99


def test_a_chord_at_an_end_falls_back_to_the_midpoint() -> None:
    # h(lo) tiny against h(hi): the chord lies within a tenth of the width of lo, so the midpoint
    lo, hi = _at(10.0, 10.01), _at(12.0, 2.0)
    assert _between(lo, hi, _Kept()) == pytest.approx(11.0)
