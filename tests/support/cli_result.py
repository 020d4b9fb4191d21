"""The outcome of one in-process ``pdplan`` run (the ``cli`` fixture of tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CliResult:
    """Outcome of one in-process ``pdplan`` run."""

    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        """Non-empty stderr lines."""
        return [line for line in self.err.splitlines() if line.strip()]
