"""A small request trace CSV (``input_tokens,output_tokens``, optionally ``arrival_s``) for workload and replay
tests."""

from __future__ import annotations

from pathlib import Path


def write_trace(folder: Path, arrivals: list[float] | None = None) -> Path:
    """``folder/trace.csv``: four requests, or one per arrival time given, with lengths cycling over a few values."""
    path = folder / "trace.csv"
    rows = ["input_tokens,output_tokens" + (",arrival_s" if arrivals is not None else "")]
    for i in range(len(arrivals) if arrivals is not None else 4):
        cells = [str(500 + 100 * (i % 5)), str(50 + 10 * (i % 3))]
        if arrivals is not None:
            cells.append(repr(arrivals[i]))
        rows.append(",".join(cells))
    path.write_text("\n".join(rows) + "\n")
    return path
