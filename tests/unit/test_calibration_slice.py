"""The vendored calibration slice (tests/data/calibration/) is whole: every file MANIFEST.csv lists is there with the
rows it lists, every data set carries its licence, and the slice stays small enough to vendor."""

from __future__ import annotations

import csv

from support.calibration import CALIBRATION_DIR, calibration_file

MAX_SLICE_BYTES = 5_000_000


def _manifest() -> list[dict[str, str]]:
    with calibration_file("MANIFEST.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_every_listed_file_holds_the_rows_listed() -> None:
    for entry in _manifest():
        lines = calibration_file(entry["path"]).read_bytes().splitlines()
        assert len(lines) - 1 == int(entry["kept_rows"]) <= int(entry["source_rows"]), entry["path"]


def test_every_data_set_carries_its_licence() -> None:
    sets = {entry["path"].split("/")[0] for entry in _manifest()}
    assert sets
    for name in sets:
        assert "Apache License" in calibration_file(f"{name}/LICENSE").read_text(encoding="utf-8")


def test_slice_stays_small() -> None:
    total = sum(p.stat().st_size for p in CALIBRATION_DIR.rglob("*") if p.is_file())
    assert total < MAX_SLICE_BYTES
