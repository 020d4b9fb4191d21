"""Checks on the arguments of the library's public functions (``evaluate``, ``optimize``, ``simulate``,
``open_catalog``): a notebook user who passes ``rate=nan``, ``None`` for a scenario or a string for a list of folders
gets the same one-line :class:`~pdplan.errors.SpecError` as the command line, never a ``ValueError``,
``AttributeError`` or ``MemoryError`` from deep inside (issue #26)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError


def check_scenario(scenario: Any) -> None:
    """``scenario`` is a :class:`~pdplan.specs.scenario.Scenario` (``load_scenario`` returns one)."""
    from pdplan.specs.scenario import Scenario

    if not isinstance(scenario, Scenario):
        raise SpecError(f"expected a Scenario (pdplan.load_scenario), got {type(scenario).__name__}", field="scenario")


def check_positive(value: Any, field: str, *, allow_none: bool = True) -> None:
    """``value`` is a finite real number > 0 (or None where ``allow_none``)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value > 0):
        raise SpecError(f"must be a finite number > 0, got {value!r}", field=field)


def check_count(value: Any, field: str, *, ceiling: int, floor: int = 1) -> None:
    """``value`` is None or an integer in [floor, ceiling] (:mod:`pdplan.specs.ceilings`)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not floor <= value <= ceiling:
        raise SpecError(f"must be an integer from {floor} to {ceiling}, got {value!r}", field=field)


def check_paths(value: Any, field: str) -> None:
    """``value`` is a list or tuple of paths (a single string is refused: it would be read letter by letter)."""
    if isinstance(value, str | Path) or not isinstance(value, Sequence):
        raise SpecError(f"expected a list of paths, got {type(value).__name__}", field=field)
    for item in value:
        if not isinstance(item, str | Path):
            raise SpecError(f"expected a list of paths, got an item of type {type(item).__name__}", field=field)
