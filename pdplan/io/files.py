"""Reading YAML files into validated specs, with every failure turned into one-line :class:`SpecError`.

One place turns the ways a file can be bad — missing, a folder, empty, binary junk, malformed YAML, not a
mapping, an unknown field, a wrong value — into a single line naming the file, the field and what is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from pdplan.errors import SpecError
from pdplan.specs.base import SpecT, validate_spec

MAX_SPEC_FILE_BYTES = 5_000_000
DEEP_MESSAGE = "nested too deeply to be a pdplan input (the parser's recursion limit, about 1,000 levels)"
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it (its wheels are), else the pure-Python one: the same
documents and errors, about 10x faster on the kernel tables read at every start."""


class _UniqueKeyLoader(SAFE_LOADER):  # type: ignore[misc]
    """:data:`SAFE_LOADER` refusing a mapping that repeats a key (YAML 1.2 requires keys to be unique; PyYAML keeps
    the last one silently, so ``tp: 8`` then ``tp: 4`` would price TP 4 without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (each key once per mapping)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load`` through :data:`SAFE_LOADER`, refusing duplicate keys."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def packaged_yaml(name: str) -> dict[str, Any]:
    """A data file shipped in ``pdplan/data/`` (``name``, e.g. ``serving_defaults.yaml``) as a mapping, without its
    ``schema_version``: the loaders of the packaged defaults validate the rest."""
    from importlib import resources

    data: dict[str, Any] = parse_yaml((resources.files("pdplan") / "data" / name).read_text(encoding="utf-8"))
    data.pop("schema_version")
    return data


def check_input_file(path: Path) -> None:
    """``path`` names a readable regular file (SpecError otherwise): a folder, a FIFO, a device node or a socket is
    refused before it is opened, so that a named pipe cannot block the command and ``/dev/zero`` cannot fill memory."""
    import stat as stat_mod

    where = str(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise SpecError("file not found", source=where) from None
    except OSError as err:
        raise SpecError(f"cannot read: {err.strerror or err}", source=where) from None
    if stat_mod.S_ISDIR(mode):
        raise SpecError("is a folder, expected a file", source=where)
    if not stat_mod.S_ISREG(mode):
        raise SpecError("is not a regular file (a pipe, socket or device), expected a file", source=where)
    if not os.access(path, os.R_OK):
        raise SpecError("cannot read: permission denied", source=where)


def read_text_file(path: Path) -> str:
    """Text of a small input file; SpecError if missing, not a regular file, unreadable, too large, binary or not
    UTF-8. At most :data:`MAX_SPEC_FILE_BYTES` + 1 bytes are ever read."""
    where = str(path)
    check_input_file(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_SPEC_FILE_BYTES + 1)
    except OSError as err:
        raise SpecError(f"cannot read: {err.strerror or err}", source=where) from None
    if len(raw) > MAX_SPEC_FILE_BYTES:
        raise SpecError("file is over 5 MB; input files must be under 5 MB", source=where)
    if b"\x00" in raw:
        raise SpecError("binary data, expected a UTF-8 text file", source=where)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(f"not UTF-8 text (byte {err.start})", source=where) from None


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping at the top level."""
    text = read_text_file(path)
    if not text.strip():
        raise SpecError("file is empty, expected a YAML mapping", source=str(path))
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or "malformed YAML"
        raise SpecError(f"{line}{problem}", source=str(path)) from None
    except RecursionError:
        raise SpecError(DEEP_MESSAGE, source=str(path)) from None
    if data is None:
        raise SpecError("file has no YAML content, expected a mapping", source=str(path))
    if not isinstance(data, dict):
        raise SpecError(f"expected a YAML mapping of field: value, got {type(data).__name__}", source=str(path))
    return data


def load_spec_file(cls: type[SpecT], path: Path) -> SpecT:
    """Read and validate one YAML spec file."""
    return validate_spec(cls, read_yaml_mapping(path), str(path))
