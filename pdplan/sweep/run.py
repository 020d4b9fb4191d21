"""A sweep from start to end (docs/sweep.md §4): skip the points already in ``PREFIX.jsonl``, run the others on the
chosen executor, append each point's rows as it finishes (fsynced), then write ``PREFIX.csv`` and ``PREFIX.md`` whole,
in sweep order whatever order the points finished in. An interrupt keeps the rows appended so far and writes no
CSV or Markdown."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from pdplan.report.render import write_atomic
from pdplan.sweep.executors import Done, Todo, in_process, process_pool, ray_cluster
from pdplan.sweep.job import SweepJob
from pdplan.sweep.point import Row
from pdplan.sweep.store import SweepFiles, append_rows, json_ready, open_log, read_done, write_csv
from pdplan.sweep.summary import render_summary

Progress = Callable[[int, int, int], None]
"""``progress(done, total, skipped)``: points finished (with those skipped), of all points, skipped as done before."""


@dataclass(frozen=True, slots=True)
class Executor:
    """Where the points run: ``local`` (``workers`` processes; 1 runs in this process) or ``ray`` (at ``address``,
    None for a local Ray)."""

    kind: str = "local"
    workers: int = 1
    address: str | None = None

    def run(self, job: SweepJob, todo: Todo) -> Done:
        if self.kind == "ray":
            return ray_cluster(job, todo, self.address)
        return process_pool(job, todo, self.workers) if self.workers > 1 else in_process(job, todo)


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What a finished sweep wrote: its rows in sweep order, how many points ran now and how many were skipped."""

    files: SweepFiles
    rows: tuple[Row, ...]
    ran: int
    skipped: int


def pending_points(job: SweepJob, files: SweepFiles) -> tuple[dict[str, list[Row]], Todo]:
    """The rows of the points already done, and the points still to run (index, point) in sweep order."""
    done = read_done(files.jsonl, job.sweep_id)
    todo = [(i, p) for i, p in enumerate(job.points) if p.point_id() not in done]
    return done, todo


def run_sweep(job: SweepJob, prefix: Path, executor: Executor, progress: Progress | None = None) -> SweepOutcome:
    """Run the points of ``job`` not yet in ``PREFIX.jsonl`` and write the tables (docs/sweep.md §3)."""
    files = SweepFiles(prefix)
    done, todo = pending_points(job, files)
    total, skipped = len(job.points), len(job.points) - len(todo)
    if progress is not None:
        progress(skipped, total, skipped)
    with open_log(files.jsonl) as log, closing(_rows(executor.run(job, todo))) as finished:
        for count, (index, rows) in enumerate(finished, start=1):
            append_rows(log, rows)
            done[job.points[index].point_id()] = rows
            if progress is not None:
                progress(skipped + count, total, skipped)
    ordered = [{**row, "point": i} for i, p in enumerate(job.points) for row in done[p.point_id()]]
    write_csv(files.csv, ordered)
    write_atomic(files.markdown, render_summary(Path(job.source).name, ordered))
    return SweepOutcome(files=files, rows=tuple(ordered), ran=len(todo), skipped=skipped)


def _rows(finished: Done) -> Done:
    """Each point's rows as its JSONL lines will read back (so a resumed table equals an uninterrupted one)."""
    with closing(finished):
        for index, rows in finished:
            yield index, json_ready(rows)
