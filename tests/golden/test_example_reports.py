"""Golden capacity-review reports for shipped examples (reviewed by a person, then frozen).

Markdown is compared byte for byte (numbers are printed to 4 significant digits). JSON and CSV carry full-precision
floats, which can move in the last bits with another numpy/scipy build, so their numbers are compared to a relative
1e-6 and everything else exactly. The search time is zeroed first (it is the only field that changes run to run).
Regenerate after an intended change: ``pytest tests/golden --update-golden``, then review the diff.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.optimized import Optimized

from pdplan.report import render_optimize
from pdplan.search.plans import PlanResult

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("default", "opt-13b-a100-distserve", "deepseek-v3-wide-ep", "prfaas-h200-h20", "prfaas-h200-h100")
pytestmark = pytest.mark.xdist_group("optimized")  # the optimisations are shared with the CLI-equals-library tests


@pytest.fixture(scope="module", params=EXAMPLES)
def example(request: pytest.FixtureRequest, optimized: Optimized) -> tuple[str, PlanResult]:
    """An example's ``optimize`` result, search time zeroed (tests/support/optimized.py)."""
    return request.param, optimized(request.param)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, int | float)
            and isinstance(b, int | float)
            and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _cell(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _check(path: Path, text: str, update: bool, same: Callable[[str, str], bool]) -> None:
    if update:
        path.write_text(text, encoding="utf-8", newline="\n")
        return
    if not path.exists():
        pytest.fail(f"missing golden file {path}; create it with: pytest tests/golden --update-golden")
    assert same(path.read_text(encoding="utf-8"), text), (
        f"{path.name} differs from its golden file; if intended: pytest tests/golden --update-golden"
    )


def test_markdown(example: tuple[str, PlanResult], request: pytest.FixtureRequest) -> None:
    name, result = example
    text = render_optimize(result, "markdown")
    assert isinstance(text, str)
    _check(
        ROOT / "tests" / "golden" / "examples" / f"{name}.md",
        text,
        bool(request.config.getoption("--update-golden")),
        lambda a, b: a == b,
    )


def test_json(example: tuple[str, PlanResult], request: pytest.FixtureRequest) -> None:
    name, result = example
    text = render_optimize(result, "json")
    assert isinstance(text, str)
    _check(
        ROOT / "tests" / "golden" / "examples" / f"{name}.json",
        text,
        bool(request.config.getoption("--update-golden")),
        lambda a, b: _close(json.loads(a), json.loads(b)),
    )


def test_csv(example: tuple[str, PlanResult], request: pytest.FixtureRequest) -> None:
    name, result = example
    text = render_optimize(result, "csv")
    assert isinstance(text, str)

    def rows(t: str) -> list[list[Any]]:
        return [[_cell(c) for c in row] for row in csv.reader(io.StringIO(t))]

    _check(
        ROOT / "tests" / "golden" / "examples" / f"{name}.csv",
        text,
        bool(request.config.getoption("--update-golden")),
        lambda a, b: _close(rows(a), rows(b)),
    )
