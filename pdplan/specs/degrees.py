"""Parallel degrees typed on the command line: ``"8"`` or, for a search, ``"8,16,32"`` (``--ep``, ``--dp``...)."""

from __future__ import annotations

from pdplan.errors import SpecError


def parse_degrees(text: str, flag_word: str) -> list[int]:
    """``"8,16"`` → ``[8, 16]``; SpecError naming ``flag_word`` for anything but positive integers."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        degrees = [int(part) for part in parts]
    except ValueError:
        degrees = []
    if not degrees or any(d < 1 for d in degrees):
        raise SpecError(f"expected positive integers such as 8 or 8,16,32, got {text!r}", field=flag_word)
    return degrees


def parse_degree(text: str, flag_word: str) -> int:
    """One degree (``evaluate`` fixes the deployment): ``"8"`` → 8; a list is a SpecError."""
    degrees = parse_degrees(text, flag_word)
    if len(degrees) != 1:
        raise SpecError(f"evaluate takes one value, got {text!r} (lists are for optimize)", field=flag_word)
    return degrees[0]
