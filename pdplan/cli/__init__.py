"""The ``pdplan`` command line (typer): one module per command group, the app and its error mapping in
:mod:`pdplan.cli.app`."""

from pdplan.cli.app import app, main, run

__all__ = ["app", "main", "run"]
