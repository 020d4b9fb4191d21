"""pdplan.start_up: begin raises the gen-0 threshold and remembers the thresholds it found; end freezes what is
alive and restores them; both are idempotent, and end without begin changes nothing. The console entry point asks
OpenBLAS for one thread before numpy loads, unless the user named a count."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from pdplan import start_up


@pytest.fixture
def clean_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    start_up._saved.clear()
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("clean_gc")
def test_begin_then_end() -> None:
    gc.set_threshold(700, 10, 10)
    start_up.begin()
    start_up.begin()  # idempotent: the thresholds found first are the ones restored
    assert gc.get_threshold() == (start_up.START_UP_THRESHOLD_0, 10, 10)
    assert gc.get_freeze_count() == 0
    start_up.end()
    assert gc.get_threshold() == (700, 10, 10)
    frozen = gc.get_freeze_count()
    assert frozen > 0
    start_up.end()  # a second end does nothing: no second freeze (frozen objects freed meanwhile lower the count)
    assert gc.get_freeze_count() <= frozen


@pytest.mark.usefixtures("clean_gc")
def test_end_without_begin_changes_nothing() -> None:
    gc.set_threshold(500, 7, 3)
    start_up.end()
    assert gc.get_threshold() == (500, 7, 3)
    assert gc.get_freeze_count() == 0


def test_single_threaded_blas_keeps_a_users_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(start_up.BLAS_THREADS_VARIABLE, raising=False)
    start_up.single_threaded_blas()
    assert os.environ[start_up.BLAS_THREADS_VARIABLE] == "1"
    monkeypatch.setenv(start_up.BLAS_THREADS_VARIABLE, "4")
    start_up.single_threaded_blas()
    assert os.environ[start_up.BLAS_THREADS_VARIABLE] == "4"


@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("3", "3")])
def test_console_entry_point_asks_one_blas_thread_before_numpy(given: str | None, expected: str) -> None:
    """The console entry point (``pdplan.__main__.main``) sets the variable before numpy is imported (OpenBLAS reads
    it once, when numpy loads it); a value the user gave stays."""
    code = (
        "import os, sys\n"
        "sys.argv = ['pdplan', '--help']\n"
        "from pdplan.__main__ import main\n"
        "import pdplan.start_up as s\n"
        "seen = []\n"
        "original = s.single_threaded_blas\n"
        "s.single_threaded_blas = lambda: (seen.append('numpy' in sys.modules), original())\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(seen, os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != start_up.BLAS_THREADS_VARIABLE}
    if given is not None:
        env[start_up.BLAS_THREADS_VARIABLE] = given
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert out.stderr.strip().splitlines()[-1] == f"[False] {expected}"


def test_default_optimize_starts_up_without_a_collection() -> None:
    """The default ``optimize``'s imports, from the console entry point to :func:`pdplan.start_up.end`, allocate
    fewer container objects than :data:`pdplan.start_up.START_UP_THRESHOLD_0`: no collection runs while they load
    (a young collection of ~10⁵ objects costs ~35 ms of CPU: the module docstring). Stops at ``end``, before the
    search."""
    code = (
        "import gc, sys\n"
        "sys.argv = ['pdplan', 'optimize']\n"
        "import pdplan.start_up as s\n"
        "runs = []\n"
        "def stop():\n"
        "    print(len(runs), gc.get_count()[0], s.START_UP_THRESHOLD_0, file=sys.stderr)\n"
        "    raise SystemExit(0)\n"
        "s.end = stop\n"
        "from pdplan.__main__ import main\n"
        "gc.callbacks.append(lambda phase, info: runs.append(info) if phase == 'start' and s._saved else None)\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    collections, count, threshold = (int(word) for word in out.stderr.strip().splitlines()[-1].split())
    assert collections == 0, f"{collections} collections during start-up ({count} objects, threshold {threshold})"
    assert 0 < count < threshold
