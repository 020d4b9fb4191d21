"""docs/json_keys.md names every key `optimize` and `evaluate` write (scripts read them: a new key is documented
or this fails). Keys are read from the golden optimize reports and from evaluate runs of the small scenario."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "json_keys.md").read_text(encoding="utf-8")
SMALL = ROOT / "tests" / "data" / "small_scenario.yaml"
GOLDEN = ROOT / "tests" / "golden" / "examples"
Cli = Callable[..., Any]  # the `cli` fixture of tests/conftest.py


def _keys(doc: dict[str, Any], nested: tuple[str, ...]) -> Iterator[str]:
    """Top-level keys, and the keys of the named nested objects."""
    yield from doc
    for name in nested:
        if isinstance(doc.get(name), dict):
            yield from doc[name]


def _undocumented(keys: Iterator[str]) -> set[str]:
    return {k for k in keys if f"`{k}`" not in DOC}


def test_optimize_keys_are_documented() -> None:
    missing: set[str] = set()
    for name in ("default.json", "deepseek-v3-wide-ep.json", "prfaas-h200-h20.json"):
        report = json.loads((GOLDEN / name).read_text(encoding="utf-8"))
        missing |= _undocumented(_keys(report, ()))
        for plan in report["plans"]:
            missing |= _undocumented(_keys(plan, ("prefill", "prfaas", "expected_error")))
    assert not missing, f"docs/json_keys.md does not name: {sorted(missing)}"


def test_evaluate_keys_are_documented(cli: Cli) -> None:
    missing: set[str] = set()
    for extra in (("--rate", "1"), ("--concurrency", "4")):
        result = cli("evaluate", SMALL, *extra, "--format", "json")
        assert result.code == 0, result.err
        missing |= _undocumented(_keys(json.loads(result.out), ("closed_loop", "engine", "expected_error")))
    assert not missing, f"docs/json_keys.md does not name: {sorted(missing)}"
