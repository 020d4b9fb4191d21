"""The public API (``import pdplan``), the README's library example, and validation in a fresh process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pdplan

ROOT = Path(__file__).parents[2]


def test_every_public_name_resolves() -> None:
    for name in pdplan.__all__:
        assert getattr(pdplan, name) is not None, name


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pdplan.nope  # noqa: B018


def test_entry_points_are_the_library_functions() -> None:
    from pdplan.evaluation.evaluate import evaluate
    from pdplan.io.scenario import load_scenario
    from pdplan.search.optimize import optimize
    from pdplan.sim.compare import simulate_scenario

    assert pdplan.load_scenario is load_scenario
    assert pdplan.optimize is optimize
    assert pdplan.evaluate is evaluate
    assert pdplan.simulate is simulate_scenario


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


def test_validate_files_says_ok_in_a_fresh_process() -> None:
    """No import-time registry: the scenario kind is known without importing pdplan.specs.scenario first."""
    out = _fresh(
        "import json; from pdplan import validate_files;"
        "r = validate_files(['examples/default.yaml']);"
        "print(json.dumps([r.ok, r.files[0].kind]))"
    )
    assert json.loads(out) == [True, "scenario"]


def test_import_pdplan_loads_no_numeric_code() -> None:
    """``import pdplan`` (and so ``pdplan --version``) stays cheap: scipy and the models load on first use."""
    out = _fresh("import sys, pdplan; print([m for m in ('scipy', 'pdplan.serving') if m in sys.modules])")
    assert out.strip() == "[]"


def test_the_readme_library_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Library use", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    assert "from pdplan import" in code.group(1)
    monkeypatch.chdir(ROOT)
    exec(compile(code.group(1), "README.md", "exec"), {})
    label_line, eval_line = capsys.readouterr().out.strip().splitlines()
    assert label_line.startswith("10P2D h100-sxm TP2 / h100-sxm TP4 request 1.94")  # README: 1.94 req/s per GPU
    goodput, ttft_p90 = (float(v) for v in eval_line.split())
    assert goodput > 10.0
    assert 0.0 < ttft_p90 < 2.0
