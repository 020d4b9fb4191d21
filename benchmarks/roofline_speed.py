"""Speed of the vectorised roofline: 100,000 (batch, tokens) points in one call (issue target: < 50 ms), at one TP
degree (the common call) and with a TP degree per point.

Run: ``python benchmarks/roofline_speed.py``. Prints the best of 5 runs per phase, first with the C library's default
memory policy, then after :func:`pdplan.cli.allocator.keep_freed_memory` (what the ``pdplan`` CLI sets; most of the
difference is page faults on fresh temporaries). docs/accuracy.md records it.
"""

from __future__ import annotations

import numpy as np
from timing import best_of

from pdplan.cli.allocator import keep_freed_memory
from pdplan.io.catalog import open_catalog
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.perf.roofline import phase_time

N = 100_000


def timings() -> list[tuple[str, str, float, float]]:
    catalog = open_catalog()
    gpu = catalog.gpu("h100-sxm")
    table = load_kernel_table("h100-sxm")
    rng = np.random.default_rng(0)
    batch = rng.integers(1, 256, N).astype(float)
    tokens = rng.integers(1, 32768, N).astype(float)
    mixed_tp = rng.choice([1.0, 2.0, 4.0, 8.0], N)
    rows = []
    for name in ("llama-3.1-70b", "mixtral-8x7b", "deepseek-v3"):
        model = catalog.model(name)
        for phase in ("prefill", "decode"):
            one = best_of(
                lambda: phase_time(
                    model,  # noqa: B023
                    gpu,
                    table,
                    phase=phase,  # noqa: B023
                    batch=batch,
                    tokens=tokens,
                    tp=4,
                    detail=False,
                )
            )
            mixed = best_of(
                lambda: phase_time(
                    model,  # noqa: B023
                    gpu,
                    table,
                    phase=phase,  # noqa: B023
                    batch=batch,
                    tokens=tokens,
                    tp=mixed_tp,
                    detail=False,
                )
            )
            rows.append((name, phase, one, mixed))
    return rows


def main() -> None:
    default = timings()
    kept = keep_freed_memory()
    tuned = timings() if kept else default
    print(
        "| model | phase | points | one TP (ms) | TP mixed per point (ms) | one TP, freed memory kept (ms) "
        "| TP mixed, freed memory kept (ms) |\n|---|---|---|---|---|---|---|"
    )
    for (name, phase, one, mixed), (_, _, one_k, mixed_k) in zip(default, tuned, strict=True):
        print(
            f"| {name} | {phase} | {N:,} | {one * 1e3:.1f} | {mixed * 1e3:.1f} | {one_k * 1e3:.1f} | "
            f"{mixed_k * 1e3:.1f} |"
        )
    if not kept:
        print("\n(keep_freed_memory() is glibc-only: the last two columns repeat the first two here)")


if __name__ == "__main__":
    main()
