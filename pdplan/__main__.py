"""The ``pdplan`` console entry point and ``python -m pdplan``.

:func:`main` answers ``pdplan --version`` (that whole command line, nothing else) before typer, rich and pydantic
are imported: they are about 0.15 s of start-up (``python -X importtime``) that printing one constant does not need.
Every other command line goes to :func:`pdplan.cli.app.main`, with one BLAS thread and the garbage collector in its
start-up mode (:mod:`pdplan.start_up`) while the command's modules load.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console entry point (``pdplan``)."""
    if sys.argv[1:] == ["--version"]:
        from pdplan.version import VERSION

        print(f"pdplan {VERSION}")
        return
    from pdplan import start_up

    start_up.single_threaded_blas()  # before numpy's import: OpenBLAS reads its thread count once
    start_up.begin()
    from pdplan.cli.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
