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

Before and after in one run: ``--tree before=/tmp/before --tree after=.`` (each a checkout of pdplan, e.g. from
``git archive``; the process runs in that folder, so ``python -m pdplan`` imports that tree's package). Every command
then runs in every tree in turn, and the table has a row per command and tree, the ratios taken against the first
tree's row of the same command.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path

from timing import child_seconds

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COMMANDS = (
    "optimize pdplan/data/default_scenario.yaml",
    "optimize examples/chat-sessions.yaml",
    "evaluate pdplan/data/default_scenario.yaml --rate 10",
    "--version",
)


def run_once(args: list[str], root: Path = ROOT) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one ``pdplan`` process (``python -m pdplan``: the console entry point) run in
    the checkout ``root``."""
    return child_seconds([sys.executable, "-m", "pdplan", *args], root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commands", nargs="*", default=list(DEFAULT_COMMANDS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH of a pdplan checkout (repeatable)")
    opts = parser.parse_args()
    commands = [shlex.split(c) for c in opts.commands]
    trees = [(name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in opts.tree)] or [("", ROOT)]
    pairs = zip(opts.commands, commands, strict=True)
    runs = [(text, args, name, root) for text, args in pairs for name, root in trees]
    for _, args, _, root in runs:  # warm the file cache
        run_once(args, root)
    walls: list[list[float]] = [[] for _ in runs]
    cpus: list[list[float]] = [[] for _ in runs]
    for _ in range(opts.repeats):
        for i, (_, args, _, root) in enumerate(runs):
            wall_s, cpu_s = run_once(args, root)
            walls[i].append(wall_s)
            cpus[i].append(cpu_s)
    wall = [statistics.median(w) for w in walls]
    cpu = [statistics.median(c) for c in cpus]
    if len(trees) == 1:
        print(f"| command | wall (s) | CPU (s) | wall / first | CPU / first |  (median of {opts.repeats})")
        print("|---|---|---|---|---|")
        for (text, *_), w, c in zip(runs, wall, cpu, strict=True):
            print(f"| `pdplan {text}` | {w:.2f} | {c:.2f} | {w / wall[0]:.2f} | {c / cpu[0]:.2f} |")
        return
    first = trees[0][0]
    print(f"| command | tree | wall (s) | CPU (s) | wall / {first} | CPU / {first} |  (median of {opts.repeats})")
    print("|---|---|---|---|---|---|")
    for i, (text, _, name, _) in enumerate(runs):
        base = i - i % len(trees)
        w, c = wall[i], cpu[i]
        print(f"| `pdplan {text}` | {name} | {w:.2f} | {c:.2f} | {w / wall[base]:.2f} | {c / cpu[base]:.2f} |")


if __name__ == "__main__":
    main()
