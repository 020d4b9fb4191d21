"""The optimise reports of the synthetic fixture, byte for byte (Markdown, CSV, JSON)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.plan_fixture import plan_result

from pdplan.report import render_optimize


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("markdown", "optimize_2p1d_h100.md"), ("csv", "optimize_2p1d_h100.csv"), ("json", "optimize_2p1d_h100.json")],
)
def test_report_matches_golden(fmt: str, name: str, golden: Callable[[str, str], None]) -> None:
    text = render_optimize(plan_result(), fmt)
    assert isinstance(text, str)
    golden(name, text)
