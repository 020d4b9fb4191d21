"""Rendering of results as rich tables, CSV, Markdown or JSON, and whole-or-nothing file output.

The numeric core returns typed results; the report builders (:mod:`pdplan.report.catalog`, :mod:`pdplan.report.perf`,
:mod:`pdplan.report.serving`) turn them into a :class:`View`: *records* (flat dicts of SI values with the unit in the
key) for the table, CSV and Markdown views and a *document* (nested dicts) for JSON. This module only formats: it never
computes. ``optimize`` has its own richer reports (:func:`pdplan.report.render_optimize`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table

from pdplan.errors import SpecError


class Format(StrEnum):
    """Output formats shared by every command (``--format``)."""

    table = "table"
    csv = "csv"
    markdown = "markdown"
    json = "json"


Record = Mapping[str, Any]


@dataclass(frozen=True)
class View:
    """One command's result, ready to render in any :class:`Format` (:func:`render_view`).

    ``records`` feed the CSV and Markdown views (and the table, unless ``table_records`` gives it rows of its own);
    ``document`` is the JSON document; ``columns`` fixes the column order (default: first appearance); ``title``
    heads the terminal table.
    """

    records: Sequence[Record]
    document: Any
    columns: Sequence[str] | None = None
    title: str | None = None
    table_records: Sequence[Record] | None = None


def render_view(view: View, fmt: Format | str) -> str | RenderableType:
    """``view`` in ``fmt``: text for csv/markdown/json, a rich Table for table."""
    match Format(fmt):
        case Format.json:
            return to_json(view.document)
        case Format.csv:
            return records_to_csv(view.records, view.columns)
        case Format.markdown:
            return records_to_markdown(view.records, view.columns)
        case Format.table:
            rows = view.records if view.table_records is None else view.table_records
            return records_to_table(rows, view.columns, view.title)


def quantity_records(items: Mapping[str, Any] | Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Two-column ``quantity``/``value`` rows (``evaluate``, ``transfer``)."""
    pairs = items.items() if isinstance(items, Mapping) else items
    return [{"quantity": k, "value": v} for k, v in pairs]


QUANTITY_COLUMNS = ("quantity", "value")


def format_cell(value: Any) -> str:
    """Deterministic text for one cell: 4 significant digits for floats, '' for None."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.4g}"
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, list | tuple):
        return ", ".join(format_cell(v) for v in value)
    return str(value)


def _columns(records: Sequence[Record], columns: Sequence[str] | None) -> list[str]:
    if columns is not None:
        return list(columns)
    seen: dict[str, None] = {}
    for record in records:
        for key in record:
            seen.setdefault(key, None)
    return list(seen)


def records_to_csv(records: Sequence[Record], columns: Sequence[str] | None = None) -> str:
    """CSV with a header row; floats written with full precision (repr) for machine use."""
    cols = _columns(records, columns)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(cols)
    for record in records:
        writer.writerow(_csv_value(record.get(col)) for col in cols)
    return buffer.getvalue()


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple):
        return ";".join(str(v) for v in value)
    return str(value)


def records_to_markdown(records: Sequence[Record], columns: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table."""
    cols = _columns(records, columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for record in records:
        cells = (format_cell(record.get(col)).replace("|", "\\|") for col in cols)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def records_to_table(
    records: Sequence[Record], columns: Sequence[str] | None = None, title: str | None = None
) -> Table:
    """A rich Table of the records."""
    cols = _columns(records, columns)
    table = Table(title=title, show_lines=False)
    for col in cols:
        table.add_column(col, overflow="fold")
    for record in records:
        table.add_row(*(format_cell(record.get(col)) for col in cols))
    return table


def to_json(document: Any) -> str:
    """Stable JSON: sorted keys are NOT used (contract order is kept); NaN/inf become null."""
    return json.dumps(_json_safe(document), indent=2) + "\n"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return _json_safe(value.item())
    return value


def table_to_text(table: RenderableType, width: int = 160) -> str:
    """Plain-text rendering of a rich renderable (no colour), for ``--format table -o FILE``."""
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False)
    console.print(table)
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``text`` (bytes as they are, text as UTF-8) to ``path`` whole or not at all: a temporary file in the
    same folder, fsynced, then renamed over ``path``. A failed or interrupted write leaves any existing file untouched
    and no temporary file. An existing target that is not a regular file (a device node, a FIFO, a socket, a folder)
    is refused, so that ``-o /dev/null`` run as root does not replace the device with a file; any OS failure
    (permission, a full disk, a file too large, a name too long) is one line (SpecError, exit 2)."""
    folder = path.parent if str(path.parent) else Path(".")
    check_output_target(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise SpecError(f"cannot write: {err.strerror or err}", source=str(path)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o666 & ~_umask())  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp_name, path)
    except OSError as err:
        Path(tmp_name).unlink(missing_ok=True)
        raise SpecError(f"cannot write: {err.strerror or err}", source=str(path)) from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def check_output_target(path: Path) -> None:
    """``path`` can become a report: its folder exists and any existing entry at ``path`` is a regular file."""
    import stat as stat_mod

    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise SpecError("output folder does not exist", source=str(path))
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise SpecError(f"cannot write: {err.strerror or err}", source=str(path)) from None
    if stat_mod.S_ISDIR(mode):
        raise SpecError("is a folder, not a file", source=str(path))
    if not stat_mod.S_ISREG(mode):
        raise SpecError(
            "is not a regular file (a device, pipe or socket); reports are written to files", source=str(path)
        )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
