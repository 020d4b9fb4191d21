"""Optimisations that several tests read, computed once per test process (each xdist worker) and then shared.

``optimize`` is deterministic for the same inputs (tests/cli/test_optimize_cli.py
``test_results_are_identical_run_to_run`` runs it twice and compares), so tests that only read a result may share one
run; the search time, the one field that changes from run to run, is zeroed. A test that compares the command line
with the library still runs the command itself: only the library side comes from here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pdplan is imported on first use, not when conftest.py loads this module (before coverage starts)
    from pdplan.search.plans import PlanResult

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

Options = tuple[tuple[str, bool | int | float | str | None], ...]


class Optimized:
    """``optimized("default")``: ``optimize(examples/default.yaml, catalog=open_catalog())`` with its search time
    zeroed; ``optimized(path, analyse=False, top=1)`` for any scenario file and keyword arguments of ``optimize`` (only
    hashable ones). Each distinct (file, arguments) is optimised once, on first use."""

    def __init__(self) -> None:
        self._results: dict[tuple[Path, Options], PlanResult] = {}

    def __call__(self, scenario: str | Path, **options: bool | int | float | str | None) -> PlanResult:
        path = (EXAMPLES / f"{scenario}.yaml" if isinstance(scenario, str) else scenario).resolve()
        key = (path, tuple(sorted(options.items())))
        if key not in self._results:
            from pdplan.io.catalog import open_catalog
            from pdplan.io.scenario import load_scenario
            from pdplan.search.optimize import optimize

            result = optimize(load_scenario(path), catalog=open_catalog(), **options)  # type: ignore[arg-type]
            search = dataclasses.replace(result.search, seconds=0.0)
            self._results[key] = dataclasses.replace(result, search=search)
        return self._results[key]
