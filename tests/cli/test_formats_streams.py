"""Output formats and streams of every command: the format from ``-o``'s suffix, early checks of output paths, warnings
and progress on stderr, ``-h``, case-insensitive choices, bare SLO numbers, plans tables in 100 columns."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pdplan.errors import SpecError

Cli = Callable[..., Any]
SMALL = Path(__file__).parents[1] / "data" / "small_scenario.yaml"


# --- -o FILE without --format ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("gpus.json", lambda text: isinstance(json.loads(text), list)),
        ("gpus.csv", lambda text: text.splitlines()[0].startswith("name,")),
        ("gpus.md", lambda text: text.startswith("| name |")),
        ("gpus.MD", lambda text: text.startswith("| name |")),
        ("gpus.txt", lambda text: "┃" in text or "│" in text),
    ],
)
def test_output_suffix_picks_the_format(cli: Cli, tmp_path: Path, name: str, check: Callable[[str], bool]) -> None:
    target = tmp_path / name
    result = cli("hardware", "list", "-o", target)
    assert result.code == 0, result.err
    assert check(target.read_text())


def test_explicit_format_wins_over_the_suffix(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "gpus.json"
    assert cli("hardware", "list", "--format", "csv", "-o", target).code == 0
    assert target.read_text().startswith("name,")


def test_evaluate_output_suffix_json(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "ev.json"
    assert cli("evaluate", SMALL, "-o", target).code == 0
    assert "goodput_rps" in json.loads(target.read_text())


# --- checks before a long search -----------------------------------------------------------------------------------


def _no_search(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the search ran before the output path was checked")

    monkeypatch.setattr("pdplan.search.optimize.optimize", boom)


def test_missing_output_folder_fails_before_the_search(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_search(monkeypatch)
    result = cli("optimize", SMALL, "-o", tmp_path / "missing" / "report.md")
    assert result.code == 2
    assert "does not exist" in result.err
    assert "--output" in result.err


def test_bad_plot_suffix_fails_before_the_search(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_search(monkeypatch)
    result = cli("optimize", SMALL, "--plot", tmp_path / "chart.jpg")
    assert result.code == 2
    assert "unsupported plot file type" in result.err


def test_unwritable_output_folder_is_bad_input(tmp_path: Path) -> None:
    from pdplan.cli.common import check_writable_folder

    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        import os

        if os.access(folder, os.W_OK):  # running as root: permissions do not apply
            pytest.skip("permissions are not enforced for this user")
        with pytest.raises(SpecError, match="not writable"):
            check_writable_folder(folder / "out.json", field="--output")
    finally:
        folder.chmod(0o700)


def test_simulate_checks_the_output_folder_first(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("simulated before checking -o")

    monkeypatch.setattr("pdplan.sim.compare.simulate_scenario", boom)
    result = cli("simulate", SMALL, "--rate", "1", "-o", tmp_path / "nope" / "sim.json")
    assert result.code == 2


# --- streams -----------------------------------------------------------------------------------------------------


def test_optimize_table_warnings_go_to_stderr(cli: Cli) -> None:
    result = cli("optimize", "--gpu", "h20,h100-sxm", "--objective", "cost", "--rate", "20")  # h20: no price
    assert result.code == 0, result.err
    assert "warning:" not in result.out
    assert "warning:" in result.err


def _terminal_stderr(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    import pdplan.cli.common as common

    buffer = io.StringIO()
    monkeypatch.setattr(common, "stderr_console", Console(file=buffer, force_terminal=True, width=100))
    return buffer


def test_simulate_shows_progress_on_a_terminal(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = _terminal_stderr(monkeypatch)
    result = cli("simulate", SMALL, "--rate", "1", "--requests", "300", "--format", "json")
    assert result.code == 0
    json.loads(result.out)  # stdout stays clean
    assert "simulating" in buffer.getvalue()


def test_no_progress_when_stderr_is_not_a_terminal(cli: Cli) -> None:
    result = cli("simulate", SMALL, "--rate", "1", "--requests", "300", "--format", "json")
    assert result.code == 0
    assert "simulating" not in result.err


def test_simulate_names_its_stages() -> None:
    from pdplan.io.scenario import load_scenario
    from pdplan.sim.compare import simulate_scenario

    stages: list[str] = []
    simulate_scenario(load_scenario(SMALL), rate=1.0, n_requests=300, goodput=True, stage=stages.append)
    assert stages[0] == "closed form"
    assert any(s.startswith("simulating 300 requests") for s in stages)
    assert stages[-1].startswith("simulated goodput")


# --- -h, case, bare numbers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [("-h",), ("optimize", "-h"), ("hardware", "list", "-h")])
def test_dash_h_is_help(cli: Cli, argv: tuple[str, ...]) -> None:
    result = cli(*argv)
    assert result.code == 0
    assert "Usage:" in result.out


def test_choices_are_case_insensitive(cli: Cli) -> None:
    upper = cli("evaluate", SMALL, "--dtype", "FP8", "--kv-dtype", "FP8", "--granularity", "Layer", "--format", "json")
    lower = cli("evaluate", SMALL, "--dtype", "fp8", "--kv-dtype", "fp8", "--granularity", "layer", "--format", "json")
    assert upper.code == 0, upper.err
    assert json.loads(upper.out)["goodput_rps"] == json.loads(lower.out)["goodput_rps"]


def test_roofline_choices_are_case_insensitive(cli: Cli) -> None:
    argv = ("roofline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "8", "--tokens", "512")
    upper = cli(*argv, "--phase", "DECODE", "--dtype", "FP8", "--format", "json")
    assert upper.code == 0, upper.err
    lower = cli(*argv, "--phase", "decode", "--dtype", "fp8", "--format", "json")
    assert json.loads(upper.out)["time_s"] == json.loads(lower.out)["time_s"]


@pytest.mark.parametrize(
    ("flag", "value", "warned"),
    [("--tpot-slo", "100", True), ("--tpot-slo", "100ms", False), ("--tpot-slo", "0.05", False),
     ("--ttft-slo", "2000", True), ("--ttft-slo", "2", False)],
)  # fmt: skip
def test_implausible_bare_slo_numbers_warn(cli: Cli, flag: str, value: str, warned: bool) -> None:
    result = cli("evaluate", SMALL, flag, value, "--format", "json")
    assert result.code == 0, result.err
    assert (f"{flag} {value} has no unit" in result.err) is warned


# --- 100 columns -------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("example", ["default.yaml", "h100-prefill-l40s-decode.yaml"])
def test_plans_table_fits_100_columns_without_splitting_words(example: str) -> None:
    from pdplan.io.catalog import open_catalog
    from pdplan.io.scenario import load_scenario
    from pdplan.report.table import optimize_renderable
    from pdplan.search.optimize import optimize

    scenario = load_scenario(Path(__file__).parents[2] / "examples" / example)
    result = optimize(scenario, catalog=open_catalog(), top=5)
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(optimize_renderable(result, 5))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(len(line) for line in text.splitlines()) <= 100
    words = {w for plan in (*result.plans, result.baseline) if plan is not None for w in plan.label.split()}
    words |= {w for plan in result.plans for w in plan.binding_constraint.split()}
    cells = {w for line in text.splitlines() for w in line.replace("│", " ").replace("┃", " ").split()}
    assert words <= cells, f"split across lines: {sorted(words - cells)}"
    for header in ("$/h", "E2E", "ITL", "goodput", "binding"):  # nothing dropped: the metrics go to a second table
        assert header in cells
    assert text.count("$/h") >= 2, "every plans table keeps its $/h column"
