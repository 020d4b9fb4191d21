"""What the console entry point imports (issue #27, start-up): ``evaluate`` and ``optimize`` of the default scenario
import only what they run (not the benchmark loops, the simulator, the calibration fits, the plot module or
matplotlib, nor SciPy's subpackages whose compiled routines pdplan.numerics loads alone); ``--help`` loads no numeric
code; the garbage collector's start-up mode (pdplan.start_up) is over once the command's work starts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pdplan.numerics.scipy_parts import private_layout_known

NOT_NEEDED = (
    "pdplan.benchmark.run",
    "pdplan.benchmark.mva",
    "pdplan.benchmark.disaggregated_loop",
    "pdplan.sim",
    "pdplan.calibrate",
    "pdplan.report.plot",
    "matplotlib",
    "scipy.interpolate",
    "scipy.stats",
)
SCIPY_PACKAGES = (
    "scipy.special",
    "scipy.optimize",
    "scipy.linalg",
    "scipy.sparse",
    "numpy.testing",
    "unittest",
)
"""Imported by ``scipy/special/__init__.py`` and ``scipy/optimize/__init__.py``; pdplan.numerics.special and
pdplan.numerics.nnls load the compiled modules without them where SciPy's layout is known."""
NOT_FOR_HELP = ("numpy", "scipy", "yaml", "pdplan.serving", "pdplan.specs.scenario", "pdplan.io.catalog")


def _run_main(args: list[str], report: str) -> list[object]:
    code = (
        f"import gc, sys; sys.argv = ['pdplan', *{args!r}]; from pdplan.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"import json; print(json.dumps({report}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    loaded: list[object] = json.loads(proc.stdout.splitlines()[-1])
    return loaded


def _loaded(args: list[str], names: tuple[str, ...]) -> list[object]:
    return _run_main(args, f"sorted(m for m in {names!r} if m in sys.modules)")


def _not_needed() -> tuple[str, ...]:
    return NOT_NEEDED + (SCIPY_PACKAGES if private_layout_known() else ())


def test_evaluate_imports_only_what_it_runs() -> None:
    assert _loaded(["evaluate"], _not_needed()) == []


@pytest.mark.slow
def test_optimize_imports_only_what_it_runs() -> None:
    assert _loaded(["optimize"], _not_needed()) == []


@pytest.mark.parametrize("args", [["--help"], ["evaluate", "--help"]])
def test_help_loads_no_numeric_code_or_model(args: list[str]) -> None:
    assert _loaded(args, NOT_FOR_HELP) == []


def test_evaluate_ends_the_start_up_mode() -> None:
    """After ``evaluate`` the thresholds are the interpreter's again and the start-up's objects are frozen."""
    defaults = list(__import__("gc").get_threshold())
    thresholds, frozen = _run_main(["evaluate"], "[list(gc.get_threshold()), gc.get_freeze_count()]")
    assert thresholds == defaults
    assert isinstance(frozen, int)
    assert frozen > 10_000
