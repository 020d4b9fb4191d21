"""The ``pdplan`` command line (typer): one module per command group, the app and its error mapping in
:mod:`pdplan.cli.app`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdplan.cli.app import main, run

# ``pdplan.cli.app`` names both the module and the app of every command: importing the module bound the name here to
# the module; unbound, ``from pdplan.cli import app`` reaches :func:`__getattr__` below and gets the app, as when this
# file imported it (now built on first use: start-up, issue #27)
del globals()["app"]

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main", "run"]


def __getattr__(name: str) -> typer.Typer:
    """``app`` (:func:`pdplan.cli.app.full_app`), built on first use: running one command builds no other's."""
    if name == "app":
        from pdplan.cli.app import full_app

        return full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
