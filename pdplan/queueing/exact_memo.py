"""Keys and freezing for the queueing layer's memos of pure functions (results looked up by the exact doubles of
their inputs, never by an object's identity)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, ParamSpec, TypeVar

import numpy as np

P = ParamSpec("P")
R = TypeVar("R")
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


def exact_key(*values: object) -> bytes:
    """``values`` by their exact doubles: floats, ints (exact up to 2^53), arrays and lists as float64 with their
    length; None, strings, tuples (their items) and dataclasses (their type and fields) each tagged, so that no two
    different inputs give the same key."""
    parts: list[bytes] = []
    for value in values:
        if value is None:
            parts.append(b"N")
        elif isinstance(value, str):
            parts += [b"S", np.int64(len(value)).tobytes(), value.encode()]
        elif isinstance(value, tuple):
            parts += [b"T", np.int64(len(value)).tobytes(), exact_key(*value)]
        elif hasattr(value, "__dataclass_fields__"):
            names = tuple(value.__dataclass_fields__)
            parts += [b"D", type(value).__qualname__.encode(), exact_key(*(getattr(value, n) for n in names))]
        else:
            x = np.ascontiguousarray(value, dtype=np.float64).ravel()
            parts += [b"A", np.int64(x.size).tobytes(), x.tobytes()]
    return b"".join(parts)


def read_only(value: object, depth: int) -> int:
    """Every numpy array ``value`` is or holds in its dataclass fields, ``depth`` levels deep, made read-only (a
    memoised result shared by later callers fails loudly if one tries to change it); returns their bytes (an array
    met twice counted twice: an upper bound)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        return int(value.nbytes)
    if depth > 0 and hasattr(value, "__dataclass_fields__"):
        return sum(read_only(getattr(value, name), depth - 1) for name in value.__dataclass_fields__)
    return 0


class ValueMemo(Generic[P, R]):
    """A pure function memoised on the exact doubles of its arguments (:func:`exact_key`; keyword order does not
    matter, an argument left to its default and one passed are different keys). Results are made read-only
    (:func:`read_only`, 3 levels deep) and a hit is the object the first call built. At most ``entries`` results and
    ``max_bytes`` of their arrays are kept, emptied past either; a result above an eighth of ``max_bytes`` is not
    kept. ``__wrapped__``: the function itself."""

    def __init__(self, fn: Callable[P, R], entries: int, max_bytes: int) -> None:
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__
        self.entries, self.max_bytes = entries, max_bytes
        self.held: dict[bytes, R] = {}
        self.held_bytes = 0
        forgets(self.clear)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        key = exact_key(args, tuple(sorted(kwargs.items())))
        hit = self.held.get(key)
        if hit is not None:
            return hit
        out = self.__wrapped__(*args, **kwargs)
        size = read_only(out, depth=3)
        if size <= self.max_bytes // 8:
            if len(self.held) >= self.entries or self.held_bytes + size > self.max_bytes:
                self.clear()
            self.held[key] = out
            self.held_bytes += size
        return out

    def clear(self) -> None:
        """Forget every result."""
        self.held.clear()
        self.held_bytes = 0


def value_memo(entries: int, max_bytes: int) -> Callable[[Callable[P, R]], ValueMemo[P, R]]:
    """Decorator: :class:`ValueMemo` of the function (registered with :func:`clear_all`)."""

    def wrap(fn: Callable[P, R]) -> ValueMemo[P, R]:
        return ValueMemo(fn, entries, max_bytes)

    return wrap
