"""pdplan.report.mapping: generic Markdown of free-form dicts (inputs, assumptions)."""

from __future__ import annotations

import pytest

from pdplan.report.mapping import bullets, flatten, scalar, sections, table, title


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "none"),
        (True, "yes"),
        (0.1 + 0.2, "0.3"),
        (5e10, "5e+10"),
        ([1, "a"], "1, a"),
        ([], "none"),
        ({"b": 1, "a": 2}, "a: 2; b: 1"),
        (float("nan"), "nan"),
        (3, "3"),
    ],
)
def test_scalar(value: object, text: str) -> None:
    assert scalar(value) == text


def test_title() -> None:
    assert title("search_space") == "Search space"
    assert title("gpus") == "GPUs"
    assert title("slo") == "SLO"
    assert title("kernel_tables") == "Kernel tables"


def test_flatten_sorts_and_dots() -> None:
    assert flatten({"b": {"y": 1, "x": {"z": 2}}, "a": {}}) == {"a": {}, "b.x.z": 2, "b.y": 1}
    assert list(flatten({"b": 1, "a": 2})) == ["a", "b"]


def test_bullets_escape_pipes() -> None:
    assert bullets({"k": "a|b"}) == ["- k: a\\|b"]


def test_table_rows_and_transpose() -> None:
    value = {"h20": {"x": 1}, "a100": {"x": 2, "y": {"z": 3}}}
    assert table(value) == ["| name | x | y.z |", "|---|---|---|", "| a100 | 2 | 3 |", "| h20 | 1 | none |"]
    assert table(value, transpose=True) == [
        "| parameter | a100 | h20 |",
        "|---|---|---|",
        "| x | 2 | 1 |",
        "| y.z | 3 | none |",
    ]


def test_sections_order_and_layout() -> None:
    value = {"z": 1, "model": "m", "nested": {"k": 2}, "gpus": {"g": {"p": 3}}, "empty": {}}
    lines = sections(value, first_keys=("model", "gpus"))
    assert lines[:3] == ["- model: m", "- empty: none", "- z: 1"]
    assert lines[lines.index("### GPUs") + 2] == "| name | p |"
    assert lines.index("### GPUs") < lines.index("### Nested")
    assert lines[-1] == "- k: 2"
