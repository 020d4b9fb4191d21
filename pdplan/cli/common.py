"""Options and output plumbing shared by every command: ``--format``, ``-o``, ``--hardware-db``, ``--kernel-table``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console, RenderableType
from rich.markup import escape

from pdplan import start_up
from pdplan.report.render import Format, View, check_output_target, render_view, table_to_text, write_atomic

if TYPE_CHECKING:
    from rich.progress import Progress

    from pdplan.io.catalog import Catalog
    from pdplan.specs.scenario import Scenario

T = TypeVar("T")


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
KernelTableOpt = Annotated[
    Path | None, typer.Option("--kernel-table", help="Kernel table YAML to use instead of the packaged one.")
]
"""``roofline`` and ``calibrate``: one table, used whichever GPU it names (the commands that predict a deployment take
:data:`KernelTablesOpt`, one table per GPU)."""


def catalog_from(hardware_db: list[Path] | None, kernel_tables: list[Path] | None = None) -> Catalog:
    """The catalogue with the user's folders (``--hardware-db``, ``PDPLAN_HARDWARE_DB``) and kernel tables."""
    from pdplan.io.catalog import open_catalog  # lazy: `pdplan --version` loads no spec

    return open_catalog(hardware_db or [], kernel_tables or [])


def emit(view: View, fmt: Format, output: Path | None) -> None:
    """A command's view rendered in ``fmt`` (or the format ``output``'s suffix names, :func:`output_format`), to
    stdout or (whole or not at all) to ``output``."""
    write_rendered(render_view(view, output_format(fmt, output)), output)


def write_rendered(rendered: str | RenderableType, output: Path | None) -> None:
    """What a renderer produced: text as it is, a rich renderable (the table view) printed or as plain text."""
    if isinstance(rendered, str):
        write_text(rendered, output)
    else:
        write_renderable(rendered, output)


def write_renderable(renderable: RenderableType, output: Path | None) -> None:
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
        check_not_an_input(output)
        write_atomic(output, text)
        stderr_console.print(f"wrote {output}", highlight=False, markup=False, soft_wrap=True)


def warn(message: str) -> None:
    """A warning line on stderr (never on stdout, so ``--format json | jq`` keeps working)."""
    stderr_console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)


# --- output format from the file suffix, early checks, progress --------------------------------------------------

SUFFIX_FORMATS = {".json": Format.json, ".csv": Format.csv, ".md": Format.markdown, ".markdown": Format.markdown}
"""``-o FILE`` without ``--format``: the format its suffix names (docs/architecture.md §4); any other suffix: the
table."""


def warn_host_time_twice(catalog: Catalog, scenario: Scenario) -> None:
    """Warn once when a ``--kernel-table`` with fitted host time runs under an engine profile that adds its own step
    time (:func:`pdplan.serving.engine_bind.host_time_counted_twice`); nothing without ``--kernel-table``."""
    if not catalog.kernel_table_files:
        return
    from pdplan.io.engines import DEFAULT_ENGINE
    from pdplan.io.kernel_tables import load_kernel_table
    from pdplan.serving.engine_bind import host_time_counted_twice, scenario_engine

    tables = ((str(path), load_kernel_table(path)) for path in catalog.kernel_table_files)
    text = host_time_counted_twice(tables, scenario_engine(catalog, scenario), scenario.engine or DEFAULT_ENGINE)
    if text is not None:
        warn(text)


def warn_granularity_not_run(catalog: Catalog, scenario: Scenario, *, search: bool) -> None:
    """Warn once when the scenario's ``granularity`` is one its engine's KV connector does not run (its profile's
    ``kv_connector.granularities``, with the source: vLLM's NixlConnector transfers a request's KV after its prefill):
    the plans are priced as set, which ``pdplan export`` to that engine refuses or warns about (issue #25). For a
    search (``search``) only where ``search.granularities`` / ``--granularity`` is not given (that list is filtered
    with its own note: :func:`pdplan.search.space.engine_granularities`); for ``evaluate`` only for a disaggregated
    deployment. Results do not change."""
    if search and scenario.search is not None and scenario.search.granularities:
        return
    if not search and scenario.mode != "disaggregated":
        return
    from pdplan.serving.engine_bind import scenario_engine

    engine = scenario_engine(catalog, scenario)
    connector = engine.kv_connector
    allowed = None if connector is None else connector.granularities
    if connector is None or allowed is None or scenario.granularity in allowed:
        return
    runs = "/".join(allowed)
    warn(
        f"granularity: {scenario.granularity} is priced as set, but the {engine.name} engine's {connector.name} runs "
        f"{runs}-wise KV transfer only (its profile's kv_connector.granularities), so these numbers are not what "
        f"{engine.name} runs and `pdplan export` to it refuses or warns; set granularity: {allowed[0]} for plans it "
        "runs"
    )


def output_format(fmt: Format, output: Path | None) -> Format:
    """``fmt`` when ``--format`` was given (or no ``-o``), else the format ``output``'s suffix names."""
    if output is None or _format_given():
        return fmt
    return SUFFIX_FORMATS.get(output.suffix.lower(), Format.table)


def _format_given() -> bool:
    """Whether the running command's ``--format`` came from the command line (True outside a command)."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    if ctx is None or "fmt" not in ctx.params:
        return True
    return ctx.get_parameter_source("fmt") is not ParameterSource.DEFAULT


def prepare_output(fmt: Format, output: Path | None) -> Format:
    """The format to write (:func:`output_format`), after checking that ``output``'s folder exists and is writable,
    so that a long search does not end on an unwritable path."""
    if output is not None:
        check_writable_folder(output, field="--output")
    return output_format(fmt, output)


def check_writable_folder(path: Path, *, field: str) -> None:
    """``path``'s folder exists and can be written (bad input, exit 2, otherwise)."""
    from pdplan.errors import SpecError

    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise SpecError(f"output folder {str(folder)!r} does not exist", field=field)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SpecError(f"output folder {str(folder)!r} is not writable", field=field)
    check_output_target(path)
    check_not_an_input(path, field=field)


def check_not_an_input(path: Path, *, field: str = "--output") -> None:
    """``path`` is none of the running command's input files (``optimize sc.yaml -o sc.yaml`` would replace the
    scenario with its report): every path-valued parameter of the command but the output itself is compared."""
    from typer._click.globals import get_current_context

    from pdplan.errors import SpecError

    ctx = get_current_context(silent=True)
    if ctx is None or not path.exists():
        return
    for name, value in ctx.params.items():
        if name == "output":
            continue
        for given in value if isinstance(value, list | tuple) else [value]:
            if isinstance(given, str | Path) and Path(given).is_file() and os.path.samefile(given, path):
                raise SpecError(f"{str(path)!r} is also an input of this command ({name})", field=field)


def progress() -> Progress:
    """A transient spinner with the stage's name and the elapsed time on stderr (off when stderr is not a terminal,
    so pipes, files and CI logs see nothing). rich.progress is imported here: off a terminal no command needs it."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=stderr_console,
        transient=True,
        disable=not stderr_console.is_terminal,
    )


PROGRESS_QUIET_S = 2.0
PROGRESS_EVERY_S = 5.0
"""Off a terminal (a pipe, a file, a CI log), a stage is written as a ``progress:`` line on stderr only once the command
has run :data:`PROGRESS_QUIET_S` (a quick command prints none) and at most every :data:`PROGRESS_EVERY_S`."""


def with_progress(name: str, run: Callable[[Callable[[str], None]], T]) -> T:
    """``run(stage)`` under the :func:`progress` spinner, which starts as ``name``; ``stage(text)`` renames it. Off a
    terminal the stages become throttled ``progress: STAGE (N s)`` lines on stderr instead (docs/errors.md §3). The
    command's work starts here, so its start-up ends here (:func:`pdplan.start_up.end`)."""
    start_up.end()
    if not stderr_console.is_terminal:
        return run(_progress_lines())
    with progress() as shown:
        task = shown.add_task(name, total=None)
        return run(lambda stage: shown.update(task, description=stage))


def _progress_lines() -> Callable[[str], None]:
    import time

    started, last = time.perf_counter(), [float("-inf")]

    def stage(text: str) -> None:
        now = time.perf_counter()
        if now - started >= PROGRESS_QUIET_S and now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            stderr_console.print(
                f"progress: {text} ({now - started:.0f} s)", highlight=False, markup=False, soft_wrap=True
            )

    return stage
