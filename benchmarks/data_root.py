"""Where the benchmark scripts find measured calibration data: one resolver for all of them.

A path is named relative to the calibration data folder, whose layout is the data sets' own
(``aiconfigurator-kernels/<gpu>/gemm.csv``, ``aiconfigurator-moe/<gpu>/moe_vllm.csv``,
``aiconfigurator-silicon/h100_sxm.csv``, ``vidur-profiling/compute/...``), and found in

1. the folder named by the environment variable ``PDPLAN_CALIBRATION_DIR`` (the full AIConfigurator 0.12.0 kernel,
   MoE and end-to-end data and Vidur's profiling, laid out as above), else
2. the vendored slice ``tests/data/calibration/`` where it holds that file whole (its ``MANIFEST.csv``: every source
   row kept; so the end-to-end H100 sample, not the strided kernel tables, whose scores would differ), else
3. nowhere: the script stops with a message saying to set ``PDPLAN_CALIBRATION_DIR``.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

ENV = "PDPLAN_CALIBRATION_DIR"
REPO = Path(__file__).resolve().parents[1]
SLICE = REPO / "tests" / "data" / "calibration"

KERNEL_DATA = "aiconfigurator-kernels"
MOE_DATA = "aiconfigurator-moe"
SILICON_H100 = "aiconfigurator-silicon/h100_sxm.csv"
SILICON_H100_NAME = f"AIConfigurator 0.12.0 end-to-end sample, H100 rows (`{SILICON_H100}`)"
"""The measured serving runs the engine profiles are fitted and checked on, and how reports name them."""


def whole_in_slice() -> set[str]:
    """Paths (relative) of the files the vendored slice holds with every row of the source."""
    manifest = SLICE / "MANIFEST.csv"
    if not manifest.is_file():
        return set()
    with manifest.open(newline="") as fh:
        return {r["path"] for r in csv.DictReader(fh) if r["kept_rows"] == r["source_rows"]}


def calibration_path(relative: str) -> Path:
    """The file or folder ``relative`` of the calibration data (rules in the module docstring); SystemExit with the
    reason when it cannot be found."""
    root = os.environ.get(ENV)
    if root:
        path = Path(root).expanduser() / relative
        if not path.exists():
            raise SystemExit(f"{ENV}={root} has no {relative}: point it at the calibration data folder")
        return path
    if relative in whole_in_slice():
        return SLICE / relative
    raise SystemExit(
        f"{relative}: not in the vendored slice tests/data/calibration/ (only a few files, or strided rows). Set "
        f"{ENV} to the folder holding the AIConfigurator 0.12.0 kernel / MoE / end-to-end data and Vidur's "
        "profiling (aiconfigurator-kernels/, aiconfigurator-moe/, aiconfigurator-silicon/, vidur-profiling/)."
    )
