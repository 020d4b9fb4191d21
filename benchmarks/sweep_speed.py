"""Speed of ``pdplan sweep`` (issue #27 target: >= 20 default-family scenarios per second per core in-process, and
>= 1.7x that on 2 workers). Output recorded in docs/sweep.md §5.

Runs the first ``--points N`` points (default 24) of ``examples/sweeps/fleet.yaml`` (the default scenario over
models, GPU sets, engines, SLO tiers and forecast rates) through the sweep's own executors, writing no files:

* in-process (``--workers 1``): after one untimed warm-up point (imports and catalogue, paid once per worker), the
  wall-clock and CPU seconds per point; scenarios/s per core = points / CPU seconds of this process. A search after
  another of the same scenario (the grid's rates) reuses the parts that do not depend on the rate
  (:mod:`pdplan.search.memo`, emptied after the warm-up); a second row times each point's search from scratch;
* a local pool of 2 spawned workers: the whole wall time (worker start-up included) and the steady rate (points
  after the first result, over the time after it), each as a speed-up over the in-process wall rate.

``--command evaluate`` times ``evaluate`` instead (GPU sets of one type only). On a machine shared with other jobs,
the CPU-second figure is the one to compare; the speed-ups need two idle cores. Run:
``python benchmarks/sweep_speed.py [--points N] [--command optimize|evaluate] [--before DIR] [--doc]`` (``--doc``: also
write the table into docs/sweep.md §5, between its ``sweep_speed`` markers, one block per command; ``--before DIR``:
also the in-process rate of the pdplan package of an older checkout at DIR, e.g. ``git archive main | tar -x -C DIR``,
timed in a child process before and after this checkout's in-process rows, so that both share the machine's load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from timing import forget

from pdplan.sweep.executors import in_process, process_pool
from pdplan.sweep.job import SweepJob, load_job
from pdplan.sweep.worker import open_job

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "examples/sweeps/fleet.yaml"
DOC = ROOT / "docs/sweep.md"


def _job(points: int, command: str) -> SweepJob:
    job = load_job(GRID, "optimize")
    chosen = [p for p in job.points if command == "optimize" or p.gpu is None or len(p.gpu) == 1]
    return replace(job, command=command, points=tuple(chosen[:points]))


def _in_process(job: SweepJob, cold: bool = False) -> tuple[float, float]:
    """(wall s, CPU s) per point in this process, after a warm-up point; ``cold``: each point's search from scratch
    (nothing memoised by the searches before it, :mod:`pdplan.search.memo`: what one ``pdplan optimize`` pays after
    its imports)."""
    open_job(job)
    list(in_process(job, [(0, job.points[0])]))
    forget()  # the warm-up pays the imports and the catalogue, and shares nothing with the timed points
    todo = list(enumerate(job.points))
    wall, cpu = time.perf_counter(), time.process_time()
    for one in todo:
        if cold:
            forget()
        list(in_process(job, [one]))
    return (time.perf_counter() - wall) / len(todo), (time.process_time() - cpu) / len(todo)


def _before(old: str, command: str, points: int) -> tuple[float, float]:
    """:func:`_in_process` of the pdplan package of the checkout ``old``, in a child process (``--row``)."""
    env = {**os.environ, "PYTHONPATH": str(Path(old).resolve())}
    args = [sys.executable, __file__, "--row", "--command", command, "--points", str(points)]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    wall, cpu = json.loads(out.strip().splitlines()[-1])
    return float(wall), float(cpu)


def _pool(job: SweepJob, workers: int) -> tuple[float, float]:
    """(whole wall s, steady wall s per point after the first result) on a pool of ``workers``."""
    todo = list(enumerate(job.points))
    started = time.perf_counter()
    first = None
    for _ in process_pool(job, todo, workers):
        first = first if first is not None else time.perf_counter()
    ended = time.perf_counter()
    assert first is not None
    return ended - started, (ended - first) / max(1, len(todo) - 1)


def table(command: str, points: int, before: str | None = None) -> str:
    """The measured table in Markdown, with the machine's core count and load; ``before``: an older checkout's
    in-process rate too, measured in a child process between this checkout's in-process rows."""
    job = _job(points, command)
    n = len(job.points)
    load_start = os.getloadavg()[0]
    old = _before(before, command, points) if before is not None else None
    wall_1, cpu_1 = _in_process(job)
    cold = _in_process(job, cold=True)
    old_2 = _before(before, command, points) if before is not None else None
    whole_2, steady_2 = _pool(job, 2)
    load = f"{load_start:.1f} then {os.getloadavg()[0]:.1f}"
    rows = [
        f"`{command}`, {n} points of {GRID.relative_to(ROOT)}; {os.cpu_count()} cores, 1-minute load average {load}",
        "",
        "| executor | wall s/point | CPU s/point | scenarios/s | per core | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    if old is not None and old_2 is not None:
        wall_0, cpu_0 = (old[0] + old_2[0]) / 2, (old[1] + old_2[1]) / 2
        rows.append(
            f"| in-process, before ({before}; mean of 2 runs around the after rows) | {wall_0:.3f} | {cpu_0:.3f} | "
            f"{1 / wall_0:.2f} | {1 / cpu_0:.2f} (CPU) | {wall_1 / wall_0:.2f} |"
        )
    rows += [
        f"| in-process (1 core) | {wall_1:.3f} | {cpu_1:.3f} | {1 / wall_1:.2f} | {1 / cpu_1:.2f} (CPU) | 1.00 |",
        f"| in-process, each search from scratch (nothing memoised) | {cold[0]:.3f} | {cold[1]:.3f} | "
        f"{1 / cold[0]:.2f} | {1 / cold[1]:.2f} (CPU) | {wall_1 / cold[0]:.2f} |",
        f"| pool, 2 workers, whole run (start-up included) | {whole_2 / n:.3f} | | {n / whole_2:.2f} | "
        f"{n / whole_2 / 2:.2f} | {wall_1 * n / whole_2:.2f} |",
        f"| pool, 2 workers, steady (after the first result) | {steady_2:.3f} | | {1 / steady_2:.2f} | "
        f"{1 / steady_2 / 2:.2f} | {wall_1 / steady_2:.2f} |",
    ]
    return "\n".join(rows)


def write_doc(command: str, text: str) -> None:
    """``text`` between the command's markers in docs/sweep.md."""
    begin, end = f"<!-- BEGIN sweep_speed {command} -->", f"<!-- END sweep_speed {command} -->"
    doc = DOC.read_text()
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    DOC.write_text(f"{head}{begin}\n{text}\n{end}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=24)
    parser.add_argument("--command", choices=("optimize", "evaluate"), default="optimize")
    parser.add_argument("--doc", action="store_true", help="also write the table into docs/sweep.md")
    parser.add_argument("--before", metavar="DIR", help="also time the pdplan package of an older checkout at DIR")
    parser.add_argument("--row", action="store_true", help=argparse.SUPPRESS)  # child of --before
    args = parser.parse_args()
    if args.row:
        print(json.dumps(_in_process(_job(args.points, args.command))))
        return
    text = table(args.command, args.points, args.before)
    print(text)
    if args.doc:
        write_doc(args.command, text)


if __name__ == "__main__":
    main()
