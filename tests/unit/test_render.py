"""pdplan.report.render: CSV, Markdown, table and JSON rendering, and whole-or-nothing file output."""

from __future__ import annotations

import csv
import errno
import io
import json
import math
from enum import Enum
from pathlib import Path

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.report.render import (
    Format,
    format_cell,
    records_to_csv,
    records_to_markdown,
    records_to_table,
    table_to_text,
    to_json,
    write_atomic,
)

RECORDS = [
    {"name": "h100-sxm", "tflops": 989.4, "ok": True, "note": None},
    {"name": "l4", "tflops": 0.1 + 0.2, "ok": False, "extra": "a|b"},
]


def test_format_values() -> None:
    assert [f.value for f in Format] == ["table", "csv", "markdown", "json"]
    assert Format("json") is Format.json


def test_csv_header_and_rows() -> None:
    text = records_to_csv(RECORDS)
    lines = text.splitlines()
    assert lines[0] == "name,tflops,ok,note,extra"  # union of keys, first-seen order
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 2
    assert rows[0]["name"] == "h100-sxm"
    assert rows[0]["note"] == ""  # None -> empty cell
    assert rows[0]["extra"] == ""  # missing key -> empty cell
    assert float(rows[1]["tflops"]) == 0.1 + 0.2  # full precision (repr), not rounded
    assert rows[1]["extra"] == "a|b"
    assert text.endswith("\n")
    assert "\r" not in text


def test_csv_explicit_columns_and_quoting() -> None:
    text = records_to_csv([{"a": "x,y", "b": [1, 2], "c": 3}], columns=["c", "a", "b"])
    assert text.splitlines() == ["c,a,b", '3,"x,y",1;2']


def test_csv_of_no_records_is_header_only() -> None:
    assert records_to_csv([], columns=["name", "value"]) == "name,value\n"


def test_markdown_table_shape() -> None:
    text = records_to_markdown(RECORDS)
    lines = text.splitlines()
    assert lines[0] == "| name | tflops | ok | note | extra |"
    assert lines[1] == "|---|---|---|---|---|"
    assert len(lines) == 2 + len(RECORDS)
    assert lines[2] == "| h100-sxm | 989.4 | yes |  |  |"
    assert "a\\|b" in lines[3]  # pipes inside cells are escaped
    for line in lines:
        assert line.startswith("|")
        assert line.endswith("|")
        assert line.replace("\\|", "").count("|") == 6
    assert text.endswith("\n")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        (True, "yes"),
        (False, "no"),
        (989.4, "989.4"),
        (0.30000000000000004, "0.3"),
        (12345.6, "12,346"),
        (2.5e9, "2.5e+09"),
        (1e-6, "1e-06"),
        (0.0, "0"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        (7, "7"),
        ("x", "x"),
        ([1.5, None, "a"], "1.5, , a"),
    ],
)
def test_format_cell(value: object, text: str) -> None:
    assert format_cell(value) == text


def test_table_renders_every_row_and_title() -> None:
    table = records_to_table(RECORDS, title="gpus")
    assert table.row_count == 2
    assert [c.header for c in table.columns] == ["name", "tflops", "ok", "note", "extra"]
    text = table_to_text(table)
    assert "gpus" in text
    assert "h100-sxm" in text
    assert "\x1b[" not in text  # no colour codes in files


def test_json_nan_and_inf_become_null() -> None:
    text = to_json({"a": float("nan"), "b": [1.0, float("inf"), -math.inf], "c": {"d": math.nan}})
    assert "NaN" not in text
    assert "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [1.0, None, None], "c": {"d": None}}


def test_json_is_strict_json_and_keeps_key_order() -> None:
    class Colour(Enum):
        red = "red"

    doc = {
        "z": 1,
        "a": (1, 2),
        "path": Path("x/y"),
        "enum": Colour.red,
        "np": np.float64(2.5),
        "npi": np.int64(3),
        "npnan": np.float64("nan"),
        3: "int key",
    }
    text = to_json(doc)
    parsed = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert list(parsed) == ["z", "a", "path", "enum", "np", "npi", "npnan", "3"]
    assert parsed["a"] == [1, 2]
    assert parsed["path"] == "x/y"
    assert parsed["enum"] == "red"
    assert parsed["np"] == 2.5
    assert parsed["npi"] == 3
    assert parsed["npnan"] is None
    assert text.endswith("\n")


def test_write_atomic_writes_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    write_atomic(target, "new ünïcode text\n")
    assert target.read_text(encoding="utf-8") == "new ünïcode text\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_write_atomic_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_atomic(Path("plain.txt"), "x")
    assert (tmp_path / "plain.txt").read_text() == "x"


def test_write_atomic_leaves_no_temp_file_on_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.txt"
    target.write_text("previous")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("pdplan.report.render.os.replace", broken_replace)
    with pytest.raises(SpecError, match=r"out\.txt: cannot write: No space left on device"):
        write_atomic(target, "new")
    assert target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_write_atomic_leaves_no_temp_file_when_text_cannot_be_encoded(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with pytest.raises(UnicodeEncodeError):
        write_atomic(target, "lone surrogate \ud800")
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_missing_folder_is_spec_error(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "out.txt"
    with pytest.raises(SpecError, match="output folder does not exist") as info:
        write_atomic(target, "x")
    assert str(target) in str(info.value)
    assert "\n" not in str(info.value)
