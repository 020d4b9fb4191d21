"""pdplan.io.files: every way a file can be bad is one SpecError line naming the file (and field)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from pdplan.errors import SpecError
from pdplan.io.files import (
    MAX_SPEC_FILE_BYTES,
    load_spec_file,
    read_text_file,
    read_yaml_mapping,
    validate_spec,
)
from pdplan.specs.hardware import GpuSpec, LinkSpec


class Toy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    size: int


def write(tmp_path: Path, content: str | bytes, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def one_line_error(exc: pytest.ExceptionInfo[SpecError], path: Path) -> str:
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert exc.value.source == str(path)
    return message


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        ("", "empty"),
        ("   \n\n  ", "empty"),
        ("# just a comment\n", "no YAML content"),
        ("- a\n- b\n", "got list"),
        ("hello\n", "got str"),
        ("42\n", "got int"),
        ("a: [1, 2\n", "line 2"),
        ("a: 1\n\tb: 2\n", "line 2"),
        ("a: 'unterminated\n", "line"),
        (b"a: 1\x00\n", "binary"),
        (b"name: caf\xe9\n", "not UTF-8"),
    ],
)
def test_read_yaml_mapping_failures(tmp_path: Path, content: str | bytes, phrase: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(SpecError) as exc:
        read_yaml_mapping(path)
    assert phrase in one_line_error(exc, path)
    assert exc.value.exit_code == 2


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(SpecError, match="file not found") as exc:
        read_text_file(path)
    one_line_error(exc, path)


def test_folder_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="folder") as exc:
        read_text_file(tmp_path)
    one_line_error(exc, tmp_path)


def test_oversized_file(tmp_path: Path) -> None:
    path = write(tmp_path, b"#" * (MAX_SPEC_FILE_BYTES + 1))
    with pytest.raises(SpecError, match="5 MB") as exc:
        read_text_file(path)
    one_line_error(exc, path)


def test_good_mapping_reads(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x  # comment\nsize: 3\n")
    assert read_yaml_mapping(path) == {"name": "x", "size": 3}
    assert read_text_file(path).startswith("name")


def test_yaml_error_has_no_multiline_context(tmp_path: Path) -> None:
    path = write(tmp_path, "a:\n  - 1\n b: 2\n  c: [\n")
    with pytest.raises(SpecError) as exc:
        read_yaml_mapping(path)
    one_line_error(exc, path)


@pytest.mark.parametrize(
    ("data", "field", "phrase"),
    [
        ({"name": "x", "size": 1, "colour": "red"}, "colour", "unknown field"),
        ({"name": "x"}, "size", "required field is missing"),
        ({"name": "x", "size": "big"}, "size", "integer"),
    ],
)
def test_validate_spec_names_field(data: dict[str, object], field: str, phrase: str) -> None:
    with pytest.raises(SpecError) as exc:
        validate_spec(Toy, data, "toy.yaml")
    message = str(exc.value)
    assert message.startswith(f"toy.yaml: {field}: ")
    assert phrase in message
    assert exc.value.field == field
    assert "\n" not in message


def test_validate_spec_counts_further_errors() -> None:
    with pytest.raises(SpecError, match=r"\(and 1 more error\)"):
        validate_spec(Toy, {"colour": "red", "size": 1}, "toy.yaml")
    with pytest.raises(SpecError, match=r"\(and 3 more errors\)"):
        validate_spec(Toy, {"a": 1, "b": 2}, "toy.yaml")


def test_whole_object_error_has_no_placeholder_field(hardware_db: Path) -> None:
    data = yaml.safe_load((hardware_db / "links" / "ib-ndr.yaml").read_text())
    del data["sources"]["efficiency"]
    with pytest.raises(SpecError) as exc:
        validate_spec(LinkSpec, data, "ib.yaml")
    message = str(exc.value)
    assert message.startswith("ib.yaml: sources: ")
    assert "efficiency" in message
    assert "top level" not in message


def test_load_spec_file_gpu(hardware_db: Path) -> None:
    gpu = load_spec_file(GpuSpec, hardware_db / "gpus" / "h100-sxm.yaml")
    assert gpu.name == "h100-sxm"
    assert gpu.memory_bytes == 80 * 2**30


def test_load_spec_file_wrong_unit(tmp_path: Path, hardware_db: Path) -> None:
    text = (hardware_db / "gpus" / "h100-sxm.yaml").read_text()
    path = write(tmp_path, text.replace("3.35 TB/s", "3.35 parsecs"), "g.yaml")
    with pytest.raises(SpecError) as exc:
        load_spec_file(GpuSpec, path)
    message = one_line_error(exc, path)
    assert exc.value.field == "memory_bytes_per_s"
    assert "parsecs" in message
