"""Every bad hardware input is exit 2 with one ``error:`` line on stderr naming the file (and field).

The corpus lives in ``tests/bad_inputs/`` (text files); binary junk, non-UTF-8 bytes, a missing file and a
folder are made per test in ``tmp_path``. Each case runs through ``pdplan validate FILE`` and
``pdplan hardware show PATH``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# corpus file -> (field the message must name or None, a phrase the message must contain)
CORPUS: dict[str, tuple[str | None, str]] = {
    "gpu_malformed.yaml": (None, "line 16"),
    "gpu_tab_indent.yaml": (None, "line 23"),
    "gpu_empty.yaml": (None, "empty"),
    "gpu_comments_only.yaml": (None, "no YAML content"),
    "gpu_wrong_units.yaml": ("memory_bytes_per_s", "parsecs"),
    "gpu_negative.yaml": ("memory_bytes", "> 0"),
    "gpu_zero.yaml": ("bf16_flops_per_s", "> 0"),
    "gpu_unknown_field.yaml": ("hbm_stacks", "unknown field"),
    "gpu_missing_field.yaml": ("memory_bytes", "missing"),
    "gpu_bad_enum.yaml": ("vendor", "nvidia"),
    "gpu_bool_tdp.yaml": ("tdp_w", "number"),
    "gpu_bad_name.yaml": ("name", "pattern"),
    "gpu_no_source.yaml": ("memory_bytes_per_s", "source"),
    "gpu_price_inverted.yaml": ("price", "low_usd_per_gpu_hour"),
    "gpu_list.yaml": (None, "mapping"),
    "gpu_scalar.yaml": (None, "mapping"),
    "link_wrong_units.yaml": ("line_rate_bytes_per_s", "furlongs"),
    "link_negative_latency.yaml": ("per_message_latency_s", "> 0"),
    "link_zero_rate.yaml": ("line_rate_bytes_per_s", "> 0"),
    "link_efficiency_over_one.yaml": ("efficiency", "<= 1"),
    "link_unknown_field.yaml": ("mtu", "unknown field"),
    "link_no_source.yaml": ("efficiency", "source"),
    "link_bad_scope.yaml": ("scope", "inter-node"),
}

COMMANDS = {
    "validate": lambda path: ["validate", path],
    "show": lambda path: ["hardware", "show", path],
}


def _generated(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """Bad inputs that are not stored as corpus files: (path, phrase the message must contain)."""
    if kind == "binary":
        path = tmp_path / "junk.yaml"
        path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00name: x\n\xff\xfe\x00")
        return path, "binary"
    if kind == "not-utf8":
        path = tmp_path / "latin1.yaml"
        path.write_bytes("name: caf\xe9-gpu\n".encode("latin-1"))
        return path, "UTF-8"
    if kind == "missing":
        return tmp_path / "no-such-gpu.yaml", "not found"
    if kind == "folder":
        path = tmp_path / "folder.yaml"
        path.mkdir()
        return path, "folder"
    raise AssertionError(kind)


def assert_one_error_line(result: Any, *needles: str) -> str:
    """Exit 2 and exactly one non-empty stderr line, ``error: ...``, containing every needle."""
    assert result.code == 2, (result.code, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    line = lines[0]
    assert line.startswith("error: "), line
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in line, (needle, line)
    return line


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_file_is_exit_2_one_line(cli: Callable[..., Any], bad_inputs: Path, name: str, command: str) -> None:
    field, phrase = CORPUS[name]
    path = bad_inputs / name
    assert path.is_file(), f"corpus file {name} is missing"
    result = cli(*COMMANDS[command](str(path)))
    needles = [name, phrase] + ([field] if field else [])
    assert_one_error_line(result, *needles)
    if command == "show":
        assert result.out == ""


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", ["binary", "not-utf8", "missing", "folder"])
def test_generated_bad_file_is_exit_2_one_line(
    cli: Callable[..., Any], tmp_path: Path, kind: str, command: str
) -> None:
    path, phrase = _generated(tmp_path, kind)
    result = cli(*COMMANDS[command](str(path)))
    assert_one_error_line(result, path.name, phrase)


def test_oversized_file_is_exit_2(cli: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("notes:\n" + "  - padding padding padding padding\n" * 160_000)
    assert_one_error_line(cli("validate", path), "huge.yaml", "5 MB")


def test_every_corpus_file_is_covered(bad_inputs: Path) -> None:
    stored = {p.name for p in bad_inputs.glob("*.yaml")}
    assert stored == set(CORPUS)


@pytest.mark.parametrize("name", ["h1OO", "H1OO-SXM", "nvlink9", "b2000"])
def test_unknown_name_is_exit_2_one_line(cli: Callable[..., Any], name: str) -> None:
    line = assert_one_error_line(cli("hardware", "show", name), repr(name))
    assert "unknown" in line


def test_validate_names_each_bad_file_and_passes_good_ones(
    cli: Callable[..., Any], bad_inputs: Path, hardware_db: Path
) -> None:
    good = hardware_db / "gpus" / "h100-sxm.yaml"
    bad = [bad_inputs / "gpu_wrong_units.yaml", bad_inputs / "link_no_source.yaml"]
    result = cli("validate", good, *bad, "--format", "json")
    line = assert_one_error_line(result, "gpu_wrong_units.yaml")
    assert "1 more" in line
    import json

    doc = json.loads(result.out)
    assert doc["ok"] is False
    assert [e["file"] for e in doc["errors"]] == [str(p) for p in bad]
    assert all(Path(e["file"]).name in e["message"] for e in doc["errors"])
    assert [f["ok"] for f in doc["files"]] == [True, False, False]
