"""pdplan.start_up: begin raises the gen-0 threshold and remembers the thresholds it found; end freezes what is
alive and restores them; both are idempotent, and end without begin changes nothing."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pdplan import start_up


@pytest.fixture
def clean_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    start_up._saved.clear()
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("clean_gc")
def test_begin_then_end() -> None:
    gc.set_threshold(700, 10, 10)
    start_up.begin()
    start_up.begin()  # idempotent: the thresholds found first are the ones restored
    assert gc.get_threshold() == (start_up.START_UP_THRESHOLD_0, 10, 10)
    assert gc.get_freeze_count() == 0
    start_up.end()
    assert gc.get_threshold() == (700, 10, 10)
    frozen = gc.get_freeze_count()
    assert frozen > 0
    start_up.end()  # a second end does nothing: no second freeze (frozen objects freed meanwhile lower the count)
    assert gc.get_freeze_count() <= frozen


@pytest.mark.usefixtures("clean_gc")
def test_end_without_begin_changes_nothing() -> None:
    gc.set_threshold(500, 7, 3)
    start_up.end()
    assert gc.get_threshold() == (500, 7, 3)
    assert gc.get_freeze_count() == 0
