"""End-to-end time of ``pdplan`` commands as a user runs them: a fresh process each time, start-up and imports
included (what ``/usr/bin/time pdplan ...`` shows), alternating the commands so that load on a shared machine hits
them alike.

For each command: the median over ``--repeats`` runs of the wall-clock seconds and of the child's CPU seconds (user +
system, from ``resource.getrusage(RUSAGE_CHILDREN)`` differences), and the ratio of each to the first command's.
Issue #22's speed target ("a reuse-aware optimize over the session example stays within 1.5× the default's time") and
issue #27's start-up targets read on these numbers; ``benchmarks/optimize_speed.py`` times the search alone
(in-process, imports excluded).

Run: ``python benchmarks/command_speed.py [--repeats N]`` (defaults: the default scenario's optimize, the session
example's optimize, ``evaluate`` of the default scenario at 10 req/s, ``--version``), or give commands, each one
quoted string: ``python benchmarks/command_speed.py "optimize examples/default.yaml" "--version"``.
"""

from __future__ import annotations

import argparse
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COMMANDS = (
    "optimize pdplan/data/default_scenario.yaml",
    "optimize examples/chat-sessions.yaml",
    "evaluate pdplan/data/default_scenario.yaml --rate 10",
    "--version",
)


def _child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(args: list[str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one ``pdplan`` process (``python -m pdplan``: the console entry point)."""
    cpu0, wall0 = _child_cpu_s(), time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pdplan", *args],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - wall0, _child_cpu_s() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commands", nargs="*", default=list(DEFAULT_COMMANDS))
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args()
    commands = [shlex.split(c) for c in opts.commands]
    for args in commands:  # warm the file cache
        run_once(args)
    walls: list[list[float]] = [[] for _ in commands]
    cpus: list[list[float]] = [[] for _ in commands]
    for _ in range(opts.repeats):
        for i, args in enumerate(commands):
            wall_s, cpu_s = run_once(args)
            walls[i].append(wall_s)
            cpus[i].append(cpu_s)
    wall = [statistics.median(w) for w in walls]
    cpu = [statistics.median(c) for c in cpus]
    print(f"| command | wall (s) | CPU (s) | wall / first | CPU / first |  (median of {opts.repeats})")
    print("|---|---|---|---|---|")
    for text, w, c in zip(opts.commands, wall, cpu, strict=True):
        print(f"| `pdplan {text}` | {w:.2f} | {c:.2f} | {w / wall[0]:.2f} | {c / cpu[0]:.2f} |")


if __name__ == "__main__":
    main()
