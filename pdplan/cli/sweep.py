"""``pdplan sweep GRID.yaml``: ``optimize`` (or ``evaluate``) over a grid of scenario overrides into one tidy table
(docs/sweep.md). Writes ``PREFIX.jsonl`` (append-only, resumable), ``PREFIX.csv`` and ``PREFIX.md``; stdout stays
empty but for ``--dry-run``'s list of points; progress with the time left goes to stderr."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pdplan.cli.common import (
    HardwareDbOpt,
    KernelTablesOpt,
    _progress_lines,
    check_writable_folder,
    stderr_console,
    warn,
)
from pdplan.errors import SpecError

if TYPE_CHECKING:
    from pdplan.sweep.job import SweepJob
    from pdplan.sweep.run import SweepOutcome
    from pdplan.sweep.store import SweepFiles

Opt = typer.Option
EXECUTORS = ("local", "ray")


def sweep_command(
    grid: Annotated[Path, typer.Argument(help="Grid YAML: a base scenario and a grid: or list: of overrides.")],
    command: Annotated[str, Opt("--command", help="What runs per point: optimize | evaluate.")] = "optimize",
    workers: Annotated[
        int | None, Opt("--workers", min=1, max=1024, help="Local worker processes (default: the core count).")
    ] = None,
    executor: Annotated[str, Opt("--executor", help="local | ray (pip install 'pdplan[ray]').")] = "local",
    address: Annotated[
        str | None, Opt("--address", help="Ray cluster address (--executor ray; default local).")
    ] = None,
    output: Annotated[
        Path | None,
        Opt(
            "--output",
            "-o",
            help="PREFIX: writes PREFIX.jsonl, PREFIX.csv and PREFIX.md (default: the grid file's name, here).",
            dir_okay=False,
        ),
    ] = None,
    dry_run: Annotated[bool, Opt("--dry-run", help="List the points (index, point_id, overrides) and stop.")] = False,
    hardware_db: HardwareDbOpt = None,
    kernel_tables: KernelTablesOpt = None,
) -> None:
    """Run optimize (or evaluate) for every point of a grid; one tidy table, resumable.

    Example: pdplan sweep examples/sweeps/fleet.yaml --workers 2 -o fleet
    """
    from pdplan.sweep.executors import import_ray
    from pdplan.sweep.job import load_job
    from pdplan.sweep.run import Executor, run_sweep
    from pdplan.sweep.store import SweepFiles

    kind = executor.lower()
    if kind not in EXECUTORS:
        raise SpecError(f"{executor!r} is not one of {', '.join(EXECUTORS)}", field="--executor")
    if address is not None and kind != "ray":
        raise SpecError("an address is for --executor ray", field="--address")
    prefix = output if output is not None else Path(grid.stem)
    files = SweepFiles(prefix)
    for path in (files.jsonl, files.csv, files.markdown):
        check_writable_folder(path, field="--output")
    job = load_job(
        grid, command.lower(), hardware_db=tuple(hardware_db or ()), kernel_tables=tuple(kernel_tables or ())
    )
    if dry_run:
        _list_points(job, files)
        return
    if kind == "ray":
        import_ray()  # before any work: a clear error naming the extra
    chosen = Executor(kind=kind, workers=workers or os.cpu_count() or 1, address=address)
    with _progress_bar(len(job.points)) as progress:
        outcome = run_sweep(job, prefix, chosen, progress)
    _report(outcome)


def _list_points(job: SweepJob, files: SweepFiles) -> None:
    """``--dry-run``: one line per point on stdout; on stderr how many there are and how many are done."""
    from pdplan.sweep.run import pending_points

    _, todo = pending_points(job, files)
    for index, point in enumerate(job.points):
        values = " ".join(f"{k}={'+'.join(v) if isinstance(v, list) else v}" for k, v in point.overrides().items())
        typer.echo(f"{index} {point.point_id()} {values}")
    stderr_console.print(
        f"{len(job.points)} points, {len(job.points) - len(todo)} already in {files.jsonl}, {len(todo)} to run "
        f"(--command {job.command})",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


OnProgress = Callable[[int, int, int], None]


@contextmanager
def _progress_bar(total: int) -> Iterator[OnProgress]:
    """A bar with points done, elapsed and remaining time on a terminal; off a terminal, throttled ``progress:``
    lines with the rate and the time left (docs/errors.md §3)."""
    if not stderr_console.is_terminal:
        yield _progress_text(_progress_lines())
        return
    from rich.progress import (  # here, not at import: every pdplan command imports this module (issue #27)
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=stderr_console, transient=True) as bar:
        task = bar.add_task("sweep", total=total)
        yield lambda done, _total, _skipped: bar.update(task, completed=done)


def _progress_text(stage: Callable[[str], None]) -> OnProgress:
    started = time.perf_counter()

    def progress(done: int, total: int, skipped: int) -> None:
        ran, elapsed = done - skipped, time.perf_counter() - started
        if ran <= 0 or elapsed <= 0:
            return
        rate = ran / elapsed
        left_s = (total - done) / rate
        stage(f"{done}/{total} points, {rate:.2f}/s, about {left_s:.0f} s left")

    return progress


def _report(outcome: SweepOutcome) -> None:
    """What was written, and a warning naming the points that failed (their rows say why)."""
    errors = [row for row in outcome.rows if row["status"] == "error"]
    if errors:
        warn(f"{len(errors)} point(s) failed, e.g. point {errors[0]['point']}: {errors[0]['error']}")
    files = outcome.files
    stderr_console.print(
        f"wrote {files.csv} ({len(outcome.rows)} rows) and {files.markdown}; {outcome.ran} points run, "
        f"{outcome.skipped} already in {files.jsonl}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
