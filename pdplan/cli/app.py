"""The ``pdplan`` command line: a thin typer view over the library.

Exit codes (documented in ``pdplan --help``): 0 success, 1 a genuine bug (traceback), 2 bad input (one line
naming the file, field or flag), 3 no feasible plan (one line naming the binding constraint).
Results go to stdout; progress, warnings and errors to stderr.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Annotated

import typer
from typer._click import exceptions as click_exceptions

from pdplan.cli.catalog import hardware_app, models_app, validate
from pdplan.cli.common import stderr_console
from pdplan.cli.compare import compare_command
from pdplan.cli.export import export_command
from pdplan.cli.optimize import optimize_command
from pdplan.cli.perf import calibrate, roofline
from pdplan.cli.serving import evaluate_command, transfer_command
from pdplan.cli.simulate import simulate_command
from pdplan.cli.sweep import sweep_command
from pdplan.errors import EXIT_BAD_INPUT, PdplanError
from pdplan.version import VERSION as __version__

HELP = """pdplan — capacity planner for prefill/decode-disaggregated LLM serving.

Exit codes: 0 success · 1 bug · 2 bad input · 3 no feasible plan.

Example: pdplan hardware list --format json
"""

_COMMANDS: dict[str, Callable[..., object]] = {
    "optimize": optimize_command,
    "validate": validate,
    "evaluate": evaluate_command,
    "simulate": simulate_command,
    "transfer": transfer_command,
    "roofline": roofline,
    "calibrate": calibrate,
    "export": export_command,
    "sweep": sweep_command,
    "compare": compare_command,
}


def _typer() -> typer.Typer:
    """An app with pdplan's settings and no commands yet (its root options come from :func:`_root`, registered as
    its callback)."""
    return typer.Typer(
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


app = _typer()
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
for _name, _command in _COMMANDS.items():
    app.command(_name)(_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pdplan {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """pdplan — capacity planner for prefill/decode-disaggregated LLM serving."""


def app_for(argv: list[str]) -> typer.Typer:
    """The app that runs ``argv``: where it starts with the name of a top-level command, an app of that command alone
    (with the root options), since typer builds the click parameters of every registered command before it dispatches
    (about 20 ms of CPU for all of them, 2 ms for ``evaluate``'s; issue #27 start-up); otherwise :data:`app`. The
    command's parsing, help, errors and exit codes are those of :data:`app`'s, whose usage line names it the same way
    (``pdplan evaluate``)."""
    if not argv or argv[0] not in _COMMANDS:
        return app
    single = _typer()
    single.callback()(_root)
    single.command(argv[0])(_COMMANDS[argv[0]])
    return single


def run(argv: list[str] | None = None) -> int:
    """Run the app on ``argv`` (default: the process's arguments) and return the exit code; errors are mapped here
    and only here."""
    args = sys.argv[1:] if argv is None else argv
    try:
        result = app_for(args)(args=args, standalone_mode=False, prog_name="pdplan")
    except PdplanError as err:
        _print_error(str(err))
        return err.exit_code
    except click_exceptions.NoArgsIsHelpError as err:
        typer.echo(err.format_message())
        return 0
    except click_exceptions.UsageError as err:
        hint = f" (see '{err.ctx.command_path} --help')" if err.ctx is not None else ""
        _print_error(f"{err.format_message()}{hint}")
        return EXIT_BAD_INPUT
    except click_exceptions.ClickException as err:
        _print_error(err.format_message())
        return EXIT_BAD_INPUT
    except (typer.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort inside a command; outside one, it is raw
        _print_error("aborted")
        return 130
    except OSError as err:  # the environment refused a read or write no check foresaw: one line, not a traceback
        where = f"{err.filename}: " if err.filename else ""
        _print_error(f"{where}{err.strerror or err}")
        return EXIT_BAD_INPUT
    if result == 130:  # typer returns 130 for Ctrl-C inside a command, silently
        _print_error("aborted")
    return result if isinstance(result, int) else 0


def _print_error(message: str) -> None:
    one_line = " ".join(message.replace("Value error, ", "").split())
    stderr_console.print(f"error: {one_line}", highlight=False, markup=False, soft_wrap=True)


def main() -> None:
    """Console entry point (``pdplan``): the process keeps freed array memory (:mod:`pdplan.cli.allocator`)."""
    from pdplan.cli.allocator import keep_freed_memory

    keep_freed_memory()
    signal.signal(signal.SIGTERM, _terminated)
    sys.exit(run())


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM ends the command as Ctrl-C does but with the shell's 128 + 15: raised as SystemExit, it unwinds through
    :func:`pdplan.report.render.write_atomic`, which removes its temporary file (the default action would kill the
    process with the file still there)."""
    del frame
    raise SystemExit(128 + signum)
