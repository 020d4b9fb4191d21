"""``evaluate`` and ``optimize`` of the default scenario import only what they run (issue #27, start-up): not the
benchmark loops, the simulator, the calibration fits, the plot module or matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


def _loaded(command: str) -> list[str]:
    code = (
        f"import sys; sys.argv = ['pdplan', '{command}']; from pdplan.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"import json; print(json.dumps(sorted(m for m in {NOT_NEEDED!r} if m in sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    loaded: list[str] = json.loads(proc.stdout.splitlines()[-1])
    return loaded


def test_evaluate_imports_only_what_it_runs() -> None:
    assert _loaded("evaluate") == []


@pytest.mark.slow
def test_optimize_imports_only_what_it_runs() -> None:
    assert _loaded("optimize") == []
