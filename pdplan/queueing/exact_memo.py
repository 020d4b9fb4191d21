"""Keys and freezing for the queueing layer's memos of pure functions (results looked up by the exact doubles of
their inputs, never by an object's identity)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_CLEARS: list[Callable[[], None]] = []


def forgets(clear: Callable[[], None]) -> Callable[[], None]:
    """Register a memo's ``clear`` with :func:`clear_all` (a decorator; returns ``clear``)."""
    _CLEARS.append(clear)
    return clear


def clear_all() -> None:
    """Empty every queueing memo registered with :func:`forgets` (a search timed from scratch: benchmarks/; the
    memos are keyed by value, so nothing in them goes stale)."""
    for clear in _CLEARS:
        clear()


def exact_key(*groups: tuple[object, ...]) -> bytes:
    """Every value of ``groups`` (floats, ints, arrays, None) by its float64 doubles, each preceded by a tag and its
    length, so that no two different input lists give the same key (ints up to 2^53 are exact as doubles)."""
    parts: list[bytes] = []
    for group in groups:
        for value in group:
            if value is None:
                parts.append(b"N")
                continue
            x = np.ascontiguousarray(value, dtype=np.float64).ravel()
            parts += [b"A", np.int64(x.size).tobytes(), x.tobytes()]
    return b"".join(parts)


def read_only(value: object, depth: int) -> None:
    """Every numpy array ``value`` is or holds in its dataclass fields, ``depth`` levels deep, made read-only (a
    memoised result shared by later callers fails loudly if one tries to change it)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif depth > 0 and hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            read_only(getattr(value, name), depth - 1)
