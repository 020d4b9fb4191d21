"""Options and output plumbing shared by every command: ``--format``, ``-o``, ``--hardware-db``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from pdplan.io.catalog import Catalog, open_catalog
from pdplan.report.render import (
    Format,
    Record,
    records_to_csv,
    records_to_markdown,
    records_to_table,
    table_to_text,
    to_json,
    write_atomic,
)


def _stdout_console() -> Console:
    """Rich console for results: the terminal's width, or a wide page when piped (no folding in files)."""
    probe = Console()
    return Console(soft_wrap=False, width=None if probe.is_terminal else 200)


stdout_console = _stdout_console()
stderr_console = Console(stderr=True)

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.", case_sensitive=False)]
OutputOpt = Annotated[
    Path | None,
    typer.Option("--output", "-o", help="Write the result to FILE (whole or not at all).", dir_okay=False),
]
HardwareDbOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--hardware-db",
        help="Extra catalogue folder (gpus/, links/, models/ YAML) overriding built-in entries. Repeatable.",
        envvar=None,
    ),
]


KernelTablesOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--kernel-table",
        help="Kernel table YAML (e.g. from `pdplan calibrate`) replacing the packaged "
        "table of the GPU it names. Repeatable.",
        dir_okay=False,
    ),
]


def catalog_from(hardware_db: list[Path] | None, kernel_tables: list[Path] | None = None) -> Catalog:
    """The catalogue with the user's folders (``--hardware-db``, ``PDPLAN_HARDWARE_DB``) and kernel tables."""
    return open_catalog(hardware_db or [], kernel_tables or [])


def emit(
    fmt: Format,
    output: Path | None,
    *,
    records: Sequence[Record],
    document: Any,
    columns: Sequence[str] | None = None,
    title: str | None = None,
    markdown: Callable[[], str] | None = None,
    table: Callable[[], Any] | None = None,
) -> None:
    """Render one result in the chosen format to stdout or, atomically, to ``output``.

    ``records`` feed table/CSV/Markdown; ``document`` feeds JSON. ``markdown``/``table`` override the default
    rendering for commands with richer reports.
    """
    if fmt is Format.json:
        text = to_json(document)
    elif fmt is Format.csv:
        text = records_to_csv(records, columns)
    elif fmt is Format.markdown:
        text = markdown() if markdown is not None else records_to_markdown(records, columns)
    else:
        write_renderable(table() if table is not None else records_to_table(records, columns, title), output)
        return
    write_text(text, output)


def write_renderable(renderable: Any, output: Path | None) -> None:
    """A rich renderable to stdout, or as plain text to ``output`` (atomically)."""
    if output is None:
        stdout_console.print(renderable)
    else:
        write_text(table_to_text(renderable), output)


def write_text(text: str, output: Path | None) -> None:
    """Text to stdout, or to ``output`` whole or not at all."""
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_atomic(output, text)
        stderr_console.print(f"wrote {output}", highlight=False, markup=False, soft_wrap=True)


def warn(message: str) -> None:
    """A warning line on stderr (never on stdout, so ``--format json | jq`` keeps working)."""
    stderr_console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)
