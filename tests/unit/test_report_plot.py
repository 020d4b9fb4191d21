"""pdplan.report.plot: the optional matplotlib figure (the test extra installs matplotlib, so every run checks it), and
its link in the optimise Markdown (relative to the report)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.plan_fixture import minimal_result, plan_result

from pdplan.errors import SpecError
from pdplan.report import write_plot

Cli = Callable[..., Any]
SMALL = Path(__file__).parents[1] / "data" / "small_scenario.yaml"


def test_missing_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    with pytest.raises(SpecError, match=r"^--plot: --plot needs matplotlib: pip install 'pdplan\[plot\]'$") as err:
        write_plot(plan_result(), tmp_path / "plan.png")
    assert err.value.field == "--plot"
    assert not (tmp_path / "plan.png").exists()


@pytest.mark.parametrize("name", ["plan.pdf", "plan"])
def test_unsupported_suffix(tmp_path: Path, name: str) -> None:
    with pytest.raises(SpecError, match=r"\.png or \.svg"):
        write_plot(plan_result(), tmp_path / name)


@pytest.mark.slow
def test_svg_is_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    write_plot(plan_result(), first)
    write_plot(plan_result(), str(second))
    data = first.read_bytes()
    assert data == second.read_bytes()
    assert data.startswith(b"<?xml")
    assert b"<dc:date>" not in data
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_png_and_edge_cases(tmp_path: Path) -> None:
    target = tmp_path / "plan.PNG"
    write_plot(plan_result(), target)
    assert target.read_bytes().startswith(b"\x89PNG")
    write_plot(minimal_result(), tmp_path / "minimal.svg")  # no baseline, no Pareto, no rate curve
    assert (tmp_path / "minimal.svg").stat().st_size > 0


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="output folder does not exist"):
        write_plot(plan_result(), tmp_path / "nope" / "plan.svg")


@pytest.mark.slow
def test_markdown_embeds_the_plot_relative_to_the_report(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    report, chart = tmp_path / "reports" / "review.md", tmp_path / "charts" / "front.svg"
    chart.parent.mkdir()
    result = cli("optimize", SMALL, "--plot", chart, "-o", report)
    assert result.code == 0, result.err
    assert "![Pareto front and the recommended plan's latency vs rate](../charts/front.svg)" in report.read_text()


@pytest.mark.xdist_group("optimize-small-markdown")
def test_markdown_without_plot_has_no_chart(cli_shared: Cli) -> None:
    assert "## Chart" not in cli_shared("optimize", SMALL, "--format", "markdown").out  # shared: test_optimize_cli.py
