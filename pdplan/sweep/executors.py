"""Where a sweep's points run (docs/sweep.md §4): in this process, on a local process pool (``--workers N``), or on a
Ray cluster (``--executor ray``, the optional extra ``pip install 'pdplan[ray]'``). Each yields a point's ``(index,
rows)`` as it finishes, in any order: the caller records each one and sorts at the end.

A pool worker runs consecutive points of one scenario together (:func:`groups`: the grid's rates or budgets of one
model, GPU set, workload, engine and SLO tier), so that their searches share what does not depend on the rate
(:mod:`pdplan.search.memo`) instead of each worker computing it again. Pool workers are started with ``spawn`` (no
fork of a process that runs a progress thread), import the library and open the catalogue once
(:func:`pdplan.sweep.worker.start_pool_worker`) and ignore Ctrl-C: on an interrupt the parent cancels the points not
started and waits for the running ones, whose rows are dropped.
"""

from __future__ import annotations

import importlib
import multiprocessing
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from types import ModuleType
from typing import Any

from pdplan.errors import SpecError
from pdplan.specs.sweep import SweepPoint
from pdplan.sweep.job import SweepJob
from pdplan.sweep.point import Row
from pdplan.sweep.worker import job_point, pool_points, start_pool_worker

Todo = Sequence[tuple[int, SweepPoint]]
Group = list[tuple[int, SweepPoint]]
Done = Generator[tuple[int, list[Row]], None, None]
RAY_EXTRA = "pip install 'pdplan[ray]'"
GROUP_POINTS = 4
"""The most consecutive points of one scenario a pool worker runs as one task (the fleet grid's four rates)."""


def in_process(job: SweepJob, todo: Todo) -> Done:
    """Every point in this process, in order."""
    for index, point in todo:
        yield index, job_point(job, index, point)


def groups(todo: Todo) -> list[Group]:
    """``todo`` in runs of consecutive points that differ only in their rate or GPU budget, each of at most
    :data:`GROUP_POINTS` points, in order."""
    out: list[Group] = []
    for index, point in todo:
        last = out[-1] if out else None
        if last is not None and len(last) < GROUP_POINTS and _scenario(last[-1][1]) == _scenario(point):
            last.append((index, point))
        else:
            out.append([(index, point)])
    return out


def _scenario(point: SweepPoint) -> SweepPoint:
    """``point`` less its rate and GPU budget: the scenario its search runs on."""
    return point.model_copy(update={"rate": None, "gpus": None})


def process_pool(job: SweepJob, todo: Todo, workers: int) -> Done:
    """Every point on ``workers`` local processes, in groups of one scenario (:func:`groups`); at most two groups per
    worker running or queued, so an interrupt leaves little work started in vain."""
    if workers <= 1 or len(todo) <= 1:
        yield from in_process(job, todo)
        return
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(todo)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=start_pool_worker,
        initargs=(job,),
    )
    waiting = iter(groups(todo))
    running: dict[Future[list[tuple[int, list[Row]]]], int] = {}
    try:
        _fill(pool, waiting, running, 2 * workers)
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=running.__getitem__):
                running.pop(future)
                yield from future.result()
            _fill(pool, waiting, running, 2 * workers)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _fill(pool: ProcessPoolExecutor, waiting: Iterator[Group], running: dict[Any, int], n: int) -> None:
    for group in waiting:
        running[pool.submit(pool_points, group)] = group[0][0]
        if len(running) >= n:
            return


def import_ray() -> ModuleType:
    """The ``ray`` module, or bad input (exit 2) naming the optional extra that installs it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise SpecError(f"Ray is not installed; install the optional extra: {RAY_EXTRA}", field="--executor") from None


def ray_cluster(job: SweepJob, todo: Todo, address: str | None) -> Done:
    """Every point as a Ray task (one CPU each) on the cluster at ``address`` (None: a local Ray started for this
    sweep). The job travels once (``ray.put``); each Ray worker process opens it once
    (:func:`pdplan.sweep.worker.job_point`). On an interrupt a cluster's unfinished points are cancelled; a local
    Ray's stop with it (``ray.shutdown``), uncancelled: with Ray 2.60 a ``ray.cancel`` racing a task's reply aborted
    the driver (``task_manager.cc``: "An unexpected system state has occurred", exit 1 instead of 130) in 2 of 8
    interrupted local sweeps at load 4, and in none of 8 without it (2026-12-08)."""
    ray = import_ray()
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(job_point)
        shared = ray.put(job)
        pending = {task.remote(shared, index, point): index for index, point in todo}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                index = pending.pop(ready[0])
                yield index, ray.get(ready[0])
        finally:
            if address is not None:  # a cluster outlives the sweep: stop its queued points (a local Ray stops below)
                for ref in pending:
                    ray.cancel(ref)
    finally:
        ray.shutdown()
