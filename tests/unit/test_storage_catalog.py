"""The storage-tier catalogue (hardware_db/storage, pdplan/specs/storage.py, pdplan/io/storage.py): every file loads
with its sources, the catalogue and the command line list them, and every bad file is exit 2 with one line naming
the file and the field (the corpus is tests/bad_inputs/storage/)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.specs.storage import STORAGE_FACT_FIELDS
from pdplan.units import GB, GIB

NAMES = [
    "host-dram-pcie5",
    "mooncake-store-2x200g",
    "nvme-gen4-x8",
    "nvme-mooncake-testbed",
    "remote-3fs-100g",
    "remote-3fs-400g",
]

# corpus file -> (field the message must name, a phrase the message must contain)
CORPUS: dict[str, tuple[str, str]] = {
    "zero_capacity.yaml": ("capacity_bytes", "> 0"),
    "no_bandwidth.yaml": ("read_bytes_per_s", "missing"),
    "zero_bandwidth.yaml": ("read_bytes_per_s", "> 0"),
    "no_source.yaml": ("read_bytes_per_s", "source"),
    "ssd_without_drives.yaml": ("drives", "required"),
    "raid_faster_than_drives.yaml": ("read_bytes_per_s", "drives x drive_read_bytes_per_s"),
    "wrong_units.yaml": ("capacity_bytes", "parsecs"),
}


def test_catalogue_lists_and_loads_every_tier() -> None:
    catalog = open_catalog()
    assert catalog.list_storage() == NAMES
    for name in NAMES:
        spec = catalog.storage(name)
        assert spec.name == name
        facts = [f for f in STORAGE_FACT_FIELDS if getattr(spec, f) not in (None, [])]
        assert all(spec.sources[f].strip() for f in facts)


def test_recorded_figures() -> None:
    catalog = open_catalog()
    dram = catalog.storage("host-dram-pcie5")
    assert dram.capacity_bytes == 2 * 1024 * GIB
    assert dram.read_bytes_per_s == 500 * GB  # DualPath's M, docs/mission_features.md §3.3
    assert dram.gpu_path_bytes_per_s == 50 * GB  # vLLM one direction, §6.2
    nvme = catalog.storage("nvme-gen4-x8")
    assert nvme.drives == 8
    assert nvme.read_bytes_per_s == pytest.approx(8 * 6.4 * GB)
    assert catalog.storage("nvme-mooncake-testbed").read_bytes_per_s == 27 * GB  # Mooncake §6.1
    assert catalog.storage("remote-3fs-400g").read_bytes_per_s == 50 * GB  # 400 Gb/s storage NIC
    assert catalog.storage("mooncake-store-2x200g").capacity_bytes == 80 * GIB


def test_a_user_folder_adds_a_tier(tmp_path: Path, hardware_db: Path) -> None:
    (tmp_path / "storage").mkdir()
    text = (hardware_db / "storage" / "host-dram-pcie5.yaml").read_text().replace("host-dram-pcie5", "my-dram")
    (tmp_path / "storage" / "my-dram.yaml").write_text(text)
    assert "my-dram" in open_catalog([tmp_path]).list_storage()


def test_hardware_list_and_show(cli: Callable[..., Any]) -> None:
    result = cli("hardware", "list", "--kind", "storage", "--format", "json")
    assert result.code == 0
    assert [row["name"] for row in json.loads(result.out)] == NAMES
    shown = cli("hardware", "show", "remote-3fs-400g", "--format", "json")
    assert shown.code == 0
    assert json.loads(shown.out)["read_bytes_per_s"] == 50e9
    by_path = cli("hardware", "show", "hardware_db/storage/nvme-gen4-x8.yaml", "--format", "json")
    assert by_path.code == 0
    assert json.loads(by_path.out)["drives"] == 8
    bad_kind = cli("hardware", "list", "--kind", "disks")
    assert bad_kind.code == 2
    assert "storage" in bad_kind.err


def test_validate_recognises_storage_files(cli: Callable[..., Any], hardware_db: Path) -> None:
    result = cli("validate", *sorted((hardware_db / "storage").glob("*.yaml")), "--format", "json")
    assert result.code == 0
    assert {f["kind"] for f in json.loads(result.out)["files"]} == {"storage"}


def test_every_corpus_file_is_covered(bad_inputs: Path) -> None:
    assert {p.name for p in (bad_inputs / "storage").glob("*.yaml")} == set(CORPUS)


@pytest.mark.parametrize("command", ["validate", "show"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_bad_file_is_exit_2_one_line(cli: Callable[..., Any], bad_inputs: Path, name: str, command: str) -> None:
    path = str(bad_inputs / "storage" / name)
    result = cli("validate", path) if command == "validate" else cli("hardware", "show", path)
    field, phrase = CORPUS[name]
    assert result.code == 2, result.err
    lines = result.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    for needle in (name, field, phrase):
        assert needle in lines[0], (needle, lines[0])
