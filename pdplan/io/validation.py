"""``pdplan validate``: detect what kind of input a file is and schema-check it with the loader for that kind."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError
from pdplan.io.files import load_spec_file, read_yaml_mapping
from pdplan.io.hf_config import load_hf_config
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.io.models import load_model_yaml
from pdplan.io.scenario import SCENARIO_KEYS, load_scenario
from pdplan.io.storage import STORAGE_KEYS, load_storage
from pdplan.io.workloads import load_workload
from pdplan.specs.hardware import GpuSpec, LinkSpec

Validator = Callable[[Path], object]


@dataclass(frozen=True)
class FileCheck:
    """Outcome for one file: its detected kind and the one-line error, if any."""

    file: str
    kind: str
    ok: bool
    error: str | None


@dataclass(frozen=True)
class ValidationResult:
    """Outcome for all files; ``ok`` only if every file passed."""

    files: tuple[FileCheck, ...]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)


def _gpu(path: Path) -> object:
    return load_spec_file(GpuSpec, path)


def _link(path: Path) -> object:
    return load_spec_file(LinkSpec, path)


VALIDATORS: dict[str, Validator] = {
    "scenario": load_scenario,
    "kernel-table": load_kernel_table,
    "gpu": _gpu,
    "link": _link,
    "storage": load_storage,
    "model": load_model_yaml,
    "hf-config": load_hf_config,
    "workload": load_workload,
    "inference-perf": load_workload,
    "mooncake-trace": load_workload,
}
"""Every kind of input file ``pdplan validate`` knows, with its loader (an explicit table: no import-time registry)."""

_KIND_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scenario", SCENARIO_KEYS),
    ("kernel-table", ("gemm", "decode_attention")),
    ("gpu", ("scale_up_fabric", "bf16_flops_per_s")),
    ("link", ("line_rate_bytes_per_s",)),
    ("storage", STORAGE_KEYS),
    ("model", ("num_layers", "hidden_size")),
    ("workload", ("input_tokens", "output_tokens", "trace", "sessions", "shared_prefix")),
    ("inference-perf", ("data", "load")),
)
"""Kinds in detection order, each recognised by any of its top-level keys (a scenario's inline workload block
holds workload keys, so scenarios are tried first; docs/reuse_workloads.md §7)."""


def detect_kind(path: Path, data: dict[str, Any] | None) -> str:
    """The kind of an input file, from its suffix and top-level keys."""
    if path.suffix.lower() == ".json":
        return "hf-config"
    if path.suffix.lower() == ".jsonl":
        return "mooncake-trace"
    assert data is not None
    for kind, keys in _KIND_KEYS:
        if any(key in data for key in keys):
            return kind
    kinds = ", ".join(sorted(VALIDATORS))
    raise SpecError(f"cannot tell what kind of file this is (expected one of: {kinds})", source=str(path))


def check_file(path: Path) -> FileCheck:
    """Validate one file; never raises for bad input."""
    kind = "unknown"
    try:
        data = None if path.suffix.lower() in (".json", ".jsonl") else read_yaml_mapping(path)
        kind = detect_kind(path, data)
        VALIDATORS[kind](path)
    except SpecError as err:
        return FileCheck(file=str(path), kind=kind, ok=False, error=str(err))
    return FileCheck(file=str(path), kind=kind, ok=True, error=None)


def validate_files(paths: Sequence[Path]) -> ValidationResult:
    """Validate every file; the result lists each with its kind and error."""
    return ValidationResult(files=tuple(check_file(Path(p)) for p in paths))
