"""The session laws of one example alone: the turns' prompt laws on their token grid, the turn bins and both history
grids' binnings (the xPyD prefill side, which does not hold the outputs, and the colocated HBM, which does), as one
``optimize`` computes them once each and every model reads them (docs/accuracy.md §7.17).

Run under an instruction counter, with and without the laws, and take the difference (the imports and the resolve are
the same in both)::

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python benchmarks/session_laws_cost.py examples/agent-dualpath.yaml [--without]

It prints the grid's shape and the CPU seconds of the laws (with ``--without``: 0, nothing computed).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.serving import prefix_cache, resolve


def main() -> None:
    res = resolve(load_scenario(sys.argv[1]), open_catalog())
    spec = res.reuse.sessions
    if spec is None:
        raise SystemExit(f"{sys.argv[1]}: not a sessions workload")
    reach = np.cumsum(prefix_cache._turns_pmf(spec)[::-1])[::-1]
    turns = max(1, int(np.count_nonzero(reach > prefix_cache.MIN_TURN_MASS)))  # as cache_classes cuts them
    edges = prefix_cache.bin_edges(res.lengths.input_tokens)
    started = time.process_time()
    if "--without" not in sys.argv:
        text = spec.model_dump_json()
        prefix_cache.turn_bins(spec, turns, edges)
        for held in (False, True):
            prefix_cache._hit_laws_cached(text, turns, tuple(float(e) for e in edges), held)
        cells = prefix_cache._turn_laws(text, turns)[1].shape[1]
        print(f"{turns} turns, {edges.size - 1} bins, {cells} grid cells")
    print(f"session laws: {time.process_time() - started:.3f} s CPU")


if __name__ == "__main__":
    main()
