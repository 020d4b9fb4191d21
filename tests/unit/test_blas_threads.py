"""The console entry point runs numpy's BLAS on one thread unless the user chose (pdplan.__main__)."""

from __future__ import annotations

import subprocess
import sys

from pdplan.__main__ import BLAS_THREAD_VARIABLES, single_threaded_blas


def test_unset_counts_become_one_thread() -> None:
    env: dict[str, str] = {}
    single_threaded_blas(env)
    assert env == dict.fromkeys(BLAS_THREAD_VARIABLES, "1")


def test_a_count_the_user_set_is_kept() -> None:
    env = {"OPENBLAS_NUM_THREADS": "4"}
    single_threaded_blas(env)
    assert env["OPENBLAS_NUM_THREADS"] == "4"
    assert env["MKL_NUM_THREADS"] == "1"


def test_the_entry_point_sets_it_before_numpy_loads() -> None:
    """numpy reads the count once, at import: the entry module must not import numpy itself."""
    code = "import sys, pdplan.__main__; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
