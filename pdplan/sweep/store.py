"""A sweep's files (docs/sweep.md §3, §4): ``PREFIX.jsonl``, append-only, one JSON row per line, fsynced after each
point, the record a rerun resumes from; ``PREFIX.csv`` and ``PREFIX.md``, written whole at the end.

A point counts as done when all of its rows are in the JSONL (each row carries ``rows_in_point``): an interrupt
leaves whole points or, at worst, a last write cut short, whose partial line :func:`open_log` cuts off before
appending and whose whole lines a rerun of the point supersedes. Rows written under another ``sweep_id`` (another
base scenario, command, objective, ``top`` or SLO tiers) are refused rather than mixed in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pdplan.errors import SpecError
from pdplan.report.render import records_to_csv, write_atomic
from pdplan.sweep.point import COLUMNS, Row


@dataclass(frozen=True, slots=True)
class SweepFiles:
    """The three files of a sweep written under ``prefix``."""

    prefix: Path

    def _with(self, suffix: str) -> Path:
        return self.prefix.with_name(self.prefix.name + suffix)

    @property
    def jsonl(self) -> Path:
        return self._with(".jsonl")

    @property
    def csv(self) -> Path:
        return self._with(".csv")

    @property
    def markdown(self) -> Path:
        return self._with(".md")


def read_done(path: Path, sweep_id: str) -> dict[str, list[Row]]:
    """Point id → its rows, for every point whose rows are all in the JSONL at ``path`` (none if it is absent)."""
    if not path.exists():
        return {}
    rows: dict[str, list[Row]] = {}
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                break  # a last line cut short by an interrupt: its point is run again
            row = _parse(line, path, number)
            if row.get("sweep_id") != sweep_id:
                raise SpecError(
                    f"line {number}: a row of another sweep (sweep_id {row.get('sweep_id')!r}, this one {sweep_id!r}: "
                    "the base scenario, command, objective, top or SLO tiers differ); write to another --output "
                    "or remove the file",
                    source=str(path),
                )
            rows.setdefault(str(row["point_id"]), []).append(row)
    return {pid: _last_write(r) for pid, r in rows.items() if len(r) >= _expected(r[-1])}


def _expected(row: Row) -> int:
    count = row.get("rows_in_point")
    return count if isinstance(count, int) and count >= 1 else 1


def _last_write(rows: list[Row]) -> list[Row]:
    """A point's rows from its last complete write, by rank (an earlier write cut short may have left some whole
    lines of the same point before it)."""
    return sorted(rows[-_expected(rows[-1]) :], key=_rank)


def _parse(line: bytes, path: Path, number: int) -> Row:
    try:
        row = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SpecError(f"line {number}: not a JSON row of pdplan sweep", source=str(path)) from None
    if not isinstance(row, dict) or "point_id" not in row or "rows_in_point" not in row:
        raise SpecError(f"line {number}: not a row of pdplan sweep (no point_id)", source=str(path))
    return row


def _rank(row: Row) -> int:
    rank = row.get("rank")
    return rank if isinstance(rank, int) else 0


def open_log(path: Path) -> IO[bytes]:
    """The JSONL opened for appending, a last line cut short by an earlier interrupt removed first."""
    try:
        handle = path.open("a+b")
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        if size:
            handle.seek(max(0, size - 1))
            if handle.read(1) != b"\n":
                handle.seek(0)
                whole = handle.read().rfind(b"\n") + 1
                handle.truncate(whole)
    except OSError as err:
        raise SpecError(f"cannot write: {err.strerror or err}", source=str(path)) from None
    return handle


def append_rows(handle: IO[bytes], rows: Iterable[Row]) -> None:
    """One point's rows in one write, flushed and fsynced (an interrupt leaves whole rows)."""
    data = b"".join(json.dumps(row, separators=(",", ":")).encode("utf-8") + b"\n" for row in rows)
    handle.write(data)
    handle.flush()
    os.fsync(handle.fileno())


def write_csv(path: Path, rows: list[Row]) -> None:
    """The tidy table, whole or not at all (floats at full precision, :func:`pdplan.report.render.records_to_csv`)."""
    write_atomic(path, records_to_csv(rows, COLUMNS))


def json_ready(value: Any) -> Any:
    """``value`` as :func:`json.dumps` writes it (rows read back from the JSONL compare equal to rows run now)."""
    return json.loads(json.dumps(value))
