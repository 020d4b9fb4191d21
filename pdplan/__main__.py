"""The ``pdplan`` console entry point and ``python -m pdplan``.

:func:`main` answers ``pdplan --version`` (that whole command line, nothing else) before typer, rich and pydantic
are imported: they are about 0.15 s of start-up (``python -X importtime``) that printing one constant does not need.
Every other command line goes to :func:`pdplan.cli.app.main`, with the garbage collector in its start-up mode
(:mod:`pdplan.start_up`) while the command's modules load, and numpy's BLAS on one thread unless the user chose
(:func:`single_threaded_blas`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""The thread counts numpy's BLAS reads once, when numpy is first imported (OpenBLAS in numpy's wheels, MKL in some
distributions)."""


def single_threaded_blas(environ: MutableMapping[str, str]) -> None:
    """Run numpy's BLAS on one thread in a ``pdplan`` command, unless the user set a count.

    A command's linear algebra is small: the least-loaded router's balanced-queue chain is solved densely up to 152
    states (:mod:`pdplan.queueing.jsq`), 576 such solves in the default ``optimize``; nothing multiplies matrices
    large enough to repay starting and spinning threads. With OpenBLAS's default of one thread per core those solves
    spin both cores: measured 2026-12-07 on the 2-core machine at load average 10, the default ``optimize`` took
    2.7-3.5 CPU s and 8.3-11.0 s wall with the default thread count against 1.20-1.26 CPU s and 3.5-4.1 s wall on one
    thread, and ``optimize -f json`` of the default, chat-ppd and deepseek-v3-wide-ep scenarios was byte-identical
    but for ``seconds``. Must run before numpy is imported; a count already in the environment is kept. Library
    callers (a notebook) choose their own."""
    for name in BLAS_THREAD_VARIABLES:
        environ.setdefault(name, "1")


def main() -> None:
    """Console entry point (``pdplan``)."""
    if sys.argv[1:] == ["--version"]:
        from pdplan.version import VERSION

        print(f"pdplan {VERSION}")
        return
    single_threaded_blas(os.environ)
    from pdplan import start_up

    start_up.begin()
    from pdplan.cli.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
