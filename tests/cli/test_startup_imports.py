"""What the console entry point imports (issue #27, start-up): ``evaluate`` and ``optimize`` of the default scenario
import only what they run (not the other commands' modules, the prefix cache, PPD, batched prefill or PrfaaS, the
benchmark loops, the simulator, the calibration fits, the plot module or matplotlib, nor SciPy's subpackages whose
compiled routines pdplan.numerics loads alone, nor ``numpy.ma``); the PrfaaS and wide-EP examples import no SciPy
subpackage; ``--help`` loads no numeric code; the garbage collector's start-up mode (pdplan.start_up) is over once
the command's work starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pdplan.numerics.scipy_parts import private_layout_known

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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
    # the prefix cache's, PPD's, batched prefill's, the tandem KV link's, PrfaaS's and the traces' modules: only a
    # scenario that uses them imports them (start-up, issue #27)
    "pdplan.serving.prefix_cache",
    "pdplan.cache.lru_closed_form",
    "pdplan.cache.stack_distance",
    "pdplan.cache.tiers",
    "pdplan.serving.colocated_cache",
    "pdplan.serving.colocated_dp",
    "pdplan.serving.trace_cells",
    "pdplan.serving.ppd_pool",
    "pdplan.serving.ppd_model",  # PPD's and DualPath's entry points: pdplan.serving.cache_mechanism_calls
    "pdplan.serving.ppd_report",
    "pdplan.serving.dual_path_setup",
    "pdplan.cache.dual_path",
    "pdplan.serving.ppd_decode",
    "pdplan.serving.ppd_hits",
    "pdplan.queueing.batched",
    "pdplan.queueing.tandem_chain",
    "pdplan.queueing.chain_accel",
    "pdplan.serving.prfaas.result",
    "pdplan.benchmark.records",
    "pdplan.io.traces_mooncake",
    "pdplan.io.hf_config",
    "pdplan.specs.kv_offload",  # a cache's lower tiers only (serving/cache_setup.py, io/catalog.py storage())
    "pdplan.specs.storage",
    # the other commands' modules (pdplan.cli.app.app_for: one command's app)
    "pdplan.cli.simulate",
    "pdplan.cli.sweep",
    "pdplan.cli.export",
    "pdplan.cli.compare",
    "pdplan.cli.perf",
    "pdplan.cli.catalog",
)
SCIPY_PACKAGES = (
    "scipy.fft",
    "scipy.special",
    "scipy.optimize",
    "scipy.linalg",
    "scipy.sparse",
    "scipy.sparse.linalg",
    "numpy.testing",
    "numpy.ma",
    "unittest",
)
"""Imported by ``scipy/special/__init__.py``, ``scipy/optimize/__init__.py``, ``scipy/fft/__init__.py`` and
``scipy/sparse/linalg/__init__.py`` (``numpy.ma`` by their array-API layer, and by ``numpy.unique``/``numpy.median``:
pdplan.numerics.sorted_stats); pdplan.numerics.special, nnls, fft and sparse_solve load the compiled modules without
them where SciPy's layout is known."""
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


def test_session_example_evaluate_convolves_without_scipy_fft() -> None:
    """The session laws' convolutions (chat-sessions) run on SciPy's compiled pocketfft alone."""
    names = SCIPY_PACKAGES if private_layout_known() else ()
    assert _loaded(["evaluate", str(EXAMPLES / "chat-sessions.yaml")], names) == []


@pytest.mark.parametrize("example", ["prfaas-h200-h20", "prfaas-h200-h100", "deepseek-v3-wide-ep"])
def test_examples_that_used_scipy_optimize_or_sparse_import_neither(example: str) -> None:
    """PrfaaS's PCHIP profile and threshold searches (pdplan.numerics.pchip, bounded_min) and the JSQ chain above 16
    instances (pdplan.numerics.sparse_solve) run without ``scipy.interpolate``, ``scipy.optimize``, ``scipy.sparse``."""
    names = ("scipy.interpolate", *SCIPY_PACKAGES) if private_layout_known() else ("scipy.interpolate",)
    assert _loaded(["evaluate", str(EXAMPLES / f"{example}.yaml")], names) == []


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
