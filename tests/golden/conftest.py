"""Golden-file comparison: ``golden(name, text)`` checks ``tests/golden/<name>`` exactly.

Regenerate after an intended report change with ``pytest tests/golden --update-golden`` and review the diff.
pytest reads this file's option only when ``tests/golden`` (or a file in it) is on the command line; a top-level
``tests/conftest.py`` may register the same option too (the duplicate is tolerated here).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parent


def pytest_addoption(parser: pytest.Parser) -> None:
    with contextlib.suppress(ValueError):  # already registered by a top-level conftest
        parser.addoption(
            "--update-golden",
            action="store_true",
            default=False,
            help="Rewrite tests/golden/* files from the current output instead of comparing.",
        )


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """Compare ``text`` with the golden file ``name`` (or rewrite it with ``--update-golden``)."""
    update = bool(request.config.getoption("--update-golden"))

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if update:
            path.write_text(text, encoding="utf-8", newline="\n")
            return
        if not path.exists():
            pytest.fail(f"missing golden file {path}; create it with: pytest tests/golden --update-golden")
        expected = path.read_text(encoding="utf-8")
        hint = "if intended, regenerate with: pytest tests/golden --update-golden"
        assert text == expected, f"{name} differs from its golden file; {hint}"

    return check
