"""The shared options of `evaluate`, `simulate` and `optimize` (docs/architecture.md §4): defined once, the same in
every
command, received as one `ScenarioOverrides`; and `pdplan --version` loads none of the numeric core."""

from __future__ import annotations

import functools
import subprocess
import sys
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from pdplan.cli import app
from pdplan.cli.options import OVERRIDE_OPTIONS, RateOpt, takes_overrides
from pdplan.specs.command_line import FLAGS, ScenarioOverrides

SHARING = ("evaluate", "simulate", "optimize")


@functools.cache
def _options(command: str) -> dict[str, tuple[str, str, Any]]:
    """Flag → (field name, help line as `--help` prints it, default) of one command's options (built once per
    command: building typer's click command for the whole app takes about a second)."""
    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    ctx = click_command.make_context(command, [], resilient_parsing=True)
    return {
        opt: (param.name, param.get_help_record(ctx), param.default)
        for param in click_command.params
        for opt in param.opts
        if opt.startswith("--")
    }


def test_one_option_per_override_field() -> None:
    assert list(OVERRIDE_OPTIONS) == list(ScenarioOverrides.model_fields)


@pytest.mark.parametrize("command", SHARING)
def test_every_sharing_command_takes_every_override_under_its_vocabulary_flag(command: str) -> None:
    options = _options(command)
    for field in OVERRIDE_OPTIONS:
        assert options[FLAGS[field]][0] == field


def test_a_shared_flag_is_the_same_option_in_every_command() -> None:
    """One definition per flag: the same type, bounds, help text and default wherever it appears."""
    flags = [FLAGS[field] for field in OVERRIDE_OPTIONS] + ["--rate", "--concurrency"]
    for flag in flags:
        seen = {_options(c)[flag] for c in SHARING if flag in _options(c)}
        assert len(seen) == 1, (flag, seen)


def test_the_command_receives_the_overrides_as_one_object() -> None:
    got: list[tuple[str, ScenarioOverrides, float | None]] = []

    @takes_overrides
    def probe(name: str = "x", *, overrides: ScenarioOverrides, rate: RateOpt = None) -> None:
        got.append((name, overrides, rate))

    tiny = typer.Typer()
    tiny.command()(probe)
    args = ["--gpu", "h100-sxm", "--prefill-tp", "2", "--decode-tp", "4", "--xpyd", "2P1D", "--rate", "3"]
    result = CliRunner().invoke(tiny, args)
    assert result.exit_code == 0, result.output
    assert got == [("x", ScenarioOverrides(gpu="h100-sxm", prefill_tp=2, decode_tp=4, xpyd="2P1D"), 3.0)]


def test_version_loads_no_numeric_core() -> None:
    code = (
        "import sys; from pdplan.cli import run; assert run(['--version']) == 0; "
        "print(sorted(m for m in ('numpy', 'scipy', 'matplotlib', 'yaml', 'pdplan.search', 'pdplan.serving', "
        "'pdplan.io.catalog', 'pdplan.perf.roofline') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert proc.stdout.splitlines()[-1] == "[]", proc.stdout


def test_console_version_imports_no_cli_framework() -> None:
    """The console entry point answers ``--version`` before typer, rich and pydantic load (pdplan.__main__)."""
    code = (
        "import sys; sys.argv = ['pdplan', '--version']; from pdplan.__main__ import main; main(); "
        "print(sorted(m for m in ('typer', 'rich', 'pydantic', 'numpy', 'importlib.metadata') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    from pdplan.version import VERSION

    assert proc.stdout.splitlines() == [f"pdplan {VERSION}", "[]"], proc.stdout
