"""pdplan.cli.app.app_for: a command line that starts with a top-level command runs on an app of that command alone
(typer builds only its parameters); the command, its parameters, help lines and the root options are the full app's,
and everything else (groups, typos, root options, no arguments) runs on the full app."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from pdplan.cli.app import _COMMANDS, app, app_for, run


def _params(group: Any, name: str) -> list[tuple[Any, ...]]:
    command = group.commands[name]
    ctx = command.make_context(name, [], resilient_parsing=True)
    return [
        (p.name, tuple(p.opts), p.default, p.required, p.get_help_record(ctx) if hasattr(p, "help") else None)
        for p in command.params
    ]


@pytest.mark.parametrize("name", sorted(_COMMANDS))
def test_single_command_app_matches_the_full_app(name: str) -> None:
    full = typer.main.get_command(app)
    single = typer.main.get_command(app_for([name, "--help"]))
    assert list(single.commands) == [name]  # type: ignore[attr-defined]
    assert _params(single, name) == _params(full, name)
    assert [p.opts for p in single.params] == [p.opts for p in full.params]  # the root's --version, --help
    assert single.commands[name].help == full.commands[name].help  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "argv", [[], ["--version"], ["hardware", "list"], ["models"], ["evalute"], ["--help", "evaluate"]]
)
def test_other_command_lines_use_the_full_app(argv: list[str]) -> None:
    assert app_for(argv) is app


@pytest.mark.parametrize("argv", [["evaluate", "--help"], ["optimize", "--help"], ["evaluate", "--rate", "x"]])
def test_same_output_as_the_full_app(argv: list[str]) -> None:
    runner = CliRunner()
    single = runner.invoke(app_for(argv), argv, prog_name="pdplan")
    full = runner.invoke(app, argv, prog_name="pdplan")
    assert (single.exit_code, single.output) == (full.exit_code, full.output)


def test_errors_name_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown option is exit 2 naming ``pdplan evaluate``, as with the full app."""
    assert run(["evaluate", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert "No such option: --no-such-flag" in err
    assert "pdplan evaluate --help" in err
