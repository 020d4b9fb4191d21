"""Shared fixtures: repository paths, an isolated catalogue environment, an in-process CLI runner, and the optimisations
and command runs that several tests read (each computed once per test process)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli_result import CliResult
from support.optimized import Optimized
from support.xdist_groups import restore_group_suffixes

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``pytest --update-golden`` rewrites the golden reports (tests/golden) instead of comparing them."""
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden report files instead of comparing with them",
    )


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook, which writes the suffix pytest 9.2 no longer reads
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``xdist_group`` run on one worker, as ``--dist loadgroup`` means (tests/support/xdist_groups.py)."""
    restore_group_suffixes(config, items)


@pytest.fixture(autouse=True)
def _isolated_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's PDPLAN_HARDWARE_DB (specs stay cached by resolved path: tests
    write user files under their own ``tmp_path``, so a cached spec is never stale)."""
    monkeypatch.delenv("PDPLAN_HARDWARE_DB", raising=False)


@pytest.fixture
def repo_root() -> Path:
    """The source tree root (holds ``hardware_db/`` and ``tests/``)."""
    return REPO_ROOT


@pytest.fixture
def hardware_db() -> Path:
    """The built-in ``hardware_db/`` folder of the source tree."""
    return REPO_ROOT / "hardware_db"


@pytest.fixture
def bad_inputs() -> Path:
    """The corpus of bad input files, ``tests/bad_inputs/``."""
    return REPO_ROOT / "tests" / "bad_inputs"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``pdplan.cli.run(argv)`` in-process; returns exit code, stdout and stderr."""
    from pdplan.cli import run

    def _run(*argv: str | Path) -> CliResult:
        capsys.readouterr()  # drop anything printed before this call
        code = run([str(a) for a in argv])
        captured = capsys.readouterr()
        return CliResult(code=code, out=captured.out, err=captured.err)

    return _run


@pytest.fixture(scope="session")
def optimized() -> Optimized:
    """``optimized("default")`` is ``optimize(examples/default.yaml)``, search time zeroed, run once per test process
    for every test that reads it (``optimized(path, analyse=False)`` likewise, keyed on the file and the arguments).
    Tests that share one should be in the ``xdist_group`` ``"optimized"``, so that one worker runs them all."""
    return Optimized()


@pytest.fixture(scope="session")
def cli_shared() -> Callable[..., CliResult]:
    """Like ``cli``, but each distinct argument list runs once per test process and every test that asks for it reads
    that run's exit code, stdout and stderr: for tests that assert on the same invocation (one that writes no file).
    Tests that share one should be in one ``xdist_group``, so that one worker runs them all."""
    from pdplan.cli import run

    runs: dict[tuple[str, ...], CliResult] = {}

    def _run(*argv: str | Path) -> CliResult:
        key = tuple(str(a) for a in argv)
        if key not in runs:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = run(list(key))
            runs[key] = CliResult(code=code, out=out.getvalue(), err=err.getvalue())
        return runs[key]

    return _run
