"""The vendored calibration slice, ``tests/data/calibration/`` (its README.md says what it holds and how it was made).

Every test that reads measured calibration data finds it here, never in a folder beside the clone, and fails (never
skips) when a file it needs is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CALIBRATION_DIR = Path(__file__).resolve().parents[1] / "data" / "calibration"


def calibration_file(relative: str) -> Path:
    """``tests/data/calibration/<relative>``; fails the calling test, naming the file, when it is absent."""
    path = CALIBRATION_DIR / relative
    if not path.is_file():
        pytest.fail(f"vendored calibration file missing: {path} (remake the slice: tools/make_calibration_slice.py)")
    return path
