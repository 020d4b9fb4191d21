"""What runs inside a worker process (a process-pool worker or a Ray worker): the library imported and the catalogue
opened once per process, then one point per call (docs/sweep.md §4)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

from pdplan.specs.sweep import SweepPoint
from pdplan.sweep.job import SweepJob
from pdplan.sweep.point import Row, run_point

if TYPE_CHECKING:
    from pdplan.io.catalog import Catalog

_OPENED: dict[tuple[str, tuple[Path, ...], tuple[Path, ...]], tuple[SweepJob, Catalog]] = {}
"""Per process: (sweep id, catalogue folders, kernel tables) → the job and its catalogue, opened on the first point."""


def open_job(job: SweepJob) -> Catalog:
    """The catalogue of ``job`` (its ``--hardware-db`` folders and kernel tables), opened once per process; the
    optimiser and the serving model are imported here, before the first point is timed."""
    key = (job.sweep_id, job.hardware_db, job.kernel_tables)
    opened = _OPENED.get(key)
    if opened is None:
        from pdplan.evaluation.evaluate import evaluate  # noqa: F401  # paid once per worker, not per point
        from pdplan.io.catalog import open_catalog
        from pdplan.search.optimize import optimize  # noqa: F401

        opened = _OPENED[key] = (job, open_catalog(list(job.hardware_db), list(job.kernel_tables)))
    return opened[1]


def start_pool_worker(job: SweepJob) -> None:
    """A process-pool worker's initialiser: Ctrl-C is the parent's to handle (the worker finishes its point and is
    stopped by the pool), and the job is opened once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    open_job(job)


def pool_point(index: int, point: SweepPoint) -> list[Row]:
    """One point in a process-pool worker (its job was opened by :func:`start_pool_worker`)."""
    job, catalog = next(iter(_OPENED.values()))
    return run_point(job, catalog, index, point)


def pool_points(points: list[tuple[int, SweepPoint]]) -> list[tuple[int, list[Row]]]:
    """Consecutive points of one scenario in a process-pool worker, in order (the later searches reuse what the first
    computed that does not depend on the rate or budget, :mod:`pdplan.search.memo`)."""
    return [(index, pool_point(index, point)) for index, point in points]


def job_point(job: SweepJob, index: int, point: SweepPoint) -> list[Row]:
    """One point of ``job`` in any process (a Ray task; in-process runs): the job opened on first use."""
    return run_point(job, open_job(job), index, point)
