"""Keep freed array memory in the process instead of handing it back to the OS (glibc only, opt-in).

Pricing 100,000 candidates allocates and frees hundreds of 0.8 MB temporaries per call. glibc's default
policy trims the heap top and maps large blocks afresh, so each new temporary page-faults its memory
back in: measured on the benchmark machine, that is 60-80 % of a vectorised roofline call
(``benchmarks/roofline_speed.py`` prints both). Raising the trim and mmap thresholds (``mallopt``,
the same as the ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_MMAP_THRESHOLD_`` environment variables) keeps
up to ``trim_bytes`` of freed memory for reuse. The CLI calls :func:`keep_freed_memory` at start-up; a
library user may call it once. Elsewhere (macOS, Windows, musl) it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX_BYTES = 32 * 1024 * 1024
"""glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX = 4 MiB · sizeof(long))."""


def keep_freed_memory(trim_bytes: int = 512 * 1024 * 1024) -> bool:
    """Ask glibc to keep up to ``trim_bytes`` of freed heap and to serve blocks below 32 MiB from it.

    Returns True when applied (Linux with glibc), False otherwise. Process-wide and idempotent.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:  # the running process's own symbols: glibc's mallopt, without find_library's ldconfig subprocess
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # e.g. musl has no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_TRIM_THRESHOLD, int(trim_bytes)) and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX_BYTES))
