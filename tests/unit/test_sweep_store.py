"""The sweep's JSONL record (pdplan.sweep.store): whole points only, a cut write superseded, other sweeps refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdplan.errors import SpecError
from pdplan.sweep.store import append_rows, open_log, read_done


def _rows(point_id: str, n: int, sweep_id: str = "s1") -> list[dict[str, object]]:
    return [
        {"point_id": point_id, "sweep_id": sweep_id, "rows_in_point": n, "rank": r, "goodput_rps": 1.0 / r}
        for r in range(1, n + 1)
    ]


def test_a_write_cut_short_is_removed_and_superseded_by_the_rerun(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    with open_log(log) as handle:
        append_rows(handle, _rows("a", 2))
    whole_then_cut = b"".join(json.dumps(r).encode() + b"\n" for r in _rows("b", 3))
    with log.open("ab") as handle:
        handle.write(whole_then_cut[: whole_then_cut.index(b"\n") + 20])  # one whole line of b, then part of one
    assert set(read_done(log, "s1")) == {"a"}  # b has 1 of its 3 rows: not done
    with open_log(log) as handle:  # the partial line is cut off before appending
        append_rows(handle, _rows("b", 3))
    assert all(json.loads(line) for line in log.read_text().splitlines())
    done = read_done(log, "s1")
    assert [r["rank"] for r in done["b"]] == [1, 2, 3]
    assert done["a"] == _rows("a", 2)


def test_rows_of_another_sweep_or_another_file_are_refused(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    with open_log(log) as handle:
        append_rows(handle, _rows("a", 1, sweep_id="other"))
    with pytest.raises(SpecError, match=r"s\.jsonl: line 1: a row of another sweep"):
        read_done(log, "s1")
    log.write_text('{"not": "a sweep row"}\n')
    with pytest.raises(SpecError, match=r"s\.jsonl: line 1: not a row of pdplan sweep"):
        read_done(log, "s1")
    log.write_text("plain text\n")
    with pytest.raises(SpecError, match=r"s\.jsonl: line 1: not a JSON row"):
        read_done(log, "s1")
    assert read_done(tmp_path / "absent.jsonl", "s1") == {}
