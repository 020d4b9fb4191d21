"""How a ``pdplan`` command's process starts: one BLAS thread, and the cyclic garbage collector's collections deferred
while the imports build their classes, then the start-up's objects frozen out of every later collection.

**One BLAS thread** (:func:`single_threaded_blas`, before numpy is imported). The linear algebra pdplan runs is small:
the JSQ chain's dense solve (``queueing/jsq.py``, at most 152 states), least-squares fits of a few columns, products of
vectors with small matrices. numpy's and SciPy's wheels bundle OpenBLAS, which starts one thread per core and splits
an LU factorisation above ~100 rows across them; at these sizes the threads' hand-offs cost more than the work, and on
a busy machine the waiting threads spin. Measured on the 2-core development machine (2026-12-07, load average 5–11
from other sessions): ``numpy.linalg.solve`` of a 100×100 system 3.6 ms of CPU (7.9 ms wall) with OpenBLAS's default
threads against 0.065 ms (0.19 ms) with one; the default ``optimize``, which makes ~500 such solves, 1.8–6.4 CPU s
against 0.85–0.97. The console entry point therefore sets ``OPENBLAS_NUM_THREADS=1`` unless the user has set it (a
user who wants OpenBLAS threads sets the variable); the library, imported from Python, leaves the process's threads
alone. OpenBLAS's results can depend on its thread count in the last bit (a threaded product sums its blocks in
another order): of the 14 examples' ``optimize -f json``, two differ from a 2-thread run in a few TTFT means and
quantiles, by at most 1.3·10⁻¹⁵ relative (9 ulp; ``fp8-h200``, ``mixed-fleet``), as a run on a machine with another
core count does.

A default ``pdplan evaluate`` imports some 650 modules, whose classes, functions and pydantic schemas are about
10⁵ container objects that live as long as the process. With CPython's default thresholds (700, 10, 10) the
collector runs some 150 times during those imports (``gc.callbacks``), a few of them full collections that traverse
every object made so far; none of it frees anything that matters. :func:`begin` raises the youngest generation's
threshold to :data:`START_UP_THRESHOLD_0` allocations while the modules load; :func:`end`, called when a command
starts its work (:func:`pdplan.cli.common.with_progress`), moves every object alive then into the permanent generation
(:func:`gc.freeze`: ignored by every later collection) and restores the
thresholds found at :func:`begin`, so the work itself is collected as usual and no collection re-traverses the
imported modules. A command that never calls :func:`end` (e.g. ``pdplan hardware list``) runs with the raised
gen-0 threshold: the collector still runs, every 2.5·10⁵ allocations, and memory stays bounded.

The threshold sits above what the start-up allocates, not at it: a young collection of ~10⁵ objects is not cheap.
With 10⁵ (2026-12-07 to 12-08) the default ``optimize``'s imports crossed it by a few thousand and ran one young
collection while ``pdplan.evaluation.error_band`` loaded (it showed as that module's 28 ms of "self" import time in
``python -X importtime``): 34–37 ms of CPU in the ``gc.callbacks`` (``time.process_time``, 5 runs, load average 12),
though only 29 million instructions (cachegrind): the traversal of 10⁵ objects scattered over the heap waits on
memory. 2.5·10⁵ leaves every measured command's start-up without a collection (:data:`START_UP_THRESHOLD_0`).

Measured in fresh processes (``benchmarks/command_speed.py --repeats 7``, medians, interleaved, 2026-12-07 on the
2-core machine at load average 11): the default ``evaluate`` 0.74 → 0.62 CPU s, ``optimize`` 1.23 → 1.10.
Results are unaffected: the collector frees only unreachable cycles.
"""

from __future__ import annotations

import gc
import os

START_UP_THRESHOLD_0 = 250_000
"""Gen-0 threshold while a command starts up: above the container objects its imports create, so the imports run no
collection at all (module docstring). Measured 2026-12-08 (``gc.get_count()`` when :func:`end` is called, main at
e438fd4): the default ``evaluate`` 98,809, the default ``optimize`` 103,244, ``optimize`` of chat-ppd,
agent-dualpath, chat-sessions and prfaas-h200-h20 103,234–103,322, ``simulate --rate 2`` 107,421; 250,000 leaves
2.3x room (``tests/unit/test_start_up.py`` runs a default ``optimize``'s start-up and fails on any collection)."""

BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"
"""OpenBLAS's thread count, read once when the library loads (numpy's and SciPy's wheels bundle OpenBLAS)."""

_saved: list[tuple[int, ...]] = []


def single_threaded_blas() -> None:
    """Ask OpenBLAS for one thread unless the environment names a count (module docstring). Has an effect only
    before numpy is imported: the console entry point calls it first."""
    os.environ.setdefault(BLAS_THREADS_VARIABLE, "1")


def begin() -> None:
    """Defer collections while the command's modules load (module docstring). Idempotent."""
    if not _saved:
        thresholds = gc.get_threshold()
        _saved.append(thresholds)
        gc.set_threshold(START_UP_THRESHOLD_0, *thresholds[1:])


def end() -> None:
    """Freeze the objects made so far out of later collections and restore the thresholds :func:`begin` found; a
    no-op without :func:`begin` (the library called from Python, the tests) or after a first :func:`end`."""
    if _saved:
        gc.freeze()
        gc.set_threshold(*_saved.pop())
