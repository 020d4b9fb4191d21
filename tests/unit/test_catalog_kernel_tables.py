"""Kernel tables for GPUs of the user's own: from a --hardware-db folder's kernel_tables/, or borrowed."""

from __future__ import annotations

from pathlib import Path

import yaml

from pdplan.io.catalog import open_catalog

ROOT = Path(__file__).parents[2]


def _own_gpu(db: Path, name: str, source: str = "h100-sxm", bandwidth: str | None = None) -> None:
    data = yaml.safe_load((ROOT / "hardware_db" / "gpus" / f"{source}.yaml").read_text())
    data["name"] = name
    if bandwidth is not None:
        data["memory_bytes_per_s"] = bandwidth
    (db / "gpus").mkdir(parents=True, exist_ok=True)
    (db / "gpus" / f"{name}.yaml").write_text(yaml.safe_dump(data))


def test_an_uncatalogued_gpu_borrows_the_nearest_measured_table(tmp_path: Path) -> None:
    """``--hardware-db mydb --gpu h100-nvl`` used to fail with "unknown kernel table 'h100-nvl'"."""
    _own_gpu(tmp_path, "h100-nvl", bandwidth="3.9 TB/s")
    table = open_catalog([tmp_path]).kernel_table("h100-nvl")
    assert table.gpu == "h100-nvl"
    assert not table.calibrated
    assert table.derived_from == "h100-sxm"  # hopper, calibrated, 3.35 TB/s is nearer 3.9 than h200's 4.8
    assert "borrowed" in table.sources


def test_a_high_bandwidth_hopper_borrows_from_h200(tmp_path: Path) -> None:
    _own_gpu(tmp_path, "h200-nvl", bandwidth="4.8 TB/s")
    assert open_catalog([tmp_path]).kernel_table("h200-nvl").derived_from == "h200-sxm"


def test_a_hardware_db_folder_supplies_its_own_kernel_table(tmp_path: Path) -> None:
    _own_gpu(tmp_path, "h100-nvl")
    data = yaml.safe_load((ROOT / "pdplan" / "data" / "kernel_tables" / "h100-sxm.yaml").read_text())
    data["gpu"] = "h100-nvl"
    data["stack"] = "my own measurements"
    (tmp_path / "kernel_tables").mkdir()
    (tmp_path / "kernel_tables" / "h100-nvl.yaml").write_text(yaml.safe_dump(data))
    assert open_catalog([tmp_path]).kernel_table("h100-nvl").stack == "my own measurements"


def test_packaged_tables_are_unchanged() -> None:
    table = open_catalog().kernel_table("h100-sxm")
    assert table.calibrated
    assert table.derived_from is None
